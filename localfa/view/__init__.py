"""Seeing a diagnosis: a self-contained HTML page per results file, and charts for the report.

`localfa view RESULTS.jsonl|RUN_DIR` and `localfa diagnose --html FILE` write the trace view
(`page.build_page`); `localfa report` embeds `charts.report_charts`. Nothing here fetches anything:
styles are inline, charts are inline SVG, and the trace view carries no script at all.
"""

from __future__ import annotations

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
    from localfa.view.records import changed_note, group_records

    groups = group_records(records, traces, readable)
    for note in filter(None, map(changed_note, groups)):
        if warn is not None:
            warn(note)
    return write_page(groups, out, title)
