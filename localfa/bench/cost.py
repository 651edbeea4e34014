"""The price of one diagnosis: a method run on the oracle, every prompt it sends priced in tokens.

`measure` runs one method on one trace on the oracle engine (p = 1: answers from the labels, so
the method walks its whole path) through a `PricingEngine`, which renders each request's prompt
with a real chat template and tokenizer (`localfa.bench.prefill.PromptTokens`), replays it at once
through an unbounded block-level prefix cache (one per trace: a trace's calls go to one server),
and answers the method's own token counting with the same tokenizer, so the method sizes its
windows on real counts. It keeps counts, never the prompts (a 1M-token run sends gigabytes).

A response's own tokens join the cache after its prompt (vLLM caches the blocks a request
generates as well as its prompt's), so the next turn, which repeats that answer as an assistant
message, finds it there. The cache is one per trace by default (`cold`: each trace's first prompt
prefills everything, the system prompt included); `shared=True` keeps one cache for the whole
sweep, as one server serving the sweep does (`warm`: what is common to every trace, such as a
method's system prompt, is prefilled once).

`measure_isolated` runs it in a forked child: the child's peak resident memory (its high-water
mark reset at start) is the diagnosis's, and a run past its time limit is stopped and reported.
Harness time is the run's wall time less the time spent inside the engine (answering, pricing).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Sequence

from localfa.bench.prefill import BlockPrefixCache, PromptTokens
from localfa.engine.errors import ContextLengthError
from localfa.engine.session import BatchSession
from localfa.engine.types import Engine, Message, Request, Response, Session
from localfa.engine.wrapper import EngineWrapper
from localfa.tokens import approx_tokens
from localfa.traces.lineview import step_record
from localfa.traces.model import Trace

DEFAULT_WINDOW = 32768  # the strong-model window the methods' defaults are sized for


class PricingEngine(EngineWrapper):
    """An engine whose every request is priced as it is sent (see module doc)."""

    def __init__(
        self, inner: Engine, tokens: PromptTokens, window: int | None = DEFAULT_WINDOW, cache: BlockPrefixCache | None = None
    ) -> None:
        super().__init__(inner)
        self.tokens = tokens
        self.max_model_len = window
        self.cache = cache if cache is not None else BlockPrefixCache()
        self.calls = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.completion_tokens = 0
        self.longest_prompt = 0
        self.engine_s = 0.0

    def session(self) -> Session:
        return BatchSession(self)

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        started = time.perf_counter()
        try:
            priced = [self.tokens.prompt_ids(r.messages) for r in requests]
            for ids in priced:
                if self.max_model_len and len(ids) >= self.max_model_len:
                    raise ContextLengthError(len(ids), self.max_model_len)
            responses = self.inner.generate(requests)
            for req, ids, resp in zip(requests, priced, responses):
                self.calls += 1
                self.prompt_tokens += len(ids)
                self.longest_prompt = max(self.longest_prompt, len(ids))
                self.cached_tokens += self.cache.admit(ids)
                # a scored prompt decodes nothing (its answer is the engine's numbers, not text)
                answer = self.tokens.text_ids("" if req.score is not None else resp.text)
                self.completion_tokens += len(answer)
                resp.usage.prompt_tokens = len(ids)  # what a server counts, as it reports it
                self.cache.admit(ids + answer)  # generated blocks are cached too
            return responses
        finally:
            self.engine_s += time.perf_counter() - started

    counts_in_process = True  # type: ignore[assignment]

    def count_tokens(self, text: str) -> int:
        return self.tokens.count(text)

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        return self.tokens.count_many(texts)

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return len(self.tokens.prompt_ids(messages))

    def token_unit(self) -> str:
        return "tokens"


@dataclass
class TraceCost:
    """What one method's diagnosis of one trace cost."""

    method: str
    trace: str
    trace_tokens: int
    approx_tokens: int = 0  # the trace in 4-character tokens: what `localfa bench --estimate` reads
    base: str = ""  # the trace a long run was grown from (its own id otherwise)
    finished: bool = True
    error: str | None = None
    correct: bool | None = None
    calls: int = 0
    prompt_tokens: int = 0
    uncached_tokens: int = 0
    completion_tokens: int = 0
    longest_prompt: int = 0
    wall_s: float = 0.0
    harness_s: float = 0.0
    peak_mb: float | None = None
    shown_whole: bool | None = None  # the method showed the whole run in one prompt (SAFARI records it)
    record_bytes: int = 0
    bounds: dict[str, Any] = field(default_factory=dict)


def trace_tokens(trace: Trace, tokens: PromptTokens) -> int:
    """Tokens of the trace as methods show it (one JSON record a step)."""
    return sum(tokens.count(step_record(s)) for s in trace.steps)


def source_of(trace: Trace) -> str:
    """The trace a long run was grown from (`localfa.traces.longruns`), else the trace itself."""
    return str((trace.metadata.get("long_run") or {}).get("from") or trace.id)


