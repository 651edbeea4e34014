"""One real sweep of every model-calling method on the embedded model, shared by the real tests.

On two CPU cores most of a real test's time is starting vLLM (30-60 s a process) and prefilling
prompts; the methods' end-to-end tests each started `localfa diagnose` twice (eight engine starts
for four methods). Here one `localfa bench` runs every method on the two short Who&When fixtures
under the network audit: one engine start, full batches across methods, and every check the
per-method runs made (grammars enforced by vLLM, each method's real request shapes, records, no
outbound connection, the report of a real run) reads the same records. `session_sweep` runs it
once per test session.

Same seed, same records: the engine's side (same batches, same answers) is shown on the real
model by tests/bench/test_sweep_real.py and the mixed-grammar batches of tests/engine/test_real.py;
each method's side (same answers, same requests, same records, whatever the process's hash seed)
by tests/methods/test_reproducible.py on the oracle, over these same specs. A second real sweep
only repeated both (about 4 minutes of CI on two AVX2 cores).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.methods.real_cli import SHORT_WHOWHEN
from tests.netaudit import audited_pids, outbound, run_audited

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


@dataclass
class RealSweep:
    """The audited run, its records by method, the audit."""

    run: Path
    stderr: str
    events: list[dict[str, Any]]
    audited: set[int]  # pids of the processes that loaded the audit hook (an in-process engine may open no socket at all)

    def records(self, method: str) -> list[dict[str, Any]]:
        """The records of `method` (a key of `SPECS`) in trace order."""
        from localfa.methods.registry import MethodSpec

        rows = [json.loads(line) for line in (self.run / "results.jsonl").read_text().splitlines() if line.strip()]
        mine = [r for r in rows if r["method"] == MethodSpec.parse(SPECS[method]).label]  # records carry the canonical label
        return sorted(mine, key=lambda r: r["trace"])

    def with_traces(self, method: str) -> list[tuple[dict[str, Any], Any]]:
        """(record, its trace) for each short run, for the methods' own checks."""
        from localfa.traces.load import load_trace

        traces = {t.id: t for t in (load_trace(p) for p in SHORT_WHOWHEN)}
        recs = self.records(method)
        assert sorted(r["trace"] for r in recs) == sorted(traces), (method, [r["trace"] for r in recs])
        return [(r, traces[r["trace"]]) for r in recs]

    def outbound(self) -> list[dict[str, Any]]:
        return outbound(self.events)


def _bench(out: Path, traces: list[Path] = SHORT_WHOWHEN) -> list[str]:
    return [
        "bench",
        *map(str, traces),
        "--methods",
        ",".join(SPECS.values()),
        "--seeds",
        str(SEED),
        "--engine",
        "vllm",
        "--no-progress",
        "--out",
        str(out),
    ]


def run_sweep(work: Path) -> RealSweep:
    """Run the audited sweep; fails loudly if the command fails."""
    proc, events = run_audited(_bench(work / "run"), work, timeout_s=1800, record_processes=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return RealSweep(work / "run", proc.stderr, events, audited_pids(work))
