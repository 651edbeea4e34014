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
