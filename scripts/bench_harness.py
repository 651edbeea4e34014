"""How much Python the harness spends per model call: it must never keep the engine waiting.

1. Per method, a sweep on the scripted engine over the dev traces with `--seeds` seeds (1 by
   default: how users run, each per-trace grammar built once and used once), written to a
   temporary run directory like `localfa bench`. The scripted engine's own time (inventing its
   example answers, counting prompt words) is measured and taken out: what is left is the
   harness (prompts, grammars, validation, the runner, the driver's records), i.e. the time a
   real in-process engine would wait. It is timed from the first unit started to the last
   record stored; the sweep's one-time start (manifest, lock, plan) is shown apart (`start_s`).
   `harness_ms_per_call` = the harness's CPU time / model calls (what the Python costs, however
   many other jobs share the cores), per method (methods that make no call show
   `harness_ms_per_unit` only) and over all of them; `harness_wall_ms_per_call` the same in
   wall-clock time (equal on an idle machine; larger when the box is shared, and it includes
   any wait on the disk); `validation_ms_per_call` = wall time inside grammar validation / calls;
   `tokenizer_ms_per_call` = the part of `harness_ms_per_call` spent tokenising (a method's exact
   counts of each new message, with `--tokenizer embedded`: the floor exact counting sets). Grammars built in one method's sweep are forgotten before the
   next, so each starts cold; imports and templates are loaded first by a one-trace warm-up.
2. The same sweeps once more under cProfile (the engine's own time paused), and the three
   functions that cost most of their own time, each with the project function that calls it:
   a regression names itself.
3. The real embedded model (vLLM CPU build), 8 traces, all-at-once: `engine_busy_share` = the
   share of wall time, from the first request to the last response, spent inside the engine's
   step loop. `--no-real` skips it (scripts/bench_engine_busy.py measures the same share with a
   GPU-speed latency model, for SAFARI, FALAT and DRIFT, in process and on Ray).

    python scripts/bench_harness.py [--data ../shared/data/whowhen] [--seeds 1] [--no-real]
        [--tokenizer embedded [--window 32768]]

`--tokenizer embedded`: the scripted engine counts as the vLLM backend does, with that backend's
own counting code (every prompt through the embedded model's chat template and tokenizer, its
memos) and reports a `--window` context (32k by default), so methods that measure their prompts
against the window pay what they would pay in front of a real engine. The engine tokenises every
prompt it is sent inside its own time, as vLLM must; only what a method counts itself is harness.

Prints one line per method (`METHOD calls= harness_ms_per_call= validation_ms_per_call=`), the
top three costs, then, last: calls=, harness_wall_ms_per_call=, harness_ms_per_call=, validation_ms_per_call=,
tokenizer_ms_per_call= (and
engine_busy_share= before them when the real engine runs).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.bench.driver import run_units_sweep
from localfa.bench.executors import LocalExecutor
from localfa.bench.sweep import load_traces
from localfa.engine.grammar import Grammar, clear_interned
from localfa.engine.types import Request
from localfa.methods.registry import MethodSpec, method_names
from localfa.testing.busy import BusySession

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "whowhen"
PROJECT_DIRS = tuple(str(ROOT / d) + "/" for d in ("localfa", "grammars"))  # "our" code, in profiles


@dataclass
class Clocks:
    """Seconds spent in the scripted engine's own work and in grammar validation."""

    engine: float = 0.0
    engine_cpu: float = 0.0
    validation: float = 0.0
    tokenizer: float = 0.0  # CPU seconds the harness spent tokenising (outside the engine's own work)
    in_engine: bool = False
    profiler: cProfile.Profile | None = None


@contextmanager
def clocked(engine: Any) -> Iterator[Clocks]:
    """Time the engine's `_generate_raw` (its own work; paused in the profile), `Grammar.parse`,
    and the harness's tokenising (`count_with` and whole-prompt counts outside the engine)."""
    from localfa.engine import vllm_backend

    clocks = Clocks()
    raw, parse, count_with = engine._generate_raw, Grammar.parse, vllm_backend.count_with
    prompt_ids = getattr(engine, "_prompt_ids", None)

    def timed_raw(requests: Sequence[Request]) -> Any:
        if clocks.profiler is not None:
            clocks.profiler.disable()
        t0, c0 = time.perf_counter(), time.process_time()
        clocks.in_engine = True
        try:
            return raw(requests)
        finally:
            clocks.in_engine = False
            clocks.engine += time.perf_counter() - t0
            clocks.engine_cpu += time.process_time() - c0
            if clocks.profiler is not None:
                clocks.profiler.enable()

    def tokenising(count: Any) -> Any:
        def timed(*args: Any) -> Any:
            if clocks.in_engine:
                return count(*args)
            c0 = time.process_time()
            try:
                return count(*args)
            finally:
                clocks.tokenizer += time.process_time() - c0

        return timed

    def timed_parse(self: Grammar, text: str) -> Any:
        t0 = time.perf_counter()
        try:
            return parse(self, text)
        finally:
            clocks.validation += time.perf_counter() - t0

    engine._generate_raw = timed_raw
    Grammar.parse = timed_parse  # type: ignore[method-assign]
    vllm_backend.count_with = tokenising(count_with)
    if prompt_ids is not None:
        engine._prompt_ids = tokenising(prompt_ids)
    try:
        yield clocks
    finally:
        Grammar.parse = parse  # type: ignore[method-assign]
        vllm_backend.count_with = count_with
        del engine._generate_raw
        if prompt_ids is not None:
            del engine._prompt_ids


