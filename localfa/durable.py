"""Making a file's creation or replacement survive a crash: the directory entry too, not only the data.

Every file localfa rewrites in place (a run's manifest, report pages, the response cache's main
file) goes through `replacing` / `replace_durably`: the new content is written to a temporary
file beside the target, fsynced, renamed over the target, and the folder is fsynced, so a reader
(or a crash at any point) sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import errno
import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

# Causes of a failed write that may be gone on the next try (space freed, a device back): only then
# is "run the same command again" worth saying; a read-only or missing folder stays so.
PASSING_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN, errno.EINTR, errno.ETIMEDOUT})


def may_pass(exc: OSError) -> bool:
    """Whether a write that failed with `exc` may succeed when run again unchanged."""
    return exc.errno in PASSING_ERRNOS


def fsync_dir(path: Path) -> None:
    """fsync a folder, so a file created or renamed in it is there after a power loss (best effort)."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """fsync a file's content (what was written to it through any handle, or by another library)."""
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replacing(path: str | Path, sync: bool = True) -> Iterator[Path]:
    """A new, empty temporary file beside `path` to write the new content into (by any means:
    a handle, `shutil.copyfile`, SQLite). When the block ends cleanly the file is fsynced and
    replaces `path`, and the folder is fsynced; when it raises, the temporary file is removed and
    `path` is left as it was.

    The name is hidden and unique (``.NAME.<pid>.<random>.tmp``), so two writers never share one
    and folder scans that skip hidden files never see it; it is created with the permissions a
    plain ``open(path, "w")`` would give. `sync` False skips both fsyncs (`replace_atomically`).
    """
    target = Path(path)
    while True:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:
            continue
    try:
        yield tmp
        if sync:
            fsync_file(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(target.parent)


def replace_durably(path: str | Path, data: bytes | str) -> Path:
    """Write `data` (text as UTF-8) to `path` through `replacing`; returns the path."""
    with replacing(path) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def replace_atomically(path: str | Path, data: bytes | str) -> Path:
    """`replace_durably` without its fsyncs: a reader still never sees half a file, but a power
    loss may lose the new content. For many small files that can be written again (a sweep's
    trace pages: two fsyncs each made 250 pages take 3.5 s here); the caller fsyncs their folder."""
    with replacing(path, sync=False) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def move_aside(path: str | Path, tag: str) -> Path:
    """Rename `path` to ``NAME.TAG`` beside it (a damaged file kept for a look, out of the way of
    the one that replaces it), durably; returns the new path."""
    source = Path(path)
    target = source.with_name(f"{source.name}.{tag}")
    os.replace(source, target)
    fsync_dir(source.parent)
    return target
