"""What a sweep will cost before it starts: `localfa bench DATASET... --estimate`.

No model runs and no method runs. Each method's per-trace calls, prompt tokens, uncached prefill
and completion tokens follow a power law of the trace's length (``a * tokens**b``, tokens at 4
characters each, so no tokenizer is needed), fitted by `scripts/bench_cost.py --write-models`
on the oracle with a real tokenizer and prefix-cache replay (`cost_models.json`, with
the date and data it was measured on). Summed over the traces given, they give the totals;
divided by a serving profile's prefill and decode rates they give a range of GPU time.

The rates are NOT measured by localfa (no GPU was at hand when they were written): each states
how it was derived, and a user with a measured rate should trust theirs. Decode is the
aggregate rate of a batched server (many traces' calls decoding at once), not one stream's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from localfa.tokens import approx_tokens
from localfa.traces.lineview import step_record
from localfa.traces.model import Trace

DEFAULT_PROFILE = "gpu-single"


@dataclass(frozen=True)
class Throughput:
    """A serving profile's assumed rates, tokens per second, (low, high)."""

    model: str
    prefill: tuple[float, float]
    decode: tuple[float, float]
    source: str


THROUGHPUT: dict[str, Throughput] = {
    "gpu-single": Throughput(
        "Qwen3-32B, bf16, one 80 GB H100-class GPU",
        (4_000.0, 9_000.0),
        (800.0, 3_000.0),
        "derived, not measured: prefill = 2 x 32e9 FLOP a token at 25-60% of ~990 TFLOP/s; decode = "
        "weights read once a step (64 GB at ~3.3 TB/s, ~50 steps/s) x 16-64 sequences in the batch",
    ),
    "gpu-node-8x": Throughput(
        "Llama-3.3-70B-Instruct, bf16, 8 GPUs (tensor parallel 4 x data parallel 2)",
        (12_000.0, 30_000.0),
        (2_000.0, 8_000.0),
        "derived, not measured: per replica 2 x 70e9 FLOP a token on 4 GPUs at 25-60% of ~990 TFLOP/s, two "
        "replicas; decode: 140 GB over 4 GPUs' ~13 TB/s (~90 steps/s) x 16-64 sequences, two replicas",
    ),
    "gpu-small": Throughput(
        "Qwen3-0.6B, bf16, one 80 GB H100-class GPU (prism: prompts scored, nothing decoded)",
        (50_000.0, 150_000.0),
        (8_000.0, 25_000.0),
        "derived, not measured: prefill = 2 x 0.6e9 FLOP a token, far below the GPU's compute, so bound by "
        "kernel launches and batching at ~5-15% of the 400k-1M tokens/s the FLOPs allow; decode = 1.2 GB of "
        "weights a step (~300-400 steps/s after overheads) x 32-64 sequences",
    ),
    "cpu-embedded": Throughput(
        "SmolLM2-135M-Instruct on vLLM's CPU build",
        (300.0, 2_000.0),
        (15.0, 100.0),
        "assumed, not measured: 2 x 135e6 FLOP a token at 0.1-0.5 TFLOP/s of a few cores; decode of "
        "small batches bound by the harness and the grammar more than by the model",
    ),
}


@dataclass
class Estimate:
    """Predicted totals of one method over the traces given."""

    method: str
    traces: int
    calls: float = 0.0
    prompt_tokens: float = 0.0
    uncached_tokens: float = 0.0
    completion_tokens: float = 0.0
    modelled: bool = True

    def gpu_seconds(self, rates: Throughput) -> tuple[float, float]:
        """(fastest, slowest) GPU time: prefill of the uncached tokens plus decoding."""
        fast = self.uncached_tokens / rates.prefill[1] + self.completion_tokens / rates.decode[1]
        slow = self.uncached_tokens / rates.prefill[0] + self.completion_tokens / rates.decode[0]
        return fast, slow


@lru_cache(maxsize=1)
def cost_models() -> dict[str, Any]:
    """The fitted models (cost_models.json beside this module: data written by
    `scripts/bench_cost.py --write-models`): {"measured": how, "models": {method: {figure: [a, b]}}}."""
    from importlib import resources

    return json.loads(resources.files("localfa.bench").joinpath("cost_models.json").read_text(encoding="utf-8"))


def trace_size(trace: Trace) -> int:
    """The trace's records in 4-character tokens, as the cost models were fitted."""
    return sum(approx_tokens(step_record(s)) for s in trace.steps)


def estimate(traces: Sequence[Trace], methods: Sequence[str]) -> list[Estimate]:
    """One `Estimate` per method spec (its base name picks the model; options are not modelled)."""
    models = cost_models()["models"]
    sizes = [trace_size(t) for t in traces]
    out = []
    for spec in methods:
        model = models.get(spec.split(":", 1)[0].strip())
        est = Estimate(spec, len(traces), modelled=model is not None)
        for figure, (a, b) in (model or {}).items():
            setattr(est, figure, sum(a * max(x, 1) ** b for x in sizes))
        out.append(est)
    return out


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f}h" if seconds >= 3600 else f"{seconds:.0f}s"


def estimate_lines(traces: Sequence[Trace], methods: Sequence[str], profile: str | None = None) -> list[str]:
    """The lines `localfa bench --estimate` prints: one per method, then the rates assumed."""
    measured = cost_models()["measured"]
    name = Path(profile).stem if profile and profile.endswith(".toml") else (profile or DEFAULT_PROFILE)
    rates = THROUGHPUT.get(name)
    if rates is None:
        raise ValueError(f"no throughput figures for profile {name!r} (known: {', '.join(THROUGHPUT)})")
    lines = []
    for est in estimate(traces, methods):
        if not est.modelled:
            lines.append(
                f"method={est.method} traces={est.traces} no cost model: run scripts/bench_cost.py --methods {est.method} --write-models ..."
            )
            continue
        fast, slow = est.gpu_seconds(rates)
        lines.append(
            f"method={est.method} traces={est.traces} calls={est.calls:.0f} prompt_tokens={est.prompt_tokens:.0f} "
            f"uncached_prefill={est.uncached_tokens:.0f} completion_tokens={est.completion_tokens:.0f} "
            f"gpu_time={_hours(fast)}..{_hours(slow)} profile={name}"
        )
    lines.append(
        f"# {name}: {rates.model}; prefill {rates.prefill[0]:,.0f}-{rates.prefill[1]:,.0f} tok/s, decode "
        f"{rates.decode[0]:,.0f}-{rates.decode[1]:,.0f} tok/s aggregate ({rates.source})"
    )
    lines.append(f"# cost models: {measured}")
    return lines
