"""Seeing a diagnosis: a self-contained HTML page per results file, and charts for the report.

`localfa view RESULTS.jsonl|RUN_DIR` and `localfa diagnose --html FILE` write the trace view
(`page.build_page`); `localfa report` embeds `charts.report_charts`. Nothing here fetches anything:
styles are inline, charts are inline SVG, and the trace view carries no script at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from localfa.traces.model import Trace

if TYPE_CHECKING:
    from localfa.view.records import TraceFiles


def write_view(
    records: list[dict[str, Any]],
    out: str | Path,
    traces: dict[str, Trace] | None = None,
    readable: "TraceFiles | None" = None,
    title: str = "localfa diagnoses",
) -> Path:
    """Group `records` by trace, take each trace from `traces` or read it where `readable` allows
    (`localfa.view.records.TraceFiles`: never a file only a record names), write the page."""
    from localfa.view.page import write_page
    from localfa.view.records import group_records

    return write_page(group_records(records, traces, readable), out, title)
