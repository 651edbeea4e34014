"""The one shape of a located error: something wrong in a named file (or field), said in one line.

Trace loading, sweeps, results stores and reports all raise subclasses of `LocatedError`, so the
command line prints each as ``error: <path>: <message>`` and a library caller can read `.path`
and `.message` without knowing which layer failed.
"""

from __future__ import annotations

from pathlib import Path

from localfa.terminal import terminal_safe


def one_line(text: str, limit: int = 2000) -> str:
    """Collapse whitespace (an error must stay on one line), drop terminal escapes (a name in a
    trace may carry one: `localfa.terminal`) and cap the length."""
    flat = " ".join(terminal_safe(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class LocatedError(Exception):
    """``str(e) == f"{path}: {message}"`` (just the message when there is no path)."""

    def __init__(self, path: str | Path | None, message: str) -> None:
        self.path = None if path is None else str(path)
        self.message = one_line(message)
        super().__init__(f"{one_line(self.path)}: {self.message}" if self.path is not None else self.message)
