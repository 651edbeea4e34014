"""One real sweep of every model-calling method on the embedded model, shared by the real tests.

On two CPU cores a real test's time is starting vLLM (20-25 s a process: importing vLLM is 15 s)
and prefilling prompts. Here every method runs once, in one sweep on the session's engine
(`vllm_engine`, in this process: no start of its own), on one short Who&When run, under the
network audit: full batches across methods, and every check the per-method runs made (grammars
enforced by vLLM, each method's real request shapes, records, no outbound connection, the report
of a real run) reads the same records. The `real_sweep` fixture runs it once per test session.

What it leaves to others: `localfa bench --engine vllm` from the command line is the README quick
start's (tests/test_quickstart_real.py, audited too) and the Ray test's; each method on both
Who&When subsets, through that command, is tests/methods/test_reproducible.py's on the oracle.
In process, both short runs took 155.7 s, the hand-crafted one alone 108.6 s and the
algorithm-generated one 66.8 s (2026-12-07, the 2-core box); a second run showed no machinery that
one does not.

Same seed, same records: the engine's side (same batches, same answers) is shown on the real
model by tests/bench/test_sweep_real.py and the mixed-grammar batches of tests/engine/test_real.py;
each method's side (same answers, same requests, same records, whatever the process's hash seed)
by tests/methods/test_reproducible.py on the oracle, over these same specs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.methods.real_cli import SHORT_WHOWHEN
from tests.netaudit import audit_this_process, outbound, read_events

SEED = 7
# Every stage of each method runs, with the embedded model's profile bounds and the spec's leaner
# ones (the 135M model writes every string to its bound). Canonical spellings: options sorted.
FALAT_LEAN = (
    "falat:action_chars=20:analysis_chars=20:answer_chars=40:argument_chars=20:decision_chars=20:pair_quota=1"
    ":pair_reason_chars=20:pair_step_tokens=64:plan_chars=60:quote_chars=20:rank_reason_chars=20"
    ":requirement_chars=20:stage_chars=40:step_tokens=160:window=3"
)
SPECS = {
    "all-at-once": "all-at-once:max_chars=6000",
    "safari": "safari:max_turns=3:transcript=true",
    "drift": "drift:chunk_tokens=1024:claim_chars=60:evidence_chars=80:max_checked_claims=4:reason_chars=80:segment=true",
    "falat": FALAT_LEAN,
    # agree=3: stage 2 runs unless all three samples agree. Stage 2 is one all-at-once call: what is
    # the cascade's own (stage 1's cached prefix, escalation, the answering stage) shows on any stage
    # 2, and SAFARI's requests are the sweep's already.
    "cascade": "cascade:agree=3:stages=all-at-once*3>all-at-once(max_chars=3000)",
}


#: The one short run the sweep diagnoses: 5 steps, an observation step among them.
SWEEP_TRACE = SHORT_WHOWHEN[0]


@dataclass
class RealSweep:
    """The audited run, its records by method, the audit's events (the hook runs in this process,
    where the engine does; tests/test_netaudit.py shows that it records inside its block)."""

    run: Path
    events: list[dict[str, Any]]

    def records(self, method: str) -> list[dict[str, Any]]:
        """The records of `method` (a key of `SPECS`) in trace order."""
        from localfa.methods.registry import MethodSpec

        rows = [json.loads(line) for line in (self.run / "results.jsonl").read_text().splitlines() if line.strip()]
        mine = [r for r in rows if r["method"] == MethodSpec.parse(SPECS[method]).label]  # records carry the canonical label
        return sorted(mine, key=lambda r: r["trace"])

    def with_traces(self, method: str) -> list[tuple[dict[str, Any], Any]]:
        """(record, its trace) for the sweep's run, for the methods' own checks."""
        from localfa.traces.load import load_trace

        trace = load_trace(SWEEP_TRACE)
        recs = self.records(method)
        assert [r["trace"] for r in recs] == [trace.id], (method, [r["trace"] for r in recs])
        return [(r, trace) for r in recs]

    def outbound(self) -> list[dict[str, Any]]:
        return outbound(self.events)


def run_real_sweep(engine: Any, work: Path) -> RealSweep:
    """Sweep every spec over the short run on `engine` (the session's vLLM), audited; every unit
    must write its record."""
    from localfa.bench.sweep import parse_methods, run_sweep
    from localfa.traces.load import load_trace

    run, log = work / "run", work / "net_events.jsonl"
    engine.reset_prefix_cache()  # what is cached comes from this sweep's own calls
    with audit_this_process(log):
        result = run_sweep(
            run, [load_trace(SWEEP_TRACE)], parse_methods(",".join(SPECS.values())), [SEED], engine, progress=False, cache_dir=run / "cache"
        )
    errors = [(r["method"], r["error"]) for r in map(json.loads, (run / "results.jsonl").read_text().splitlines()) if r["error"]]
    assert (result.written, errors) == (len(SPECS), []), result
    return RealSweep(run, read_events(log))
