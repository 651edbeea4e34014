"""Process trees from /proc (Linux): what a server started, and whether any of it is still alive."""

from __future__ import annotations

import os
from pathlib import Path


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def children(pid: int) -> set[int]:
    """The live direct children of `pid`."""
    return {p for p in descendants(pid) if (st := _stat(p)) is not None and st[1] == pid}


def descendants(root: int) -> set[int]:
    """Every live process below `root` (children, grandchildren, ...)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                parents.setdefault(st[1], []).append(int(entry))
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pids: set[int]) -> set[int]:
    """The pids that still run (zombies count as gone: they hold no port and no memory)."""
    return {p for p in pids if (st := _stat(p)) is not None and st[0] not in ("Z", "X")}


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
