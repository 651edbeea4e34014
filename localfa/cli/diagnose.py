"""`localfa diagnose TRACE...`: who broke each failed run, and when.

Traces are investigated concurrently; their model calls go to the engine together, so even a
handful of traces keeps the engine batched. One JSON line per trace goes to --out (or stdout);
a human summary goes to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from localfa.cli.engine_options import EngineChoice, with_engine_options
from localfa.cli.errors import fail, fail_trace
from localfa.cli.outputs import cannot_write, check_output_file
from localfa.cli.trace_options import FailedOnlyOpt, FollowLinksOpt
from localfa.methods.registry import DEFAULT_METHOD, SPEC_HELP
from localfa.terminal import terminal_safe
from localfa.traces.errors import TraceError
from localfa.traces.model import Trace

METHOD_HELP = "Method spec: " + SPEC_HELP


def shortcut_options(
    max_turns: int | None, threshold: float | None, no_stm: bool, transcript: bool, with_ground_truth: bool
) -> dict[str, Any]:
    """The options the shortcut flags set: only those given (they override the spec's)."""
    given = {
        "max_turns": max_turns,
        "threshold": threshold,
        "use_stm": False if no_stm else None,
        "transcript": True if transcript else None,
        "with_ground_truth": True if with_ground_truth else None,
    }
    return {k: v for k, v in given.items() if v is not None}


@with_engine_options
def diagnose(
    traces: Annotated[list[str], typer.Argument(help="Trace files or folders")],
    method: Annotated[str, typer.Option("--method", help=METHOD_HELP)] = DEFAULT_METHOD,
    fmt: Annotated[Optional[str], typer.Option("--format", help="Force the trace format")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Run seed; every request seed derives from it")] = 0,
    budget: Annotated[
        Optional[str], typer.Option("--budget", help="Context budget: 25k (tokens), 100000c (characters), scale:2, none")
    ] = None,
    max_turns: Annotated[
        Optional[int], typer.Option("--max-turns", min=1, help="SAFARI turn budget K (default 30); = :max_turns=K")
    ] = None,
    threshold: Annotated[
        Optional[float], typer.Option("--threshold", min=0, max=100, help="SAFARI evaluate threshold (default 70); = :threshold=T")
    ] = None,
    no_stm: Annotated[bool, typer.Option("--no-stm", help="SAFARI without short-term memory (ablation)")] = False,
    with_ground_truth: Annotated[
        bool, typer.Option("--with-ground-truth", help="Baselines: show the task's answer (paper's 'with G')")
    ] = False,
    transcript: Annotated[bool, typer.Option("--transcript", help="Include the per-turn transcript in each line")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="Write JSON lines here (default: stdout)")] = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write the trace view page here (as `localfa view`)")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live progress or summary on stderr (errors still show)")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Traces investigated at once")] = 8,
    failed_only: FailedOnlyOpt = False,
    follow_links: FollowLinksOpt = False,
    *,
    engine_choice: EngineChoice,
) -> None:
    """Find the decisive faulty step and the responsible agent of each trace."""
    from localfa.bench.units import Unreadable, read_trace_file
    from localfa.methods.budget import parse_budget
    from localfa.methods.registry import MethodOptionError, MethodSpec, get_method, method_option_names
    from localfa.results import ResultRecord
    from localfa.traces.load import trace_files_with_roots
    from localfa.traces.runs import harness_traces

    try:
        budget_label = parse_budget(budget).label
    except ValueError as exc:
        fail("--budget", str(exc))
    for path, option in ((out, "--out"), (html, "--html")):  # said now, not after the engine's work
        if path is not None:
            check_output_file(path, option)
    try:
        found = trace_files_with_roots(traces, follow_links, _say)
    except TraceError as exc:
        fail_trace(exc)
    if not found:
        fail(" ".join(traces), "no trace files found")
    files = [f for _, f in found]
    unreadable: list[Unreadable] = []  # each file that cannot be read is an `error:` line and its error record
    try:  # ids distinct per file (two 1.json in different folders are two traces); --failed-only: the harness's failed trials
        kept = harness_traces(
            found,
            lambda f: read_trace_file(f, fmt),
            lambda root, f, exc: unreadable.append(Unreadable(root, f, exc)),
            [Path(t) for t in traces],
            failed_only,
            _say,
        )
    except TraceError as exc:
        fail_trace(exc)
    loaded = [t for _, _, t in kept]
    if failed_only and loaded:  # as a trial read would be: kept if its harness marked it failed
        unreadable = [u for u in unreadable if u.failed_by_harness()]
    for u in unreadable:
        _say(f"error: {u.error}")
    if not loaded:  # nothing to diagnose: bad input (each unreadable file's line is above)
        if unreadable:
            raise typer.Exit(2)
        fail(" ".join(traces), "--failed-only: no trial the harness marked failed")
    warn_empty_steps(loaded)
    try:
        spec = MethodSpec.parse(method)
        shortcuts = shortcut_options(max_turns, threshold, no_stm, transcript or html is not None, with_ground_truth)
        known = method_option_names(spec.name)
        if "transcript" not in known:  # --transcript is also an output switch: other methods skip it
            shortcuts.pop("transcript", None)
        spec = MethodSpec.of(spec.name, **{**spec.options_dict, **shortcuts})
        chosen = get_method(spec)
    except MethodOptionError as exc:
        fail("--method", str(exc))
    eng = engine_choice.build()
    try:
        if out:  # what produced these lines, beside them (see README: reproducing a run)
            from localfa.manifest import build_manifest

            manifest = build_manifest(
                eng,
                seeds=[seed],
                methods={spec.label: chosen.for_model(eng.method_defaults).describe()},
                extra={"budget": budget, "trace_files": [str(f) for f in files]},
            )
            try:
                Path(f"{out}.manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
            except OSError as exc:
                cannot_write(f"{out}.manifest.json", exc)
        results = run_diagnoses(eng, chosen, loaded, seed, budget, concurrency, quiet=quiet)
    finally:
        eng.close()
    records = [
        ResultRecord.from_diagnosis(d, t, method=spec.label, method_name=spec.name, budget=budget_label, seed=seed)
        for d, t in zip(results, loaded)
    ]
    if unreadable:  # each unreadable file is its own error record, in the order the files came
        records += [r for u in unreadable for r in u.records([spec], [budget_label], [seed])]
        order = {str(f): i for i, f in enumerate(files)}
        records.sort(key=lambda r: order.get(r.source, len(order)))
    try:
        sink = open(out, "w", encoding="utf-8") if out else sys.stdout
        try:
            for r in records:
                sink.write(r.to_line(with_transcript=transcript))
        finally:
            if out:
                sink.close()
    except OSError as exc:
        cannot_write(out or "stdout", exc)
    if html is not None:  # the page shows each turn: transcripts are kept for it whatever --transcript says
        from localfa.view import write_view

        try:
            write_view([r.record(with_transcript=True) for r in records], html, traces={t.id: t for t in loaded})
        except OSError as exc:
            cannot_write(html, exc, "cannot write the page")
    print_summary([r for r in records if r.error] if quiet else records)
    if any(r.error for r in records):
        raise typer.Exit(1)


def _say(msg: str) -> None:
    typer.echo(terminal_safe(msg), err=True)


def warn_empty_steps(traces: list[Trace]) -> None:
    """Say on stderr when an import left many steps empty (an export localfa reads only in part)."""
    from localfa.traces.load import repair_note
    from localfa.traces.quality import empty_step_warning

    for trace in traces:
        note = repair_note(trace)
        if note:
            typer.echo(f"warning: {note}", err=True)
        warning = empty_step_warning(trace)
        if warning:
            typer.echo(f"warning: {trace.source}: {warning}", err=True)


def run_diagnoses(engine, method, traces, seed: int, budget: str | None, concurrency: int, quiet: bool = False):
    """Run `method` over `traces` concurrently; results in input order.

    Unless `quiet`, stderr shows live progress: per trace in flight, the turn or stage it is at and
    the tokens it has spent (`localfa.cli.progress`). Nothing of it goes to stdout.
    """
    from localfa.api import diagnose_iter
    from localfa.cli.progress import LiveProgress

    def run(wrap=None):
        return diagnose_iter(engine, method, traces, seed=seed, budget=budget, concurrency=concurrency, wrap=wrap)

    done = {}
    if quiet:
        done = dict(run())
    else:
        with LiveProgress(method.name, len(traces), _stderr_console()) as live:
            for i, diag in run(lambda job: live.wrap(job, traces[int(job.key)].id)):
                done[i] = diag
                live.finished(str(i))
    return [done[i] for i in range(len(traces))]


def _stderr_console():
    """Rich on stderr; lines are never hard-wrapped (piped, rich would cut them at 80 columns and a
    log or `grep` would see half a summary)."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def summary_line(r) -> str:
    """A record's stderr line: prediction, hit or miss against the label (the report's scorer), cost."""
    from localfa.bench.metrics import score_record

    if r.error:
        return f"{r.trace}: error: {r.error.splitlines()[0]}"
    s = score_record(r)
    hit = {1.0: "hit", 0.0: "miss"}
    verdict = ""
    if r.label is not None and s["step"] is not None:
        verdict = f"  label: step {r.label.mistake_step} ({hit[s['step']]})"
        if s["agent"] is not None:
            verdict += f", agent {r.label.mistake_agent} ({hit[s['agent']]})"
    u = r.usage
    return (
        f"{r.trace}: step {r.step} by {r.agent} [{r.stop_reason}]{verdict}  "
        f"calls={u['calls']} tokens={u['prompt_tokens']}+{u['completion_tokens']} cached={u['cached_tokens']} {r.wall_s:.1f}s"
    )


def print_summary(records) -> None:
    """One line per trace on stderr (`summary_line`)."""
    from rich.markup import escape

    console = _stderr_console()
    for r in records:
        line = escape(terminal_safe(summary_line(r)))
        console.print(f"[red]{line}[/red]" if r.error else line)
