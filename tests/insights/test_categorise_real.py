"""The categorise pass on the real embedded model with real grammar enforcement (vLLM CPU build)."""

from __future__ import annotations

import pytest

from localfa.insights.categorise import categorise_records
from localfa.insights.taxonomy import load_taxonomy
from localfa.methods.base import MethodContext
from localfa.results import ResultRecord
from localfa.traces.load import load_trace
from tests.insights.sample import write_sample

pytestmark = pytest.mark.real


def test_the_tiny_model_can_only_answer_a_category_of_the_taxonomy(vllm_engine, tmp_path):
    taxonomy = load_taxonomy("mast")
    traces = [load_trace(p) for p in write_sample(tmp_path, 3)]
    records = []
    for i, t in enumerate(traces):  # diagnoses naming steps 2, 3, 4 (any step: the pass judges what it is shown)
        diag = MethodContext(t, seed=0).diagnosis("all-at-once", step=2 + i, reasoning="The agent's claim has no source.")
        records.append(ResultRecord.from_diagnosis(diag, t))
    done, result = categorise_records(records, traces, taxonomy, vllm_engine)
    assert result.failed == 0 and result.categorised == 3
    for rec in done:
        assert rec.category in taxonomy.names
        assert rec.category_reason is not None and len(rec.category_reason) <= 300
        assert rec.taxonomy == "mast" and rec.step is not None
