"""SAFARI's budget with a real tokenizer and chat template: how much of the cap it uses before it
first summarises, and how far its own prompt counts are from the real ones (issue 53.2).

SAFARI runs on the honest oracle (p = 1) on dev traces (`--limit` per subset), every prompt
rendered with the embedded model's chat template and tokenizer (`localfa.bench.cost`: the engine's
`usage.prompt_tokens` is that real count, as a server reports it), at a `--window`-token context.
Per trace the transcript holds each prompt's real size and the size SAFARI counted before sending
it. Prints:

- `traces=`, `summarising_traces=` (traces whose prompts reached the cap, so results were summarised);
- `peak_before_first_summary_share_min=` / `_mean=`: over the summarising traces, the largest real
  prompt sent before the first summary, as a share of the cap (the aim: >= 0.90, the budget used
  before anything is summarised);
- `largest_prompt_share_max=`: the largest real prompt over the cap, over all traces (<= 1: the cap holds);
- `estimate_error_max=` / `estimate_error_mean=`: |counted - real| / real over every prompt sent
  (the aim: <= 0.02);
- `prompts=`: prompts compared.

    python scripts/bench_safari_budget.py [--data ../shared/data/whowhen] [--limit 6] [--window 32768]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.bench.cost import DEFAULT_WINDOW, PricingEngine, make_oracle
from localfa.bench.prefill import PromptTokens, load_tokenizer
from localfa.bench.sweep import load_traces
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "whowhen"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="labelled traces (default: the Who&When dev split)")
    ap.add_argument("--limit", type=int, default=6, help="dev traces per subset (default 6: 12 traces)")
    ap.add_argument("--window", type=int, default=DEFAULT_WINDOW, help=f"context window (default {DEFAULT_WINDOW})")
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder with a chat template (default: the embedded model's)")
    add_json_option(ap)
    args = ap.parse_args()
    tokens = PromptTokens(load_tokenizer(args.tokenizer))
    traces = load_traces([args.data], limit=args.limit)
    peaks: list[float] = []
    largest: list[float] = []
    errors: list[float] = []
    for trace in traces:
        engine = PricingEngine(make_oracle(), tokens, args.window)
        job = method_job(engine, get_method("safari", transcript=True), MethodContext(trace, seed=0))
        ((_, diag),) = list(run_jobs(engine, [job], concurrency=1))
        cap = diag.details["budget_limit"]
        sent = [e for e in diag.transcript or [] if e.get("prompt_tokens")]
        if not sent:  # a trace whose record is an error, or that sent nothing: said, not counted
            print(f"trace={trace.id} prompts=0 error={diag.error!r}", flush=True)
            continue
        errors += [abs(e["prompt_counted"] - e["prompt_tokens"]) / e["prompt_tokens"] for e in sent]
        largest.append(max(e["prompt_tokens"] for e in sent) / cap)
        before = [e["prompt_tokens"] for e in sent if e.get("summarised_before") == 0]
        if diag.details["summarised_results"] and before:
            peaks.append(max(before) / cap)
        print(
            f"trace={trace.id} cap={cap} prompts={len(sent)} summarised={diag.details['summarised_results']} "
            f"peak_before_first_summary={max(before) if before else 0} largest_prompt={diag.details['largest_prompt']} "
            f"largest_counted={diag.details['largest_prompt_counted']} error={diag.error is not None}",
            flush=True,
        )
    print(f"traces={len(traces)}")
    print(f"summarising_traces={len(peaks)}")
    if peaks:
        print(f"peak_before_first_summary_share_min={min(peaks):.3f}")
        print(f"peak_before_first_summary_share_mean={sum(peaks) / len(peaks):.3f}")
    if not errors:
        print("prompts=0")
        return 1  # nothing was sent: no figure to print
    print(f"largest_prompt_share_max={max(largest):.3f}")
    print(f"prompts={len(errors)}")
    print(f"estimate_error_max={max(errors):.4f}")
    print(f"estimate_error_mean={sum(errors) / len(errors):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_safari_budget"))
