"""A cascade end to end on the REAL embedded model through `localfa diagnose`: stage 1's samples
share the trace's cached prefix, the record names the answering stage and carries a confidence."""

from __future__ import annotations

import pytest

from tests.methods.real_cli import diagnose_cli

pytestmark = pytest.mark.real

# agree=3: stage 2 (SAFARI, two turns to stay lean) runs unless all three samples agree.
SPEC = "cascade:stages=all-at-once*3>safari(max_turns=2;min_investigate_turns=0):agree=3"


def test_cascade_on_the_embedded_model(whowhen, tmp_path):
    [rec], _ = diagnose_cli([whowhen / "algorithm-generated" / "21.json"], tmp_path / "c.jsonl", SPEC)
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
