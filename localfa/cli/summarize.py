"""`localfa summarize RUN_DIR [RUN_DIR_B]`: what failed across a sweep, or how two sweeps differ.

One run: counts by category, agent, step kind and position (per method and their consensus),
groups of like diagnoses with exemplars; printed as markdown and written beside the results
(summary.md, summary.jsonl, summary-view.html, and the "What failed" section of report.html).
Two runs (before, after): per method, step and agent accuracy in each and the difference with
its 95% interval; the verdicts that moved (fixed, broke, changed); and, where records carry
categories, each category's share in each and its shift.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from localfa.cli.errors import fail
from localfa.cli.outputs import cannot_write, check_output_file
from localfa.terminal import terminal_safe


def summarize(
    runs: Annotated[
        list[Path], typer.Argument(metavar="RUN_DIR", help="A run directory (localfa bench --out), or two to compare (before, after)")
    ],
    max_groups: Annotated[int, typer.Option("--max-groups", min=1, help="Show at most this many groups of like diagnoses")] = 20,
    jsonl: Annotated[
        Optional[Path], typer.Option("--jsonl", help="Also write the summary (or the comparison) as JSON Lines to this file")
    ] = None,
    traces: Annotated[
        Optional[list[Path]], typer.Option("--traces", help="A folder whose trace files the exemplars' view may read (repeatable)")
    ] = None,
) -> None:
    """Summarise what failed across a sweep's diagnoses (no model needed), or compare two sweeps:
    the accuracy difference, the verdicts that moved, the categories' shifts.

    \b
    Examples:
      localfa summarize runs/week48
      localfa summarize runs/before-fix runs/after-fix
    """
    from localfa.bench.report import ReportError

    if len(runs) > 2:
        fail(" ".join(map(str, runs)), "give one run directory, or two to compare")
    if jsonl is not None:
        check_output_file(jsonl, "--jsonl")
    if len(runs) == 2:
        compare_runs(runs[0], runs[1], jsonl)
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


def compare_runs(run_a: Path, run_b: Path, jsonl: Optional[Path]) -> None:
    """`summarize A B`: what changed from A to B, printed, and every row in `jsonl`."""
    import json

    from localfa.bench.report import ReportError, load_run
    from localfa.insights.compare import accuracy_diffs, common_methods, compare, moves
    from localfa.insights.render import accuracy_lines, moves_lines, shifts_lines
    from localfa.terminal import plain

    try:
        a, _ = load_run(run_a)
        b, _ = load_run(run_b)
    except ReportError as exc:
        fail(exc.path or str(run_a), exc.message)
    if not common_methods(a, b):
        fail(f"{run_a} {run_b}", "the two runs share no method label: nothing to compare")
    diffs = accuracy_diffs(a, b)
    moved, pairs = moves(a, b)
    categorised = any(r.category for r in [*a, *b])
    shifts = compare(a, b) if categorised else []
    traces = len({r.trace for r in a} & {r.trace for r in b})
    lines = [f"A = {plain(run_a)} ({len(a)} records), B = {plain(run_b)} ({len(b)} records): {traces} traces in both.", ""]
    lines += accuracy_lines(diffs) + [""] + moves_lines(moved, pairs)
    if shifts:
        lines += [""] + shifts_lines(shifts)
    typer.echo(terminal_safe("\n".join(lines)))
    if jsonl:
        rows: list[dict[str, Any]] = [
            {"type": "accuracy", "method": d.method, "traces": d.traces, "step_a": d.step_a, "step_b": d.step_b}
            | {"step_diff": d.step_diff, "step_ci95": d.step_ci, "agent_a": d.agent_a, "agent_b": d.agent_b}
            | {"agent_diff": d.agent_diff, "agent_ci95": d.agent_ci}
            for d in diffs
        ]
        rows += [
            {"type": "moved", "method": m.method, "trace": m.trace, "change": m.change, "label_step": m.label_step}
            | {
                "step_a": m.a.step,
                "agent_a": m.a.agent,
                "error_a": m.a.error,
                "step_b": m.b.step,
                "agent_b": m.b.agent,
                "error_b": m.b.error,
            }
            for m in moved
        ]
        rows += [
            {"type": "shift", "method": s.method, "category": s.category, "traces_a": s.n_a, "traces_b": s.n_b}
            | {"share_a": s.share_a, "share_b": s.share_b, "shift": s.shift, "ci95": list(s.ci95), "significant": s.significant}
            for s in shifts
        ]
        jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
