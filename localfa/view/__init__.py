"""Seeing a diagnosis: self-contained HTML pages of results, and charts for the report.

`localfa view RESULTS.jsonl|RUN_DIR` and `localfa diagnose --html FILE` write the trace view
(`page.build_page`): one page for one trace, else a sweep index (`index`, one row per diagnosis)
beside one page per trace (`sweep`). `localfa report` embeds `charts.report_charts`. Nothing here
fetches anything: styles are inline, charts are inline SVG, the trace view carries no script, and
the index runs one inline script that its content security policy names by hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from localfa.traces.model import Trace

if TYPE_CHECKING:
    from localfa.view.records import TraceFiles


def write_view(
    records: list[dict[str, Any]],
    out: str | Path,
    traces: dict[str, Trace] | None = None,
    readable: "TraceFiles | None" = None,
    title: str = "localfa diagnoses",
    warn: Callable[[str], None] | None = None,
) -> Path:
    """Group `records` by trace, take each trace from `traces` or read it where `readable` allows
    (`localfa.view.records.TraceFiles`: never a file only a record names), write the page; `warn`
    hears of each trace file changed since its diagnoses were made (the page says so too)."""
    from localfa.view.page import write_page
    from localfa.view.records import group_records

    groups = group_records(records, traces, readable)
    _warn_changed(groups, warn)
    return write_page(groups, out, title)


def _warn_changed(groups: list, warn: Callable[[str], None] | None) -> None:
    """Tell `warn` of each trace file changed since its diagnoses were made (`changed_note`)."""
    from localfa.view.records import changed_note

    for note in filter(None, map(changed_note, groups)):
        if warn is not None:
            warn(note)


@dataclass(frozen=True)
class Written:
    """What `write_browsable` wrote: the page to open, and the trace pages' folder when it wrote an index."""

    page: Path
    diagnoses: int
    traces: int
    pages: Path | None = None


def write_browsable(
    records: list[dict[str, Any]],
    out: str | Path,
    traces: dict[str, Trace] | None = None,
    readable: "TraceFiles | None" = None,
    title: str = "localfa diagnoses",
    force: bool = False,
    one_page: bool = False,
    warn: Callable[[str], None] | None = None,
) -> Written:
    """The view a person opens: for one trace (or `one_page`) its page, else the sweep index with
    one page per trace beside it (`localfa.view.sweep`). Replaces only files `localfa view` wrote,
    unless `force` (`ViewError` otherwise); `warn` hears of each trace file changed since its
    diagnoses were made (the pages say so too)."""
    from localfa.view.page import write_page
    from localfa.view.records import group_records
    from localfa.view.sweep import check_replaceable, pages_folder, remove_pages, write_sweep_view

    target = Path(out)
    check_replaceable(target, force)
    groups = group_records(records, traces, readable)
    _warn_changed(groups, warn)
    if one_page or len(groups) == 1:
        written = Written(write_page(groups, target, title), len(records), len(groups))
        remove_pages(pages_folder(target))  # an index this page replaces leaves no pages behind
        return written
    done = write_sweep_view(groups, target, title, force)
    return Written(done.index, len(records), len(groups), done.pages)
