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

from localfa.cli.engine_options import (ApiKeyOpt, BaseUrlOpt, CacheDirOpt, EngineChoice, EngineOpt,
                                        MaxLenOpt, ModelOpt, ProfileOpt)
from localfa.cli.errors import fail, fail_trace
from localfa.methods.registry import DEFAULT_METHOD, SPEC_HELP

METHOD_HELP = "Method spec: " + SPEC_HELP
from localfa.traces.errors import TraceError


def shortcut_options(max_turns: int | None, threshold: float | None, no_stm: bool, transcript: bool,
                     with_ground_truth: bool) -> dict[str, Any]:
    """The options the shortcut flags set: only those given (they override the spec's)."""
    given = {"max_turns": max_turns, "threshold": threshold,
             "use_stm": False if no_stm else None, "transcript": True if transcript else None,
             "with_ground_truth": True if with_ground_truth else None}
    return {k: v for k, v in given.items() if v is not None}


def diagnose(
    traces: Annotated[list[str], typer.Argument(help="Trace files or folders")],
    method: Annotated[str, typer.Option("--method", help=METHOD_HELP)] = DEFAULT_METHOD,
    fmt: Annotated[Optional[str], typer.Option("--format", help="Force the trace format")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Run seed; every request seed derives from it")] = 0,
    budget: Annotated[Optional[str], typer.Option("--budget", help="Context budget: 25k (tokens), 100000c (characters), scale:2, none")] = None,
    max_turns: Annotated[Optional[int], typer.Option("--max-turns", min=1, help="SAFARI turn budget K (default 30); = :max_turns=K")] = None,
    threshold: Annotated[Optional[float], typer.Option("--threshold", min=0, max=100, help="SAFARI evaluate threshold (default 70); = :threshold=T")] = None,
    no_stm: Annotated[bool, typer.Option("--no-stm", help="SAFARI without short-term memory (ablation)")] = False,
    with_ground_truth: Annotated[bool, typer.Option("--with-ground-truth", help="Baselines: show the task's answer (paper's 'with G')")] = False,
    transcript: Annotated[bool, typer.Option("--transcript", help="Include the per-turn transcript in each line")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="Write JSON lines here (default: stdout)")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Traces investigated at once")] = 8,
    engine: EngineOpt = None,
    model: ModelOpt = None,
    profile: ProfileOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    cache_dir: CacheDirOpt = None,
    max_model_len: MaxLenOpt = None,
) -> None:
    """Find the decisive faulty step and the responsible agent of each trace."""
    from localfa.methods.budget import parse_budget
    from localfa.methods.registry import MethodOptionError, MethodSpec, get_method, method_option_names
    from localfa.traces.load import iter_trace_files, load_trace

    try:
        parse_budget(budget)
    except ValueError as exc:
        fail("--budget", str(exc))
    try:
        files = iter_trace_files(traces)
    except TraceError as exc:
        fail_trace(exc)
    if not files:
        fail(" ".join(traces), "no trace files found")
    loaded = []
    for f in files:
        try:
            loaded.append(load_trace(f, fmt))
        except TraceError as exc:
            fail_trace(exc)
    try:
        spec = MethodSpec.parse(method)
        shortcuts = shortcut_options(max_turns, threshold, no_stm, transcript, with_ground_truth)
        known = method_option_names(spec.name)
        if "transcript" not in known:  # --transcript is also an output switch: other methods skip it
            shortcuts.pop("transcript", None)
        spec = MethodSpec.of(spec.name, **{**spec.options_dict, **shortcuts})
        chosen = get_method(spec)
    except MethodOptionError as exc:
        fail("--method", str(exc))
    eng = EngineChoice(engine, model, profile, base_url, api_key, cache_dir, max_model_len).build()
    try:
        if out:  # what produced these lines, beside them (see README: reproducing a run)
            from localfa.manifest import build_manifest
            manifest = build_manifest(eng, seeds=[seed], methods={spec.label: chosen.describe()},
                                      extra={"budget": budget, "trace_files": [str(f) for f in files]})
            Path(f"{out}.manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        results = run_diagnoses(eng, chosen, loaded, seed, budget, concurrency)
    finally:
        eng.close()
    sink = open(out, "w", encoding="utf-8") if out else sys.stdout
    try:
        for d in results:
            sink.write(json.dumps(d.record(with_transcript=transcript), ensure_ascii=False) + "\n")
    finally:
        if out:
            sink.close()
    print_summary(results)
    if any(d.error for d in results):
        raise typer.Exit(1)


def run_diagnoses(engine, method, traces, seed: int, budget: str | None, concurrency: int):
    """Run `method` over `traces` concurrently with a progress display; results in input order."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from localfa.methods.base import MethodContext
    from localfa.methods.runner import method_job, run_jobs

    jobs = [method_job(engine, method, MethodContext(t, seed=seed, budget=budget)) for t in traces]
    done = {}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), transient=True, console=_stderr_console()) as progress:
        task = progress.add_task(f"{method.name}", total=len(jobs))
        for key, diag in run_jobs(engine, jobs, concurrency=concurrency):
            done[key] = diag
            progress.advance(task)
    return [done[t.id] for t in traces]


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def print_summary(results) -> None:
    """One line per trace on stderr: prediction, label when known, cost."""
    from localfa.traces.model import normalize_agent

    console = _stderr_console()
    for d in results:
        label = (d.details or {}).get("label") or {}
        if d.error:
            console.print(f"[red]{d.trace}[/red]: error: {d.error.splitlines()[0]}")
            continue
        verdict = ""
        if label.get("mistake_step") is not None:
            ok_step = d.step == label["mistake_step"]
            ok_agent = normalize_agent(d.agent or "") == normalize_agent(label.get("mistake_agent") or "")
            verdict = f"  label: step {label['mistake_step']} ({'hit' if ok_step else 'miss'}), agent {label.get('mistake_agent')} ({'hit' if ok_agent else 'miss'})"
        u = d.usage
        console.print(f"{d.trace}: step {d.step} by {d.agent} [{d.stop_reason}]{verdict}  "
                      f"calls={u['calls']} tokens={u['prompt_tokens']}+{u['completion_tokens']} cached={u['cached_tokens']} {d.wall_s:.1f}s")
