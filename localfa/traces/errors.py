"""The one error type for bad trace input: its text names the file and says what is wrong, where."""

from __future__ import annotations

from localfa.errors import LocatedError, one_line

__all__ = ["TraceError", "one_line"]


class TraceError(LocatedError):
    """Bad trace input. ``str(e) == f"{path}: {message}"``."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(str(path), message)
