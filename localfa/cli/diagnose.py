"""`localfa diagnose TRACE...`: who broke each failed run, and when.

Traces are investigated concurrently; their model calls go to the engine together, so even a
handful of traces keeps the engine batched. stdout gets one readable line per trace (the verdict,
what it cost, the start of the reasoning, where the record went), or with --json the record
itself as one JSON line; --out writes the records as JSON lines. Progress goes to stderr.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from localfa.cli.engine_options import EngineChoice, with_engine_options
from localfa.cli.errors import fail, fail_located, fail_trace
from localfa.cli.outputs import cannot_write, check_output_file
from localfa.cli.trace_options import AllowNoneOpt, FailedOnlyOpt, FollowLinksOpt, with_allow_none
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
    traces: Annotated[list[str], typer.Argument(metavar="TRACE", help="Trace files or folders (a harness trial or job too)")],
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
    transcript: Annotated[bool, typer.Option("--transcript", help="Include the per-turn transcript in each record")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="Write the records here, one JSON line per trace")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print each record as one JSON line instead of the readable line")] = False,
    html: Annotated[
        Optional[Path], typer.Option("--html", help="Also write the trace view here (as `localfa view`: an index for several traces)")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No live progress, warnings or summary on stderr (errors still show)")
    ] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Traces investigated at once")] = 8,
    failed_only: FailedOnlyOpt = False,
    follow_links: FollowLinksOpt = False,
    allow_none: AllowNoneOpt = None,
    *,
    engine_choice: EngineChoice,
) -> None:
    """Find the decisive faulty step and the responsible agent of each trace.

    \b
    Examples:
      localfa diagnose run.json                    # SAFARI, embedded model
      localfa diagnose run.json --engine scripted  # no model: try it
      localfa diagnose runs/ --method drift --out d.jsonl --html d.html
    """
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
    if html is not None:  # before any work: never over a file `localfa view` did not write
        check_html_target(html)
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
    if not quiet:
        warn_empty_steps(loaded)
    try:
        spec = MethodSpec.parse(method)
        shortcuts = shortcut_options(max_turns, threshold, no_stm, transcript or html is not None, with_ground_truth)
        known = method_option_names(spec.name)
        if "transcript" not in known:  # --transcript is also an output switch: other methods skip it
            shortcuts.pop("transcript", None)
        # --transcript and --html only keep the transcript: the method's label stays the one asked for
        as_asked = MethodSpec.of(spec.name, **{**spec.options_dict, **{k: v for k, v in shortcuts.items() if k != "transcript"}})
        (spec,) = with_allow_none([MethodSpec.of(spec.name, **{**spec.options_dict, **shortcuts})], allow_none)
        (as_asked,) = with_allow_none([as_asked], allow_none)
        label = as_asked.label
        chosen = get_method(spec)
    except MethodOptionError as exc:
        fail("--method", str(exc))
    eng = dataclasses.replace(engine_choice, scoring_only=chosen.scores_prompts).build()
    try:
        if out:  # what produced these lines, beside them (see README: reproducing a run)
            from localfa.manifest import build_manifest

            manifest = build_manifest(
                eng,
                seeds=[seed],
                methods={label: chosen.for_model(eng.method_defaults).describe()},
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
        ResultRecord.from_diagnosis(d, t, method=label, method_name=spec.name, budget=budget_label, seed=seed)
        for d, t in zip(results, loaded)
    ]
    if unreadable:  # each unreadable file is its own error record, in the order the files came
        records += [r for u in unreadable for r in u.records([as_asked], [budget_label], [seed])]
        order = {str(f): i for i, f in enumerate(files)}
        records.sort(key=lambda r: order.get(r.source, len(order)))
    if out:
        try:
            with open(out, "w", encoding="utf-8") as sink:
                for r in records:
                    sink.write(r.to_line(with_transcript=transcript))
        except OSError as exc:
            cannot_write(out, exc)
    if html is not None:  # the page shows each turn: transcripts are kept for it whatever --transcript says
        from localfa.cli.view import written_line
        from localfa.view import write_browsable
        from localfa.view.records import ViewError

        try:
            done = write_browsable([r.record(with_transcript=True) for r in records], html, traces={t.id: t for t in loaded})
        except ViewError as exc:
            fail_located(exc)
        except OSError as exc:
            cannot_write(html, exc, "cannot write the page")
        if not quiet:
            _say(written_line(done))
    if as_json:
        try:
            for r in records:
                sys.stdout.write(r.to_line(with_transcript=transcript))
        except OSError as exc:
            cannot_write("stdout", exc)
        print_summary([r for r in records if r.error] if quiet else records)
    else:
        for r in records:
            typer.echo(verdict_line(r, out))
        if not out and not quiet:
            _say("The records (evidence, reasoning, cost, the method's path): --out FILE keeps them as JSON lines, --json prints them.")
    if any(r.error for r in records):
        raise typer.Exit(1)


def check_html_target(html: Path) -> None:
    """Refuse (exit 2) an --html path `localfa view` would not replace, before anything runs."""
    from localfa.view.records import ViewError
    from localfa.view.sweep import check_replaceable, pages_folder

    try:
        check_replaceable(html, pages=pages_folder(html))
    except ViewError as exc:
        fail_located(exc)


def _say(msg: str) -> None:
    typer.echo(terminal_safe(msg), err=True)


def warn_empty_steps(traces: list[Trace]) -> None:
    """Say on stderr where text was repaired at load, or steps came out empty while their spans
    carry attributes localfa does not read (an export read only in part); not under ``-q``."""
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


REASON_CHARS = 72  # of the reasoning in a verdict line
ORDINARY_STOPS = frozenset({"submitted", "voted", "agreed"})  # a verdict line names any other way a method stopped


def verdict_line(r, out: Path | None = None) -> str:
    """One readable line per trace: the step and agent named, the category and confidence when
    there are any, the label's verdict, the cost, the start of the reasoning, where the record went."""
    from localfa.terminal import plain

    if r.error:
        return f"{plain(r.trace)}: error: {plain(r.error.strip().splitlines()[0] if r.error.strip() else r.error, 300)}"
    stop = "" if r.stop_reason in ORDINARY_STOPS else f" [{plain(r.stop_reason, 40)}]"
    answer = "no decisive error" if r.no_error else f"step {r.step} by {plain(r.agent, 60)}"
    parts = [f"{plain(r.trace)}: {answer}{stop}"]
    if r.category:
        parts.append(plain(r.category, 60))
    if r.confidence is not None:
        parts.append(f"confidence {r.confidence:.2f}")
    verdict = label_verdict(r)
    if verdict:
        parts.append(verdict)
    u = r.usage
    tokens = int(u.get("prompt_tokens", 0) or 0) + int(u.get("completion_tokens", 0) or 0)
    calls = u.get("calls", 0)
    parts.append(f"{calls} call{'' if calls == 1 else 's'}, {tokens:,} tokens, {r.wall_s:.1f} s")
    if r.reasoning.strip():
        parts.append(f'"{plain(r.reasoning, REASON_CHARS)}"')
    return " · ".join(parts) + (f" → {out}" if out else "")


def label_verdict(r) -> str:
    """``label step 3 (hit), agent Coder (miss)`` by the report's scorer, "" without a label."""
    from localfa.bench.metrics import score_record
    from localfa.terminal import plain

    s = score_record(r)
    hit = {1.0: "hit", 0.0: "miss"}
    no_error = s.get("no_error")
    if no_error is not None and (r.label is None or s["step"] is None):
        return f"label no fault ({hit[no_error]})"
    if r.label is None or s["step"] is None:
        return ""
    text = f"label step {r.label.mistake_step} ({hit[s['step']]})"
    if s["agent"] is not None:
        text += f", agent {plain(r.label.mistake_agent, 60)} ({hit[s['agent']]})"
    return text


def print_summary(records) -> None:
    """One line per trace on stderr (`verdict_line`), beside --json's records on stdout."""
    from rich.markup import escape

    console = _stderr_console()
    for r in records:
        line = escape(verdict_line(r))
        console.print(f"[red]{line}[/red]" if r.error else line)