def approx_trace_tokens(trace: Trace) -> int:
    """The trace's records in 4-character tokens (no tokenizer needed)."""
    return sum(approx_tokens(step_record(s)) for s in trace.steps)


def make_oracle() -> Engine:
    """The honest oracle (p = 1) with no window of its own: the pricing wrapper checks the
    window on real token counts, the oracle's own check would use 4 characters a token."""
    from localfa.engine.factory import make_engine
    from localfa.oracle.engine import OracleEngine

    engine = make_engine(OracleEngine.name, say=lambda _: None)
    engine.max_model_len = None
    return engine


def measure(
    spec: str, trace: Trace, tokens: PromptTokens, window: int | None = DEFAULT_WINDOW, cache: BlockPrefixCache | None = None
) -> TraceCost:
    """Run method `spec` on `trace` on the priced oracle; its cost (and whether it found the step).
    `cache`: the prefix cache the sweep shares (a fresh one for this trace by default)."""
    from localfa.methods.base import MethodContext
    from localfa.methods.registry import get_method
    from localfa.methods.runner import method_job, run_jobs

    engine = PricingEngine(make_oracle(), tokens, window, cache)
    cost = TraceCost(spec, trace.id, trace_tokens(trace, tokens), approx_trace_tokens(trace), base=source_of(trace))
    started = time.perf_counter()
    job = method_job(engine, get_method(spec), MethodContext(trace=trace, seed=0), label=spec)
    _, diag = next(iter(run_jobs(engine, [job], concurrency=1)))
    cost.wall_s = time.perf_counter() - started
    cost.harness_s = max(0.0, cost.wall_s - engine.engine_s)
    cost.calls, cost.prompt_tokens, cost.completion_tokens = engine.calls, engine.prompt_tokens, engine.completion_tokens
    cost.uncached_tokens = engine.prompt_tokens - engine.cached_tokens
    cost.longest_prompt = engine.longest_prompt
    cost.error = diag.error.splitlines()[0][:300] if diag.error else None
    labels = trace.labels
    cost.correct = None if labels is None or labels.mistake_step is None else diag.step == labels.mistake_step
    cost.record_bytes = len(diag.model_dump_json().encode())
    cost.bounds = _bounds(diag.details)
    shown_whole = (diag.details or {}).get("whole_run_shown")
    cost.shown_whole = shown_whole if isinstance(shown_whole, bool) else None
    return cost


def _bounds(details: dict[str, Any]) -> dict[str, Any]:
    """The bounds a method recorded hitting (any details entry whose name says so), for the report."""
    found = {}
    for key, value in (details or {}).items():
        if any(w in key for w in ("bound", "limit", "cap", "truncat", "stop")) and isinstance(value, (int, float, str, bool, list, dict)):
            text = json.dumps(value, default=str)
            found[key] = value if len(text) <= 300 else text[:300] + "..."
    return found


def _reset_peak_memory() -> float:
    """Reset this process's resident-memory high-water mark; the resident size now (MB)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    return _proc_status_mb("VmRSS")


def _proc_status_mb(field_name: str) -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _die_with_parent() -> None:
    """A measuring child is killed when its parent dies (Linux `prctl`; elsewhere it finishes)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(conn: Any, spec: str, traces: list[Trace], tokens: PromptTokens, window: int | None, shared: bool) -> None:
    """Measure each trace in turn, sending each cost as it is done (peak memory per trace);
    `shared`: one prefix cache for all of them."""
    _die_with_parent()
    cache = BlockPrefixCache() if shared else None
    for trace in traces:
        try:
            start_mb = _reset_peak_memory()
            cost = measure(spec, trace, tokens, window, cache)
            cost.peak_mb = round(max(0.0, _proc_status_mb("VmHWM") - start_mb), 1)
            conn.send(asdict(cost))
        except BaseException as exc:  # noqa: BLE001 - whatever broke, the parent reports it
            conn.send({"error": f"{type(exc).__name__}: {exc}"})
    conn.close()


def _receive(conn: Any, timeout_s: float) -> dict[str, Any] | None:
    """The child's next message; None past the time limit; an error when the child died."""
    if not conn.poll(timeout_s):
        return None
    try:
        return dict(conn.recv())
    except EOFError:
        return {"error": "the measuring process died (out of memory?)", "died": True}


