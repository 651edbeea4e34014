"""The command line's one way to refuse input: one `error:` line on stderr and exit status 2."""

from __future__ import annotations

import sys
from typing import NoReturn

from localfa.errors import LocatedError, one_line

EXIT_BAD_INPUT = 2


def fail(path: str | None, message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``error: <path>: <message>`` as one line on stderr and exit with `code` (2).

    `path` may be None for errors that are not about a file.
    """
    prefix = f"error: {one_line(str(path))}: " if path is not None else "error: "
    print(prefix + one_line(message), file=sys.stderr, flush=True)
    raise SystemExit(code)


def fail_located(err: LocatedError) -> NoReturn:
    """`fail` for any `LocatedError` (bad trace, sweep, store or report input)."""
    fail(err.path, err.message)


fail_trace = fail_located
