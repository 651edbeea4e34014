"""A cascade end to end on the REAL embedded model, in the shared real sweep: stage 1's samples
share the trace's cached prefix, the record names the answering stage and carries a confidence."""

from __future__ import annotations

import pytest

from localfa.methods.registry import MethodSpec
from tests.realsweep import SPECS

pytestmark = pytest.mark.real


def test_cascade_on_the_embedded_model(real_sweep):
    for rec, _trace in real_sweep.with_traces("cascade"):
        assert rec["method"] == MethodSpec.parse(SPECS["cascade"]).label
        _check(rec)


def _check(rec):
    assert rec["error"] is None, rec["error"]
    d = rec["details"]
    stage1 = d["stages"][0]
    assert stage1["members"] == "all-at-once*3" and len(stage1["runs"]) == 3
    assert stage1["usage"]["calls"] == 3
    # the three samples went out as one batch behind one trace prefix: most of their prompt is cached
    assert stage1["usage"]["cached_tokens"] >= stage1["usage"]["prompt_tokens"] // 2
    by = d["answered_by"]
    assert by["stage"] == len(d["stages"]) - 1
    assert rec["confidence"] is not None and 0 < rec["confidence"] <= 1
    steps = [r["step"] for s in d["stages"] for r in s["runs"]]
    assert rec["step"] in steps
    assert rec["usage"]["calls"] == sum(s["usage"]["calls"] for s in d["stages"])
    if by["agreed"]:
        assert steps.count(rec["step"]) >= 3
