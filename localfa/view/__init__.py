"""Seeing a diagnosis: a self-contained HTML page per results file, and charts for the report.

`localfa view RESULTS.jsonl|RUN_DIR` and `localfa diagnose --html FILE` write the trace view
(`page.build_page`); `localfa report` embeds `charts.report_charts`. Nothing here fetches anything:
styles are inline, charts are inline SVG, and the trace view carries no script at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localfa.traces.model import Trace


def write_view(
    records: list[dict[str, Any]],
    out: str | Path,
    traces: dict[str, Trace] | None = None,
    base: Path | None = None,
    title: str = "localfa diagnoses",
) -> Path:
    """Group `records` by trace, load the traces they name (unless given), write the page."""
    from localfa.view.page import write_page
    from localfa.view.records import group_records

    return write_page(group_records(records, traces, base), out, title)
