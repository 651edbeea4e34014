"""The runner: a failure ends only its own program, and says from the exception itself whether
a re-run may succeed (what sweeps retry on resume)."""

from __future__ import annotations

from localfa.engine.errors import EngineUnavailableError, TruncatedOutputError
from localfa.engine.scripted import ScriptedEngine
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.traces.model import Step, Trace


def _trace(tid: str) -> Trace:
    steps = [Step(index=i, agent="A", role="assistant", content=f"step {i}") for i in range(3)]
    return Trace(id=tid, source=f"{tid}.json", format="messages", task="t", steps=steps)


def test_error_kind_comes_from_the_exception():
    def answer(req):
        if "down" in req.route:
            raise EngineUnavailableError("connection refused")
        if "cut" in req.route:
            raise TruncatedOutputError("all_at_once", 8, "{")
        return {"agent": "A", "step": 1, "reason": "r"}

    engine = ScriptedEngine(answer)
    method = get_method("all-at-once")
    jobs = [method_job(engine, method, MethodContext(_trace(t))) for t in ("down", "cut", "fine")]
    out = dict(run_jobs(engine, jobs))
    assert (out["down"].error_kind, out["cut"].error_kind, out["fine"].error_kind) == ("transient", "final", None)
    assert out["fine"].step == 1 and out["fine"].error is None
    assert out["down"].error.startswith("EngineUnavailableError: connection refused")


def test_an_answer_cut_at_max_tokens_and_asked_again_is_recorded_for_every_method():
    """The engine re-asks an answer cut at its token bound (one call more): the record says which
    request, and `usage.retries` counts it, whatever the method (only DRIFT said so before)."""
    cut = {"cut": 1}

    def answer(req):
        if cut.get(req.route):
            cut[req.route] -= 1
            return ('{"agent": "A", "st', "length")
        return {"agent": "A", "step": 1, "reason": "r"}

    engine = ScriptedEngine(answer)
    method = get_method("all-at-once")
    jobs = [method_job(engine, method, MethodContext(_trace(t))) for t in ("cut", "fine")]
    out = dict(run_jobs(engine, jobs))
    assert out["cut"].error is None and out["cut"].step == 1
    assert out["cut"].usage["retries"] == 1 and out["cut"].usage["calls"] == 2
    assert out["cut"].details["max_tokens_retried"] == [engine.requests[0].key]
    assert "retries" not in out["fine"].usage and "max_tokens_retried" not in out["fine"].details


_HEAP_CHECK = """
import gc
from localfa.engine.scripted import ScriptedEngine
from localfa.heap import frozen_heap
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from tests.methods.test_runner import _trace

counts = []

def answer(req):
    counts.append(gc.get_freeze_count())
    return {"agent": "A", "step": 1, "reason": "r"}

engine = ScriptedEngine(answer)
method = get_method("all-at-once")
jobs = lambda *ids: [method_job(engine, method, MethodContext(_trace(t))) for t in ids]
assert gc.get_freeze_count() == 0
out = dict(run_jobs(engine, jobs("a", "b")))
assert len(out) == 2 and counts and all(c > 0 for c in counts), counts
assert gc.get_freeze_count() == 0, "thawed when the run ends"
with frozen_heap():  # nested runs (a worker's, a caller's) thaw only at the outermost end
    list(run_jobs(engine, jobs("c")))
    assert gc.get_freeze_count() > 0
assert gc.get_freeze_count() == 0
stopped = run_jobs(engine, jobs("d", "e"), concurrency=1)
next(stopped)
stopped.close()  # a consumer that stops early
assert gc.get_freeze_count() == 0
gc.freeze()  # a heap frozen by someone else (vLLM freezes its startup heap) is left as it is
frozen = gc.get_freeze_count()
list(run_jobs(engine, jobs("f")))
assert gc.get_freeze_count() == frozen > 0
print("ok")
"""


def test_what_lives_through_a_run_is_out_of_the_collectors_scans_for_its_length():
    """The loaded traces and the engine are frozen while the programs run (a full scan of them
    ran between engine steps) and thawed when the run ends, however it ends; a heap frozen
    before the run (vLLM's) is left as it is. In a fresh interpreter: the freeze is process-wide."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _HEAP_CHECK], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
