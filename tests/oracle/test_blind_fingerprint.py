"""Handed another trace's fingerprint, no rule finds this trace's labelled step but by chance (issue 49).

Every registered method runs on dev traces through an oracle whose fingerprint for each trace is
another trace's (an algorithm-generated run's fault given to a hand-crafted run and back): every
rule of every policy answers real requests of that method with a fault its prompts do not carry.
An oracle that read the answer key by any route (the trace, the labels, an id) would still name the
labelled step; one that reads only the prompt and the fingerprint names it no more often than a
guess among the steps it may answer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from localfa.api import diagnose_iter
from localfa.methods.registry import METHODS, get_method
from localfa.oracle.engine import OracleEngine
from localfa.oracle.labels import fingerprint_of
from localfa.oracle.registry import registered_policies
from localfa.traces.load import load_trace

PER_SUBSET = 10


class _SwappedOracle(OracleEngine):
    """An honest oracle that hands each trace's rules the fingerprint of its donor trace."""

    def __init__(self, donors: dict[str, object]) -> None:
        super().__init__(1.0)
        self.donors = donors

    def attach_trace(self, trace) -> None:
        donor = self.donors[trace.id]
        with self._lock:
            self._traces[trace.id] = (fingerprint_of(donor), len(trace.steps))


def _pairs(root: Path) -> tuple[list, dict[str, object]]:
    ag = [load_trace(root / "algorithm-generated" / f"{n}.json") for n in range(1, PER_SUBSET + 1)]
    hc = [load_trace(root / "hand-crafted" / f"{n}.json") for n in range(1, PER_SUBSET + 1)]
    donors = {a.id: h for a, h in zip(ag, hc)} | {h.id: a for a, h in zip(ag, hc)}
    return ag + hc, donors


@pytest.mark.parametrize("method", sorted(set(registered_policies().by_method) & set(METHODS)))
def test_another_traces_fingerprint_finds_this_traces_step_only_by_chance(method, whowhen):
    traces, donors = _pairs(whowhen)
    engine = _SwappedOracle(donors)
    out = dict(diagnose_iter(engine, get_method(method), traces, seed=0, concurrency=8))
    hits = 0
    chance = var = 0.0
    for i, t in enumerate(traces):
        d = out[i]
        assert d.error is None, f"{method} on {t.id}: {d.error}"
        hits += d.step == t.labels.mistake_step
        q = 1.0 / len(t.action_steps())
        chance, var = chance + q, var + q * (1 - q)
    # a guess's expected hits, with three standard deviations of room (a one-sided bound)
    assert hits <= chance + 3 * math.sqrt(var) + 1, (
        f"{method}: {hits} of {len(traces)} found with another trace's fingerprint (chance {chance:.1f})"
    )
