"""`localfa summarize RUN_DIR [RUN_DIR_B]`: what failed across a sweep, or how two sweeps differ.

One run: counts by category, agent, step kind and position (per method and their consensus),
groups of like diagnoses with exemplars; printed as markdown and written beside the results
(summary.md, summary.jsonl, summary-view.html, and the "What failed" section of report.html).
Two runs: per method and category, the share of traces in A and in B, the shift and its 95%
interval, one `name=value` line each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from localfa.cli.errors import fail
from localfa.cli.outputs import cannot_write, check_output_file
from localfa.terminal import terminal_safe


def summarize(
    runs: Annotated[list[Path], typer.Argument(help="A run directory (localfa bench --out), or two to compare (before, after)")],
    max_groups: Annotated[int, typer.Option("--max-groups", min=1, help="Show at most this many groups of like diagnoses")] = 20,
    jsonl: Annotated[
        Optional[Path], typer.Option("--jsonl", help="Also write the summary (or the comparison) as JSON Lines to this file")
    ] = None,
    traces: Annotated[
        Optional[list[Path]], typer.Option("--traces", help="A folder whose trace files the exemplars' view may read (repeatable)")
    ] = None,
) -> None:
    """Summarise what failed across a sweep's diagnoses (no model needed), or compare two sweeps."""
    from localfa.bench.report import ReportError, load_run

    if len(runs) > 2:
        fail(" ".join(map(str, runs)), "give one run directory, or two to compare")
    if jsonl is not None:
        check_output_file(jsonl, "--jsonl")
    if len(runs) == 2:
        import json

        from localfa.insights.compare import compare
        from localfa.insights.render import shifts_text

        try:
            a, _ = load_run(runs[0])
            b, _ = load_run(runs[1])
        except ReportError as exc:
            fail(exc.path or str(runs[0]), exc.message)
        shifts = compare(a, b)
        if not shifts:
            fail(f"{runs[0]} {runs[1]}", "no diagnosis names a step in both runs: nothing to compare")
        for line in shifts_text(shifts):
            typer.echo(terminal_safe(line))
        if jsonl:
            rows = [
                {
                    "method": s.method,
                    "category": s.category,
                    "traces_a": s.n_a,
                    "traces_b": s.n_b,
                    "share_a": s.share_a,
                    "share_b": s.share_b,
                }
                | {"shift": s.shift, "ci95": list(s.ci95), "significant": s.significant}
                for s in shifts
            ]
            try:
                jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
            except OSError as exc:
                cannot_write(jsonl, exc)
        return
    from localfa.insights.write import write_summary

    try:
        written = write_summary(runs[0], max_groups, tuple(str(t) for t in traces or ()))
    except ReportError as exc:
        fail(exc.path or str(runs[0]), exc.message)
    except OSError as exc:
        fail(str(getattr(exc, "filename", None) or runs[0]), f"cannot write the summary: {exc.strerror or exc}")
    typer.echo(terminal_safe(written.markdown), nl=False)
    if jsonl:
        import shutil

        try:
            shutil.copyfile(runs[0] / "summary.jsonl", jsonl)
        except OSError as exc:
            cannot_write(jsonl, exc)
    if written.view_problem:
        typer.echo(f"warning: {written.view_problem}", err=True)
    typer.echo("wrote " + ", ".join(str(f) for f in written.files), err=True)