@dataclass
class Cost:
    calls: int = 0
    units: int = 0
    errors: int = 0
    wall: float = 0.0  # the run, start excluded
    engine: float = 0.0
    validation: float = 0.0
    tokenizer: float = 0.0  # CPU seconds of the harness's own tokenising (part of `harness`)
    start: float = 0.0  # the sweep's one-time start and end (manifest, lock, plan, close)
    cpu: float = 0.0  # CPU seconds of the run (this process), and of the engine's own work
    engine_cpu: float = 0.0

    @property
    def harness(self) -> float:
        """CPU seconds of harness work: what it costs, whatever else shares the cores."""
        return self.cpu - self.engine_cpu

    @property
    def harness_wall(self) -> float:
        return self.wall - self.engine

    def ms_per_call(self, seconds: float) -> float:
        return 1000 * seconds / max(1, self.calls)


class SpanExecutor(LocalExecutor):
    """The local executor `run_sweep` uses, timing its run: from the first unit started to the
    last record stored (the driver appends each record while the run is suspended at it), i.e.
    without the sweep's one-time start (manifest, lock, plan)."""

    span = cpu = 0.0
    profiler: cProfile.Profile | None = None  # profiles the run only, like the figures

    def run(self, todo: list[Any], concurrency: int) -> Iterator[tuple[int, Any]]:
        if self.profiler is not None:
            self.profiler.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield from super().run(todo, concurrency)
        finally:
            self.span = time.perf_counter() - t0
            self.cpu = time.process_time() - c0
            if self.profiler is not None:
                self.profiler.disable()


def tokenizing_engine(window: int) -> Any:
    """The scripted engine counting with the embedded model's tokenizer and chat template, through
    the vLLM backend's own methods and memos, with a `window`-token context."""
    from transformers import AutoTokenizer

    from localfa.engine.model import embedded_model_dir
    from localfa.engine.scripted import ScriptedEngine, example_answer
    from localfa.engine.settings import EngineSettings
    from localfa.engine.vllm_backend import VLLMEngine

    class Counting(ScriptedEngine):
        tokenizer: Any
        settings: EngineSettings
        _prompt_memo: dict[Any, tuple[int, ...]]
        _count_memo: dict[str, int]
        count_prompt_tokens = VLLMEngine.count_prompt_tokens
        count_tokens = VLLMEngine.count_tokens
        count_tokens_many = VLLMEngine.count_tokens_many
        _prompt_ids = VLLMEngine._prompt_ids

        def _check_lengths(self, requests: Sequence[Request]) -> None:
            """vLLM checks a prompt's length where it tokenises it to run it: in the engine."""

    engine = Counting(example_answer, max_model_len=window)
    engine.tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_dir()))
    engine.settings = EngineSettings()
    engine._prompt_memo, engine._count_memo = {}, {}
    return engine


TOKENIZER: dict[str, int] = {}  # {"window": N} when --tokenizer embedded is on


def sweep(traces: list[Any], spec: MethodSpec, seeds: int, profiler: cProfile.Profile | None = None) -> Cost:
    """One method's scripted sweep from cold grammars, run as `run_sweep` runs it; its run's
    wall time, the engine's and validation's share of it, and the one-time start."""
    from localfa.engine.scripted import scripted_default

    engine = tokenizing_engine(TOKENIZER["window"]) if TOKENIZER else scripted_default()
    executor = SpanExecutor(engine)
    clear_interned()
    with tempfile.TemporaryDirectory() as run_dir, clocked(engine) as clocks:
        clocks.profiler = executor.profiler = profiler
        t0 = time.perf_counter()
        result = run_units_sweep(Path(run_dir), traces, [spec], list(range(seeds)), executor, concurrency=16, progress=False)
        wall = time.perf_counter() - t0
        records = result.records  # read back from the run directory, while it exists
    calls = sum(int(r.usage.get("calls", 0)) for r in records)
    errors = sum(1 for r in records if r.error)
    return Cost(
        calls,
        result.planned,
        errors,
        executor.span,
        clocks.engine,
        clocks.validation,
        clocks.tokenizer,
        wall - executor.span,
        executor.cpu,
        clocks.engine_cpu,
    )


def warm_up(traces: list[Any], specs: list[MethodSpec]) -> None:
    """Imports, templates and method modules loaded once, as in any long sweep."""
    for spec in specs:
        sweep(traces[:1], spec, 1)


