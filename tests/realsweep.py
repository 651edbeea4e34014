"""One real sweep of every model-calling method on the embedded model, shared by the real tests.

On two CPU cores most of a real test's time is starting vLLM (30-60 s a process) and prefilling
prompts; the methods' end-to-end tests each started `localfa diagnose` twice (eight engine starts
for four methods). Here one `localfa bench` runs every method on the two short Who&When fixtures
under the network audit, and a second one repeats it with the same seed: two engine starts, full
batches across methods, and every check the per-method runs made (grammars enforced by vLLM, each
method's real request shapes, records, reproducibility, no outbound connection, the report of a
real run) reads the same records. `session_sweep` runs it once per test session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.methods.real_cli import SHORT_WHOWHEN, without_timing
from tests.netaudit import audited_pids, outbound, run_audited

SEED = 7
# Every stage of each method runs, with the embedded model's profile bounds and the spec's leaner
# ones (the 135M model writes every string to its bound). Canonical spellings: options sorted.
FALAT_LEAN = (
    "falat:action_chars=40:analysis_chars=40:answer_chars=60:argument_chars=40:decision_chars=40:pair_quota=1"
    ":pair_reason_chars=20:pair_step_tokens=64:plan_chars=100:quote_chars=40:rank_reason_chars=20"
    ":requirement_chars=40:stage_chars=60:step_tokens=160"
)
SPECS = {
    "all-at-once": "all-at-once:max_chars=6000",
    "safari": "safari:max_turns=3:transcript=true",
    "drift": "drift:chunk_tokens=1024:max_checked_claims=4:segment=true",
    "falat": FALAT_LEAN,
    # agree=3: stage 2 (SAFARI, two turns to stay lean) runs unless all three samples agree
    "cascade": "cascade:stages=all-at-once*3>safari(max_turns=2;min_investigate_turns=0):agree=3",
}


@dataclass
class RealSweep:
    """The two runs: `run` (audited) and `again` (same seed), their records by method, the audit."""

    run: Path
    again: Path
    stderr: str
    events: list[dict[str, Any]]
    audited: set[int]  # pids of the processes that loaded the audit hook (an in-process engine may open no socket at all)

    def records(self, method: str, run: Path | None = None) -> list[dict[str, Any]]:
        """The records of `method` (a key of `SPECS`) in trace order."""
        from localfa.methods.registry import MethodSpec

        rows = [json.loads(line) for line in ((run or self.run) / "results.jsonl").read_text().splitlines() if line.strip()]
        mine = [r for r in rows if r["method"] == MethodSpec.parse(SPECS[method]).label]  # records carry the canonical label
        return sorted(mine, key=lambda r: r["trace"])

    def with_traces(self, method: str) -> list[tuple[dict[str, Any], Any]]:
        """(record, its trace) for each short run, for the methods' own checks."""
        from localfa.traces.load import load_trace

        traces = {t.id: t for t in (load_trace(p) for p in SHORT_WHOWHEN)}
        recs = self.records(method)
        assert sorted(r["trace"] for r in recs) == sorted(traces), (method, [r["trace"] for r in recs])
        return [(r, traces[r["trace"]]) for r in recs]

    def reproduced(self, method: str) -> bool:
        """Whether the second run wrote the same records for `method`, timings aside. It repeats
        the whole first sweep: vLLM's answers depend on how requests are batched, so a rerun of
        one trace (batched differently) is no reproducibility check."""
        again = self.records(method, self.again)
        first = [r for r in self.records(method) if r["trace"] in {a["trace"] for a in again}]
        return bool(again) and [without_timing(r) for r in first] == [without_timing(r) for r in again]

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


def run_sweep_twice(work: Path) -> RealSweep:
    """Run the audited sweep, then the same again; fails loudly if either command fails."""
    proc, events = run_audited(_bench(work / "run"), work, timeout_s=1800, record_processes=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    again = subprocess.run([sys.executable, "-m", "localfa", *_bench(work / "again")], capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stderr[-4000:]
    return RealSweep(work / "run", work / "again", proc.stderr, events, audited_pids(work))
