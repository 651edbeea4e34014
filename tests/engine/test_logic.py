"""Engine-layer logic on the scripted engine: validation, retries, typed errors, seeds, cache."""

from __future__ import annotations

import json

import pytest

from localfa.engine.cache import CachingEngine, ResponseCache
from localfa.engine.errors import (ContextLengthError, EngineError, GrammarError, InvalidOutputError, ModelPathError,
                                   TruncatedOutputError)
from localfa.engine.examples import example_text
from localfa.engine.grammar import Grammar
from localfa.engine.model import resolve_model
from localfa.engine.scripted import ScriptedEngine
from localfa.engine.settings import list_profiles, load_profile
from localfa.engine.types import Request, Sampling, derive_seed
from localfa.engine.vllm_types import structured_outputs
from tests.engine.grammar_cases import GRAMMARS, Verdict, mixed_batch


def test_grammars_validate_and_reject():
    g = Grammar.json(Verdict)
    assert g.parse('{"score":5,"label":"fine","note":"ok"}').score == 5
    with pytest.raises(InvalidOutputError):
        g.parse('{"score":500,"label":"fine","note":"ok"}')
    with pytest.raises(InvalidOutputError):
        g.parse('{"score":5,"label":"other","note":"ok"}')
    assert GRAMMARS[1].parse("step 7") == "step 7"
    with pytest.raises(InvalidOutputError):
        GRAMMARS[1].parse("step 777")
    with pytest.raises(InvalidOutputError):
        GRAMMARS[2].parse("perhaps")
    assert GRAMMARS[3].parse("(1+22)") == "(1+22)"
    with pytest.raises(InvalidOutputError):
        GRAMMARS[3].parse("(1+)")


def test_json_grammar_is_compact_and_closed():
    spec = Grammar.json(Verdict).spec
    assert spec["additionalProperties"] is False
    assert spec["x-guidance"]["whitespace_flexible"] is False


def test_invalid_grammar_names_itself():
    with pytest.raises(GrammarError, match="broken_cfg"):
        Grammar.cfg("start: (", name="broken_cfg")
    with pytest.raises(GrammarError, match="bad_re"):
        Grammar.regex("([a-z]", name="bad_re")
    with pytest.raises(GrammarError, match="empty"):
        Grammar.choice([], name="empty")


def test_outlines_type_adapter_feeds_vllm():
    fields = [structured_outputs(g) for g in GRAMMARS]
    assert "json" in fields[0] and fields[0]["json"]["properties"]["score"]["maximum"] == 100
    assert "regex" in fields[1]
    assert "regex" in fields[2] or "choice" in fields[2]
    assert fields[3] == {"grammar": GRAMMARS[3].spec}


def test_scripted_engine_validates_its_script():
    eng = ScriptedEngine(["not json"])
    with pytest.raises(InvalidOutputError):
        eng.generate([Request([{"role": "user", "content": "x"}], Grammar.json(Verdict))])


def test_truncated_output_retried_once_with_more_room_then_raised():
    g = Grammar.json(Verdict)
    ok = '{"score":1,"label":"fine","note":"a"}'
    eng = ScriptedEngine([('{"score":1', "length"), ok])
    (resp,) = eng.generate([Request([{"role": "user", "content": "x"}], g, Sampling(max_tokens=8))])
    assert resp.retried and resp.value.score == 1 and resp.usage.calls == 2
    assert eng.batches[1][0].sampling.max_tokens == 16
    eng = ScriptedEngine([('{"score":1', "length"), ('{"score":1,"lab', "length")])
    with pytest.raises(TruncatedOutputError, match="max_tokens=16"):
        eng.generate([Request([{"role": "user", "content": "x"}], g, Sampling(max_tokens=8))])


def test_context_length_error_has_both_numbers():
    eng = ScriptedEngine(["yes"], max_model_len=10)
    with pytest.raises(ContextLengthError) as info:
        eng.generate([Request([{"role": "user", "content": "word " * 50}], GRAMMARS[2])])
    assert info.value.prompt_tokens == 50 and info.value.max_model_len == 10
    assert "50" in str(info.value) and "10" in str(info.value)


def test_seed_derivation_is_stable_and_order_free():
    a = derive_seed(0, "whowhen/hand-crafted/1", "turn/3")
    assert a == derive_seed(0, "whowhen/hand-crafted/1", "turn/3")
    assert a != derive_seed(1, "whowhen/hand-crafted/1", "turn/3")
    assert a != derive_seed(0, "whowhen/hand-crafted/2", "turn/3")
    assert 0 <= a < 2**31


def test_examples_satisfy_their_grammar():
    for g in GRAMMARS[:3]:
        for seed in range(5):
            g.parse(example_text(g, seed))


def test_response_cache_replays_exactly(tmp_path):
    calls = []

    def answer(req):
        calls.append(req.key)
        return example_text(req.grammar, req.sampling.seed)

    reqs = mixed_batch(6)[:3]
    inner = ScriptedEngine(answer)
    cached = CachingEngine(inner, ResponseCache(tmp_path / "r.sqlite"), "scripted:test")
    first = cached.generate(reqs)
    again = CachingEngine(ScriptedEngine(lambda r: pytest.fail("must not be called")),
                          ResponseCache(tmp_path / "r.sqlite"), "scripted:test")
    second = again.generate(reqs)
    assert [r.text for r in first] == [r.text for r in second]
    assert all(r.from_cache for r in second) and len(calls) == 3


def test_hub_ids_are_refused():
    with pytest.raises(ModelPathError, match="never downloads"):
        resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(ModelPathError, match="no such model folder"):
        resolve_model("./no/such/folder")


