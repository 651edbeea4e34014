"""The transformers backend keeps its compiled grammars bounded (issue 25.10): a sweep builds a
grammar per trace (SAFARI's turn grammar holds the trace's step ids), so an unbounded map grows
with the sweep. Logic test: Outlines' Generator is replaced by a counter, no model is loaded."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from localfa.engine.grammar import Grammar
from localfa.engine.types import Request, Sampling

outlines = pytest.importorskip("outlines")


def test_compiled_grammars_are_kept_least_recently_used(monkeypatch):
    from localfa.engine.transformers_backend import TransformersEngine

    built: list[object] = []
    monkeypatch.setattr(outlines, "Generator", lambda model, output_type, backend: built.append(output_type) or object())
    engine = TransformersEngine.__new__(TransformersEngine)  # no model: only the grammar cache is exercised
    engine.model, engine.grammar_backend, engine._generators = None, "llguidance", OrderedDict()

    def req(i: int) -> Request:
        return Request(({"role": "user", "content": "x"},), Grammar.regex(f"step {i}", name=f"g{i}"), Sampling(max_tokens=4))

    first = engine._generator(req(0))
    for i in range(1, 200):
        engine._generator(req(i))
        engine._generator(req(0))  # kept warm: never evicted
    assert len(engine._generators) == TransformersEngine.max_generators
    assert engine._generator(req(0)) is first
    assert len(built) == 200  # each grammar compiled once while it stayed in the cache
    engine._generator(req(1))  # evicted long ago: compiled again
    assert len(built) == 201
