"""FALAT on the honest oracle (issues 32 and 34): the dev split's ceiling and cost at strong-model
defaults, the step-0 task message a window judges passive, and a generated 1,000-step run through
`localfa diagnose` within 200 MB and a 200 kB record.

Each figure here failed on the code before issue 34 (the ceiling counted on a clairvoyant policy:
with the honest one, a passive step 0 was unreachable; a 1,000-step run took 9,315 calls, 845 MB
and a 4.7 MB record).
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from localfa.bench.sweep import load_traces
from localfa.engine.factory import make_engine
from localfa.methods.base import MethodContext
from localfa.methods.falat.mutants import NOT_DISTINCTIVE
from localfa.methods.falat.oracle import POLICY
from localfa.methods.falat.prior import Prior, salient
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.oracle.labels import fingerprint_of

REPO = Path(__file__).resolve().parents[2]
WHOWHEN = REPO.parent / "shared" / "data" / "whowhen"


@lru_cache(maxsize=4)
def _diagnose_dev(spec: str = "falat") -> tuple[dict, dict]:
    """Every dev trace diagnosed by `spec` on the honest oracle (p = 1): traces and records by id."""
    traces = {t.id: t for t in load_traces([WHOWHEN]) if t.label_answerable()}  # not a label on an executor's output
    engine = make_engine("oracle", say=lambda _: None)
    method = get_method(spec)
    jobs = [method_job(engine, method, MethodContext(t, seed=0)) for t in traces.values()]
    return traces, {d.trace: d for _, d in run_jobs(engine, jobs, concurrency=16)}


needs_dev = pytest.mark.skipif(not WHOWHEN.is_dir(), reason="the Who&When dev split is not here")


@needs_dev
def test_every_fault_with_words_of_its_own_is_found_and_calls_stay_under_forty_a_trace():
    """At p = 1 the oracle recognises a fault only by its words (issue 49): every trace whose
    fault step says something no other step says is found; a fault whose words repeat earlier
    steps word for word is recognised at the first step that carries them, and may be missed."""
    traces, records = _diagnose_dev()
    missed = {
        tid: (t.labels.mistake_step, records[tid].step, records[tid].error)
        for tid, t in traces.items()
        if records[tid].step != t.labels.mistake_step and _distinctive(t)
    }
    assert not missed, missed
    # the mutants' CI traces leave out exactly these (localfa/methods/falat/mutants.py)
    assert {tid.split("/", 1)[1] for tid, t in traces.items() if not _distinctive(t)} == set(NOT_DISTINCTIVE)
    calls = sum(d.usage["calls"] for d in records.values()) / len(records)
    assert calls <= 40, calls  # issue 34's aim at strong-model defaults (was 137 a trace here, 202 on held-out traces)


def _distinctive(trace) -> bool:
    fingerprint = fingerprint_of(trace)
    return fingerprint is not None and fingerprint.decisive is not None and fingerprint.decisive.distinctive


@needs_dev
def test_a_task_message_judged_passive_is_still_found():
    traces, records = _diagnose_dev()
    judged = "its window judged it passive (only forwards earlier information): kept answerable, ranked lower"
    at_zero = [tid for tid, t in traces.items() if t.labels.mistake_step == 0 and 0 in records[tid].details["passive"].get(judged, [])]
    assert len(at_zero) >= 2, at_zero  # the honest oracle calls the task message passive, as the prompt defines it
    assert all(records[tid].step == 0 for tid in at_zero)
    # before issue 34 a judged-passive step could never be a candidate: the same traces are lost
    dropped = _diagnose_dev_with_passive_dropped()
    assert all(dropped[tid].step != 0 for tid in at_zero)


def _diagnose_dev_with_passive_dropped() -> dict:
    from localfa.methods.falat.mutants import MUTANTS

    (mutant,) = [m for m in MUTANTS if m.name == "judged_passive_dropped"]
    with mutant.patch():
        _diagnose_dev.cache_clear()
        try:
            return _diagnose_dev()[1]
        finally:
            _diagnose_dev.cache_clear()


def test_the_prior_compares_what_the_outputs_say_not_their_letters():
    def same(expected: str, wrong: str) -> bool:
        return Prior("task", "plan", (), expected, "prior", wrong).same_as_wrong

    assert same("4", "After checking every address, the count is 4.\nTERMINATE")  # a last message, not a final output
    assert same("1,000.50 in Paris", "the total was 1000.5 in Paris, as computed")
    assert not same("Paris", "The capital is Lyon.") and not same("7", "the count is 4")
    assert not same("unknown", "unknown") and not same("", "4")
    assert same("the blue one", "I think it is the blue one")
    assert salient("The museum opened in 1887 with WebSurfer") == {"1887", "websurfer"}


def test_the_policy_answers_every_kind_falat_sends():
    kinds = {r.kind for r in POLICY.rules}
    assert kinds == {"prior", "window", "links", "ranking", "verify", "re-search"}


# ---- a 1,000-step run, through the command line ----------------------------------------------------


def long_run(n_steps: int, fault: int) -> dict:
    """A Who&When-shaped (hand-crafted) run of `n_steps` steps, its labelled fault at `fault`."""
    agents = ["Orchestrator (thought)", "WebSurfer", "Assistant", "ComputerTerminal"]
    history = [{"role": "human", "content": "Find the opening year of the Harbour Museum and how many rooms it has."}]
    for i in range(1, n_steps):
        who = agents[i % len(agents)]
        if i == fault:
            text = f"The museum page says it opened in 1887 with 412 rooms; I report 1887 and 412 without checking the archive (step {i})."
        else:
            text = f"{who} read page {i * 7} of the catalogue, section {i % 13}, and noted item {i * 3}; no opening year there yet. " * 3
        history.append({"role": who, "content": text})
    history.append({"role": "Orchestrator (final answer)", "content": "The Harbour Museum opened in 1887 and has 412 rooms."})
    return {
        "history": history,
        "question": history[0]["content"],
        "ground_truth": "1901, 380 rooms",
        "mistake_agent": "WebSurfer",
        "mistake_step": str(fault),
        "mistake_reason": "reported an unchecked year",
    }


def _peak_mb_of(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Run `cmd` under a small Python parent whose children's peak resident memory is the command's."""
    probe = (
        "import json, resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(json.dumps({'rc': p.returncode, 'kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, 'err': p.stderr[-2000:]}))"
    )
    done = subprocess.run([sys.executable, "-c", probe, *cmd], capture_output=True, text=True, timeout=600)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["kb"] / 1024, out


def test_a_thousand_step_run_stays_under_200_mb_and_a_200_kb_record(tmp_path):
    trace = tmp_path / "long.json"
    trace.write_text(json.dumps(long_run(1000, 501)))
    out = tmp_path / "r.jsonl"
    localfa = str(Path(sys.executable).parent / "localfa")
    peak_mb, run = _peak_mb_of([localfa, "diagnose", str(trace), "--method", "falat", "--engine", "oracle", "--quiet", "--out", str(out)])
    assert run["rc"] == 0, run["err"]
    line = out.read_text().splitlines()[-1]
    record = json.loads(line)
    assert record["error"] is None and record["step"] == 501
    record_kb = len(line.encode()) / 1024
    calls = record["usage"]["calls"]
    print(f"steps=1000 peak_memory_mb={peak_mb:.1f} record_kb={record_kb:.1f} calls={calls}")
    assert peak_mb < 200 and record_kb < 200
    assert calls < 1000  # linear: ~0.6 a step (was 9,315)
