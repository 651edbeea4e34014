"""A sweep's view: the index (`localfa.view.index`) and, beside it, one page per trace.

``localfa view runs/week48`` writes ``runs/week48/view.html`` (the index) and
``runs/week48/view-traces/00000.html, 00001.html, ...``: each trace's page is written once,
holds every diagnosis of that trace, and is read by the browser only when its row is opened.
A page whose content has not changed is not rewritten, so viewing a grown sweep again rewrites
only what is new.

`localfa view` replaces only files it wrote: each page carries a generator mark
(`localfa.view.style.GENERATOR`), and a file without it (the user's own ``view.html``, a
folder of other files where the pages would go) is refused unless the caller forces it; even
then, nothing it did not write is deleted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from localfa.durable import fsync_dir, replace_atomically, replace_durably
from localfa.view.html import e
from localfa.view.index import build_index, page_name
from localfa.view.page import build_page
from localfa.view.records import TraceGroup, ViewError
from localfa.view.style import CSP, GENERATOR

PAGE_FILE = re.compile(r"\d{5,}\.html")
# Pages written before the generator mark existed began exactly so (a trace view, no script).
_OLD_PAGE = f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{CSP}">'
_HEAD_BYTES = 4096


@dataclass(frozen=True)
class SweepView:
    index: Path
    pages: Path
    written: int  # trace pages written (the others were unchanged)
    total: int  # trace pages


def pages_folder(index: Path) -> Path:
    """Where the trace pages of the index `index` go: ``view.html`` -> ``view-traces/``."""
    return index.with_name(index.stem + "-traces")


def written_by_view(path: Path) -> bool:
    """The file is a page `localfa view` wrote (it carries the generator mark, or is a trace view
    from before the mark)."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    return GENERATOR in head or head.startswith(_OLD_PAGE)


def check_replaceable(out: Path, force: bool = False, pages: Path | None = None) -> None:
    """Raise `ViewError` when writing `out` (and the trace pages in `pages`) would replace a file
    `localfa view` did not write, unless `force`."""
    hint = "give another --out, or add --force to replace it"
    if out.is_dir():
        raise ViewError(out, "is a folder; --out takes the page's file name")
    if out.exists() and not force and not written_by_view(out):
        raise ViewError(out, f"exists and is not a page localfa view wrote: left as it is ({hint})")
    if pages is None or not pages.exists():
        return
    if not pages.is_dir():
        raise ViewError(pages, "is a file; the trace pages go in a folder of this name")
    if force:
        return
    foreign = sorted(p.name for p in pages.iterdir() if not (PAGE_FILE.fullmatch(p.name) and written_by_view(p)))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ViewError(pages, f"holds files localfa view did not write ({shown}): left as they are ({hint})")


def _write_if_changed(path: Path, text: str) -> bool:
    data = text.encode("utf-8")
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except OSError:
        pass
    replace_atomically(path, data)
    return True


def remove_pages(folder: Path, keep: frozenset[str] = frozenset()) -> None:
    """Delete the trace pages `localfa view` wrote in `folder` (but those named in `keep`), and
    the folder when that leaves it empty; nothing else is touched."""
    if not folder.is_dir():
        return
    for page in folder.iterdir():
        if PAGE_FILE.fullmatch(page.name) and page.name not in keep and written_by_view(page):
            page.unlink()
    if not any(folder.iterdir()):
        folder.rmdir()


def write_sweep_view(groups: list[TraceGroup], out: str | Path, title: str, force: bool = False, note: str = "") -> SweepView:
    """Write the index at `out` and one page per trace group in `pages_folder(out)` (see the
    module doc); trace pages this writer left there before and that no group needs now go."""
    index = Path(out)
    pages = pages_folder(index)
    check_replaceable(index, force, pages)
    pages.mkdir(parents=True, exist_ok=True)
    back = f'<p class="note"><a href="../{e(quote(index.name))}">← every diagnosis</a> · {e(title)}</p>'
    written = 0
    for gid, group in enumerate(groups):
        written += _write_if_changed(pages / page_name(gid), build_page([group], title=group.trace_id, nav=back))
    remove_pages(pages, keep=frozenset(page_name(gid) for gid in range(len(groups))))
    fsync_dir(pages)
    replace_durably(index, build_index(groups, pages.name, title, note))
    return SweepView(index, pages, written, len(groups))