def measure_isolated(
    spec: str,
    traces: list[Trace],
    tokens: PromptTokens,
    window: int | None = DEFAULT_WINDOW,
    timeout_s: float = 600.0,
    shared_cache: bool = False,
) -> Iterator[TraceCost]:
    """`measure` of each trace, in forked children (peak memory of each diagnosis, a time limit
    per trace): a trace past `timeout_s` is stopped and its cost says so (`finished=False`), and
    a fresh child goes on with the next (with `shared_cache`, a fresh cache too)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    ctx = multiprocessing.get_context("fork")
    todo = list(traces)
    while todo:
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, spec, todo, tokens, window, shared_cache), daemon=True)
        proc.start()
        child.close()
        try:
            while todo:
                trace = todo[0]
                started = time.perf_counter()
                got = _receive(parent, timeout_s)
                todo.pop(0)
                if got is not None and "trace" in got:
                    yield TraceCost(**got)
                    continue
                cost = TraceCost(
                    spec, trace.id, trace_tokens(trace, tokens), approx_trace_tokens(trace), base=source_of(trace), finished=False
                )
                cost.wall_s = time.perf_counter() - started
                cost.error = got["error"] if got else f"did not finish in {timeout_s:g} s"
                yield cost
                if got is None or got.get("died"):
                    break  # the child is stuck on it or gone: a fresh one takes the rest
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join()
            parent.close()


# ---- summaries --------------------------------------------------------------------------------


def summary(costs: list[TraceCost]) -> dict[str, float]:
    """Per-trace figures of one method over its diagnoses that finished without an error (their
    count in `errors`; step accuracy counts them as misses); uncached prefill as a ratio of totals:
    the tokens a GPU must prefill over the tokens of the traces."""
    finished = [c for c in costs if c.finished]
    done = [c for c in finished if not c.error]  # a diagnosis that ended in an error has no cost to show
    if not done:
        return {"traces": 0.0, "unfinished": float(len(costs) - len(finished)), "errors": float(len(finished))}
    n = len(done)
    calls = sum(c.calls for c in done)
    peaks = [c.peak_mb for c in done if c.peak_mb is not None]
    whole = [c for c in done if c.shown_whole]
    split = {  # where the method records it: the runs shown whole (they fit) apart
        "traces_shown_whole": float(len(whole)),
        "uncached_prefill_per_trace_token_shown_whole": sum(c.uncached_tokens for c in whole) / max(1, sum(c.trace_tokens for c in whole)),
    }
    return {
        **(split if whole else {}),
        "traces": float(n),
        "unfinished": float(len(costs) - n),
        "errors": float(len(finished) - n),
        "step_accuracy": sum(1 for c in finished if c.correct) / len(finished),
        "trace_tokens": sum(c.trace_tokens for c in done) / n,
        "calls_per_trace": calls / n,
        "prompt_tokens_per_trace": sum(c.prompt_tokens for c in done) / n,
        "uncached_prefill_per_trace": sum(c.uncached_tokens for c in done) / n,
        "uncached_prefill_per_trace_token": sum(c.uncached_tokens for c in done) / max(1, sum(c.trace_tokens for c in done)),
        "completion_tokens_per_trace": sum(c.completion_tokens for c in done) / n,
        "harness_ms_per_call": 1000 * sum(c.harness_s for c in done) / max(1, calls),
        "harness_s_per_trace": sum(c.harness_s for c in done) / n,
        "peak_memory_mb": max(peaks) if peaks else float("nan"),
        "record_kb": max(c.record_bytes for c in done) / 1024,
    }


# Per-trace figures whose growth with the run's length is measured (`TraceCost` fields).
GROWTH_FIGURES = ("calls", "prompt_tokens", "uncached_tokens", "completion_tokens", "harness_s", "peak_mb", "record_bytes")


def growth_by_trace(costs: list[TraceCost]) -> dict[str, float | None]:
    """Per figure, the growth exponent of each source trace over the lengths it was grown to (its
    runs that finished), averaged over source traces: a run that did not finish at one length
    then drops out of its own trace's fit only, not the others'."""
    by_base: dict[str, list[TraceCost]] = {}
    for c in costs:
        if c.finished and not c.error:
            by_base.setdefault(c.base or c.trace, []).append(c)
    out: dict[str, float | None] = {}
    for figure in GROWTH_FIGURES:
        slopes = [growth_exponent([(float(c.trace_tokens), float(getattr(c, figure) or 0)) for c in runs]) for runs in by_base.values()]
        known = [x for x in slopes if x is not None]
        out[figure] = sum(known) / len(known) if known else None
    return out


def growth_exponent(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(cost) against log(length); None with fewer than two usable points."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return None if sxx == 0 else sum((x - mx) * (y - my) for x, y in pts) / sxx


MODEL_FIGURES = ("calls", "prompt_tokens", "uncached_tokens", "completion_tokens")


def power_law(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(a, b) of y = a * x**b fitted in log space; None with fewer than two usable points."""
    b = growth_exponent(points)
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if b is None:
        return None
    a = math.exp(sum(y for _, y in pts) / len(pts) - b * sum(x for x, _ in pts) / len(pts))
    return a, b


def cost_model(costs: list[TraceCost]) -> dict[str, tuple[float, float]]:
    """Per figure, the power law of its per-trace value against the trace's 4-character tokens."""
    done = [c for c in costs if c.finished and not c.error and c.approx_tokens > 0]
    out = {}
    for figure in MODEL_FIGURES:
        fit = power_law([(float(c.approx_tokens), float(getattr(c, figure))) for c in done])
        if fit is not None:
            out[figure] = fit
    return out