def _where(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if _is_project(func):
        return f"{Path(path).relative_to(ROOT)}:{line}({name})"
    return pstats.func_std_string(func)


def _is_project(func: tuple[str, int, str]) -> bool:
    return func[0].startswith(PROJECT_DIRS)


def top_costs(profiler: cProfile.Profile, n: int = 3) -> list[str]:
    """The `n` functions with the most own time, each with the nearest project function calling it."""
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    ranked = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)
    lines = []
    for func, (_, calls, tottime, _, callers) in ranked[:n]:
        via, seen = func, {func}
        while not _is_project(via) and callers:
            via = max(callers, key=lambda c: callers[c][3])  # the caller with the most cumulative time
            if via in seen:
                break
            seen.add(via)
            callers = stats[via][4] if via in stats else {}
        where = "" if via == func else f"  <- {_where(via)}"
        lines.append(f"{tottime:7.2f} s  {calls:>8} calls  {_where(func)}{where}")
    return lines


def engine_busy_share(data: Path, n_traces: int) -> float:
    from localfa.api import diagnose_iter
    from localfa.engine.factory import make_engine

    traces = load_traces([data], limit=(n_traces + 1) // 2)[:n_traces]
    engine = make_engine("vllm")
    sessions: list[BusySession] = []
    make_session = engine.session

    def session() -> BusySession:
        sessions.append(BusySession(make_session()))
        return sessions[-1]

    engine.session = session  # type: ignore[method-assign]
    try:
        list(diagnose_iter(engine, MethodSpec.parse("all-at-once:max_chars=6000"), traces[:1], seed=99))  # warm-up
        sessions.clear()
        engine.start_cold()  # the measured run compiles its own grammars, as a fresh sweep does
        list(diagnose_iter(engine, MethodSpec.parse("all-at-once:max_chars=6000"), traces, concurrency=len(traces)))
    finally:
        engine.close()
    clock = sessions[0].clock
    print(
        f"real engine: {len(traces)} traces, {clock.span_s:.2f} s from first request to last response, {clock.busy_s:.2f} s inside the engine"
    )
    return clock.share()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--seeds", type=int, default=1, help="seeds per unit (1: each per-trace grammar is used once)")
    ap.add_argument("--methods", default=",".join(method_names()), help="comma-separated method specs (default: all)")
    ap.add_argument("--traces", type=int, default=8, help="traces for the real-engine figure")
    ap.add_argument("--no-real", action="store_true", help="skip the real-engine figure")
    ap.add_argument("--no-profile", action="store_true", help="skip the profiled pass")
    ap.add_argument("--tokenizer", choices=["words", "embedded"], default="words", help="how the scripted engine counts tokens")
    ap.add_argument("--window", type=int, default=32768, help="the context window reported with --tokenizer embedded")
    add_json_option(ap)
    args = ap.parse_args()
    if args.tokenizer == "embedded":
        TOKENIZER["window"] = args.window
    busy = None if args.no_real else engine_busy_share(args.data, args.traces)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall figures grow with it, CPU figures much less)")
    traces = load_traces([args.data])
    specs = [MethodSpec.parse(m) for m in args.methods.split(",") if m.strip()]
    warm_up(traces, specs)
    total = Cost()
    for spec in specs:
        c = sweep(traces, spec, args.seeds)
        for name in ("calls", "units", "errors", "wall", "engine", "validation", "tokenizer", "start", "cpu", "engine_cpu"):
            setattr(total, name, getattr(total, name) + getattr(c, name))
        per_call = (
            f"harness_ms_per_call={c.ms_per_call(c.harness):.3f} harness_wall_ms_per_call={c.ms_per_call(c.harness_wall):.3f} "
            f"validation_ms_per_call={c.ms_per_call(c.validation):.3f} tokenizer_ms_per_call={c.ms_per_call(c.tokenizer):.3f}"
            if c.calls
            else "(no model calls)"
        )
        print(
            f"{spec.label:<14} units={c.units} calls={c.calls} errors={c.errors} run_s={c.wall:.2f} engine_s={c.engine:.2f} "
            f"start_s={c.start:.2f} harness_ms_per_unit={1000 * c.harness / max(1, c.units):.3f} {per_call}"
        )
    print(
        f"scripted sweeps: {len(traces)} traces x {len(specs)} methods x {args.seeds} seeds = {total.units} units, "
        f"{total.calls} calls, {total.errors} error records; runs {total.wall:.2f} s of which {total.engine:.2f} s in the engine; "
        f"one-time starts {total.start:.2f} s"
    )
    if not args.no_profile:
        profiler = cProfile.Profile()
        for spec in specs:
            sweep(traces, spec, args.seeds, profiler)
        print("top costs under cProfile (own time; engine time excluded):")
        for line in top_costs(profiler):
            print("  " + line)
    if busy is not None:
        print(f"engine_busy_share={busy:.3f}")
    print(f"calls={total.calls}")
    print(f"harness_wall_ms_per_call={total.ms_per_call(total.harness_wall):.3f}")
    print(f"harness_ms_per_call={total.ms_per_call(total.harness):.3f}")
    print(f"validation_ms_per_call={total.ms_per_call(total.validation):.3f}")
    print(f"tokenizer_ms_per_call={total.ms_per_call(total.tokenizer):.3f}")


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_harness"))
