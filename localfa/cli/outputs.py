"""Files a command is told to write: refused in one line before any work, never a traceback after it.

`diagnose --out` writes once every trace is done (minutes to hours of engine time): a folder that
does not exist, a read-only one, or a folder given as the file must be said at the start.
`check_output_file` tries what the write will do (opens the file for appending, and removes it
again when it made it); `cannot_write` is the one line for a write that fails anyway. Whether to
offer "run the same command again" depends on the cause (`may_pass`): a full disk empties, a
read-only folder stays read-only (`localfa.durable.may_pass`).
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from localfa.cli.errors import fail
from localfa.durable import may_pass


def why(exc: OSError) -> str:
    """The cause of a failed write in a few words ("Permission denied")."""
    return exc.strerror or type(exc).__name__


def check_output_file(path: Path, option: str) -> None:
    """Exit with one ``error:`` line (status 2) unless `path` can be written as a file."""
    if path.is_dir():
        fail(str(path), f"{option}: this is a folder; give a file name")
    folder = path.parent
    if not folder.is_dir():
        fail(str(path), f"{option}: the folder {folder} does not exist")
    existed = path.exists()
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        fail(str(path), f"{option}: cannot write here: {why(exc)}")
    if not existed:
        path.unlink(missing_ok=True)


def cannot_write(path: Path | str, exc: OSError, what: str = "cannot write") -> NoReturn:
    """One line for a write that failed (status 1), offering a rerun only where it may pass."""
    hint = "; free the space (or fix the device) and run the same command again" if may_pass(exc) else ""
    fail(str(getattr(exc, "filename", None) or path), f"{what}: {why(exc)}{hint}", code=1)
