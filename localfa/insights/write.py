"""`localfa summarize RUN_DIR`: the summary's files beside the run's results.

A record the categorise pass did not mark gets its step's kind from its trace, read as the trace
view reads it (the run's own trace files, or a folder named with --traces).

Writes RUN_DIR/summary.md, RUN_DIR/summary.jsonl, RUN_DIR/summary-view.html (the trace view of
every exemplar, read from the run's own trace files as its manifest lists them) and rewrites
RUN_DIR/report.html with the "What failed" section. Returns the summary for the caller to print.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from localfa.durable import replace_durably
from localfa.insights.render import SUMMARY_VIEW, exemplar_anchors, summary_jsonl, summary_markdown
from localfa.insights.summary import UNKNOWN_KIND, Summary, step_kind, summarize
from localfa.redact import redact
from localfa.results import ResultRecord
from localfa.terminal import terminal_safe
from localfa.view.records import TraceFiles, group_records

SUMMARY_MD = "summary.md"
SUMMARY_JSONL = "summary.jsonl"


@dataclass
class Written:
    summary: Summary
    markdown: str
    files: list[Path]
    view_problem: str | None = None


def step_kinds(records: list[ResultRecord], readable: TraceFiles) -> dict[str, list[str]]:
    """Trace id -> its steps' kinds, for the traces whose records lack one (read only where
    `readable` allows, as the trace view reads them; a trace that cannot be read is left out)."""
    lacking = {r.trace: r for r in records if not r.error and r.step is not None and step_kind(r) == UNKNOWN_KIND}
    groups = group_records([r.record() for r in lacking.values()], readable=readable)
    return {g.trace_id: [s.kind for s in g.trace.steps] for g in groups if g.trace is not None}


def write_summary(run_dir: str | Path, max_groups: int = 20, folders: tuple[str, ...] = ()) -> Written:
    from localfa.bench.report import load_run, write_report
    from localfa.view import write_view

    run = Path(run_dir)
    records, _ = load_run(run)
    readable = TraceFiles.of_run(run, folders)
    summary = summarize(records, max_groups, kinds=step_kinds(records, readable))
    anchors = exemplar_anchors(summary)
    files: list[Path] = []
    problem = None
    wanted = {(e.trace, e.method, e.seed) for g in summary.groups for e in g.exemplars}
    order = {tid: i for i, tid in enumerate(anchors)}
    chosen = sorted((r for r in records if (r.trace, r.method, int(r.seed)) in wanted), key=lambda r: order.get(r.trace, 0))
    if chosen:
        try:
            files.append(
                write_view([r.record() for r in chosen], run / SUMMARY_VIEW, readable=readable, title="localfa — exemplars of what failed")
            )
        except OSError as exc:
            problem, anchors = f"{run / SUMMARY_VIEW}: {exc.strerror or exc}", {}
    markdown = redact(terminal_safe(summary_markdown(summary, anchors)))  # read in terminals too (`cat summary.md`)
    replace_durably(run / SUMMARY_MD, markdown)
    replace_durably(run / SUMMARY_JSONL, "".join(redact(line) + "\n" for line in summary_jsonl(summary)))
    files += [run / SUMMARY_MD, run / SUMMARY_JSONL]
    _, html_path = write_report(run, insights=summary, anchors=anchors)
    files.append(html_path)
    return Written(summary, markdown, files, problem)