def test_profiles_load_and_reject_unknown_fields(tmp_path):
    assert "cpu-embedded" in list_profiles()
    assert load_profile("cpu-embedded").enable_prefix_caching is True
    bad = tmp_path / "bad.toml"
    bad.write_text("[engine]\nmax_model_length = 3\n")
    with pytest.raises(ValueError, match="max_model_length"):
        load_profile(str(bad))


def test_offline_environment_is_set_on_import():
    import os

    import localfa  # noqa: F401

    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_NO_USAGE_STATS", "DO_NOT_TRACK"):
        assert os.environ[key] == "1"
    assert json.loads(json.dumps(dict(os.environ)))  # environment stays serialisable


def test_batch_session_isolates_a_failing_request():
    from localfa.engine.session import BatchSession

    def answer(req):
        return "not json" if req.key == "bad" else example_text(req.grammar, 0)

    session = BatchSession(ScriptedEngine(answer))
    good = Request([{"role": "user", "content": "a"}], GRAMMARS[2], key="good")
    bad = Request([{"role": "user", "content": "b"}], Grammar.json(Verdict), key="bad")
    tickets = session.submit([good, bad])
    results = dict(session.wait())
    assert results[tickets[0]].value in ("yes", "no", "maybe")
    assert isinstance(results[tickets[1]], InvalidOutputError)
    assert session.pending() == 0


def test_caching_session_replays_hits_without_the_engine(tmp_path):

    reqs = mixed_batch(6)[:3]
    first = CachingEngine(ScriptedEngine(lambda r: example_text(r.grammar, r.sampling.seed)),
                          ResponseCache(tmp_path / "r.sqlite"), "id")
    s1 = first.session()
    t1 = s1.submit(reqs)
    got1 = dict(s1.wait())
    second = CachingEngine(ScriptedEngine(lambda r: pytest.fail("must not be called")),
                           ResponseCache(tmp_path / "r.sqlite"), "id")
    s2 = second.session()
    t2 = s2.submit(reqs)
    got2 = dict(s2.wait())
    assert [got1[t].text for t in t1] == [got2[t].text for t in t2]
    assert all(got2[t].from_cache for t in t2) and second.hits == 3


def test_a_data_parallel_profile_is_refused_in_process_with_the_way_to_run_it():
    from localfa.engine.errors import EngineError
    from localfa.engine.factory import make_engine

    with pytest.raises(EngineError) as info:
        make_engine("vllm", profile="gpu-node-8x", say=lambda _m: None)
    msg = str(info.value)
    assert "data_parallel_size=2" in msg
    assert "localfa serve --profile gpu-node-8x" in msg and "--engine openai" in msg


def test_the_transformers_backend_takes_the_profiles_window(monkeypatch):
    import localfa.engine.transformers_backend as tb
    from localfa.engine.base import LocalModel
    from localfa.engine.factory import EngineOptions

    seen = {}

    class Probe(tb.TransformersEngine):
        def __init__(self, model_dir, max_model_len=None, **kw):  # no model load: record the arguments
            seen.update(max_model_len=max_model_len, **kw)

    monkeypatch.setattr(tb, "resolve_local_model", lambda o, b, n, s: LocalModel("/nowhere", o.settings(), {}))
    Probe.create(EngineOptions(profile="cpu-embedded", max_model_len=4096), say=lambda _m: None)
    assert seen == {"max_model_len": 4096, "enable_thinking": False}
    Probe.create(EngineOptions(profile="cpu-embedded"), say=lambda _m: None)
    assert seen["max_model_len"] == 8192


def test_self_checks_stop_the_run_unless_allowed(monkeypatch):
    from localfa.engine.errors import EngineError
    from localfa.engine.self_check import settle
    from localfa.engine.settings import EngineSettings
    from localfa.engine.vllm_backend import VLLMEngine

    engine = object.__new__(VLLMEngine)  # the checks only, no model
    engine.sync_grammars = True
    engine.settings = EngineSettings(enable_prefix_caching=False)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # a user's setting that defeats the in-process engine
    checks = engine.run_self_checks()
    assert {k: ok for k, (ok, _) in checks.items()} == {"grammar_compilation_synchronous": True, "in_process_engine": False}
    with pytest.raises(EngineError, match="in_process_engine: VLLM_ENABLE_V1_MULTIPROCESSING is not 0"):
        settle(checks, say=lambda _m: None)
    said: list[str] = []
    monkeypatch.setenv("LOCALFA_ALLOW_UNCHECKED", "1")
    assert settle(checks, said.append) == {"grammar_compilation_synchronous": True, "in_process_engine": False}
    assert len(said) == 1 and "continuing because LOCALFA_ALLOW_UNCHECKED=1" in said[0]


def test_an_untested_vllm_version_is_named_in_a_warning():
    from localfa.engine.self_check import vllm_version_note

    assert vllm_version_note("0.32.0") is None
    assert "vLLM 0.40.1 has not been tested" in vllm_version_note("0.40.1")


def test_a_backend_bug_mid_batch_fails_only_its_own_request():
    from localfa.engine.session import BatchSession

    g = Grammar.choice(["ok"], name="ok")

    def answer(req):
        if req.key == "bad":
            raise ZeroDivisionError("backend bug")
        return "ok"

    session = BatchSession(ScriptedEngine(answer))
    reqs = [Request([{"role": "user", "content": k}], g, Sampling(max_tokens=2, seed=0), key=k) for k in ("a", "bad", "b")]
    tickets = session.submit(reqs)
    done = dict(session.wait())
    assert done[tickets[0]].value == "ok" and done[tickets[2]].value == "ok"
    assert isinstance(done[tickets[1]], EngineError) and "ZeroDivisionError in the backend" in str(done[tickets[1]])
