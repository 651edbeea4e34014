"""One error type for bad trace input, and one way to report it on the command line.

Loaders raise only `TraceError`, whose text names the file and says what is wrong and where,
so the CLI can print it as one line (`fail`) and a library caller can show it as is.
"""

from __future__ import annotations

import sys
from typing import NoReturn

EXIT_BAD_INPUT = 2


def one_line(text: str, limit: int = 2000) -> str:
    """Collapse whitespace (an error must stay on one line) and cap the length."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class TraceError(Exception):
    """Bad trace input. ``str(e) == f"{path}: {message}"``."""

    def __init__(self, path: str, message: str) -> None:
        self.path = str(path)
        self.message = one_line(message)  # it is printed as one line; keep it one everywhere
        super().__init__(f"{self.path}: {self.message}")


def fail(path: str | None, message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``error: <path>: <message>`` as one line on stderr and exit with `code` (2).

    For every CLI command that rejects its input; `path` may be None for errors that are not
    about a file.
    """
    prefix = f"error: {one_line(str(path))}: " if path is not None else "error: "
    print(prefix + one_line(message), file=sys.stderr, flush=True)
    raise SystemExit(code)


def fail_trace(err: TraceError) -> NoReturn:
    """`fail` for a `TraceError`."""
    fail(err.path, err.message)
