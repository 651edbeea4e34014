"""How the Ray driver hands out work (no Ray needed): heaviest traces first, a bounded reserve."""

from __future__ import annotations

from localfa.bench.ray_executor import _by_trace, held_cap
from localfa.bench.units import Unit
from localfa.methods.registry import MethodSpec
from localfa.traces.model import Step, Trace


def _trace(tid: str, chars: int) -> Trace:
    return Trace(id=tid, source=f"{tid}.json", format="messages", steps=[Step(index=0, agent="a", role="assistant", content="x" * chars)])


def test_traces_go_out_heaviest_first_with_their_units_together_and_ties_in_plan_order():
    traces = [_trace("short", 10), _trace("long", 5000), _trace("mid", 800), _trace("mid2", 800)]
    spec = MethodSpec.parse("random")
    units = [Unit(t, spec, "none", seed) for seed in (0, 1) for t in traces]  # plan order: seed-major
    groups = _by_trace(list(enumerate(units)))
    assert [g[0][1].trace.id for g in groups] == ["long", "mid", "mid2", "short"]
    for g in groups:
        assert len({u.trace.id for _, u in g}) == 1 and [u.seed for _, u in g] == [0, 1]
        assert [i for i, _ in g] == sorted(i for i, _ in g)


def test_a_worker_holds_its_concurrency_plus_a_small_reserve():
    assert held_cap(16) == 20 and held_cap(4) == 6 and held_cap(1) == 3
