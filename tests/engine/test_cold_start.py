"""`Engine.start_cold`: a benchmark's measured phase pays what a fresh sweep pays (no cached
prefix, no grammar built or compiled by its warm-up), on the scripted engine and on the REAL
embedded model, whose vLLM structured-outputs backend keeps its own compiled-grammar cache."""

from __future__ import annotations

import pytest

from localfa.engine import grammar as grammar_module
from localfa.engine.cache import CachingEngine, ResponseCache
from localfa.engine.grammar import Grammar
from localfa.engine.scripted import scripted_default
from localfa.engine.types import Request, Sampling
from tests.engine.grammar_cases import Verdict


def interned(name: str) -> bool:
    return any(key[0] == name for key in grammar_module._INTERNED)


def test_start_cold_forgets_the_grammars_built_so_far_and_the_prefix_cache():
    engine = scripted_default()
    resets: list[str] = []
    engine.reset_prefix_cache = lambda: resets.append("prefix")  # type: ignore[method-assign]
    Grammar.choice(["a", "b"], name="cold_start_probe")
    assert interned("cold_start_probe")
    engine.start_cold()
    assert not interned("cold_start_probe")
    assert resets == ["prefix"]


def test_a_wrapped_engine_starts_its_inner_engine_cold(tmp_path):
    inner = scripted_default()
    started: list[str] = []
    inner.start_cold = lambda: started.append("inner")  # type: ignore[method-assign]
    CachingEngine(inner, ResponseCache(tmp_path / "cache.sqlite"), "scripted").start_cold()
    assert started == ["inner"]


@pytest.mark.real
def test_vllm_start_cold_forgets_every_grammar_built_or_compiled(vllm_engine):
    """localfa's grammars and their structured-outputs fields are forgotten; vLLM's backend keeps
    no compiled grammar across requests (guidance, the default, builds each request's matcher) or,
    where it does (xgrammar's compiler cache), it is emptied."""
    from localfa.engine import vllm_types
    from localfa.engine.vllm_backend import grammar_compiler

    grammar = Grammar.json(Verdict, name="cold_start_verdict")
    request = Request([{"role": "user", "content": "Rate step 3."}], grammar, Sampling(max_tokens=40, seed=3))
    vllm_engine.generate([request])
    assert interned("cold_start_verdict") and grammar.fingerprint in vllm_types._CACHE
    backend = vllm_engine.llm.llm_engine.engine_core.engine_core.structured_output_manager.backend
    compiler = grammar_compiler(vllm_engine.llm)
    assert compiler is not None or type(backend).__name__ == "GuidanceBackend", f"{type(backend).__name__} may cache grammars"
    vllm_engine.start_cold()
    assert not interned("cold_start_verdict") and grammar.fingerprint not in vllm_types._CACHE
    assert compiler is None or compiler.get_cache_size_bytes() == 0
    assert vllm_engine.generate([request])[0].value is not None  # built again, still enforced


def test_the_xgrammar_compiler_cache_is_found_where_vllm_keeps_it():
    from types import SimpleNamespace

    from localfa.engine.vllm_backend import grammar_compiler

    class Compiler:
        def clear_cache(self) -> None: ...

    compiler = Compiler()
    backend = SimpleNamespace(compiler=compiler)
    llm = SimpleNamespace(
        llm_engine=SimpleNamespace(
            engine_core=SimpleNamespace(engine_core=SimpleNamespace(structured_output_manager=SimpleNamespace(backend=backend)))
        )
    )
    assert grammar_compiler(llm) is compiler
    backend.compiler = None  # guidance: no compiler, nothing cached
    assert grammar_compiler(llm) is None
    assert grammar_compiler(SimpleNamespace(llm_engine=SimpleNamespace(engine_core=object()))) is None  # a client of another process
