"""Engine-layer logic on the scripted engine: validation, retries, typed errors, seeds, cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localfa.engine.cache import CachingEngine, ResponseCache
from localfa.engine.errors import ContextLengthError, EngineError, GrammarError, InvalidOutputError, ModelPathError, TruncatedOutputError
from localfa.engine.examples import example_text
from localfa.engine.grammar import TEXT_PATTERN, Grammar
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


VERDICT_SCHEMA = {  # Verdict as vLLM must receive it, written out by hand: closed and compact
    "properties": {
        "score": {"maximum": 100, "minimum": 0, "title": "Score", "type": "integer"},
        "label": {"enum": ["fault", "fine", "unsure"], "title": "Label", "type": "string"},
        # a free-text string also carries the loop guard (TEXT_PATTERN)
        "note": {"maxLength": 40, "minLength": 1, "title": "Note", "type": "string", "pattern": TEXT_PATTERN},
    },
    "required": ["score", "label", "note"],
    "title": "Verdict",
    "type": "object",
    "additionalProperties": False,
    "x-guidance": {"whitespace_flexible": False, "key_separator": ":", "item_separator": ","},
}


def test_outlines_type_adapter_feeds_vllm():
    assert [structured_outputs(g) for g in GRAMMARS] == [
        {"json": VERDICT_SCHEMA},
        {"regex": "(step [0-9]{1,2})"},
        {"regex": "(yes|no|maybe)"},
        {"grammar": 'start: "(" expr ")"\nexpr: NUMBER ("+" NUMBER)*\nNUMBER: /[0-9]{1,3}/\n'},
    ]
    # a choice is matched literally: regex metacharacters in an option are escaped
    meta = Grammar.choice(["a.b", "c|d", "(x)"], name="meta")
    assert structured_outputs(meta) == {"regex": r"(a\.b|c\|d|\(x\))"}


def test_the_by_hand_mapping_for_hosts_without_outlines():
    from localfa.engine.vllm_types import _by_hand

    assert [_by_hand(g) for g in GRAMMARS] == [
        {"json": VERDICT_SCHEMA},
        {"regex": "step [0-9]{1,2}"},
        {"choice": ["yes", "no", "maybe"]},
        {"grammar": 'start: "(" expr ")"\nexpr: NUMBER ("+" NUMBER)*\nNUMBER: /[0-9]{1,3}/\n'},
    ]


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
    assert str(info.value) == "prompt is 50 tokens but the model's context holds 10"


def test_seed_derivation_is_stable_and_order_free():
    a = derive_seed(0, "whowhen/hand-crafted/1", "turn/3")
    assert a == derive_seed(0, "whowhen/hand-crafted/1", "turn/3")
    assert a != derive_seed(1, "whowhen/hand-crafted/1", "turn/3")
    assert a != derive_seed(0, "whowhen/hand-crafted/2", "turn/3")
    assert 0 <= a < 2**31


def test_examples_satisfy_their_grammar():
    texts = [[example_text(g, seed) for seed in range(3)] for g in GRAMMARS[:3]]
    assert texts == [
        ['{"score":49,"label":"fine","note":"x"}', '{"score":17,"label":"unsure","note":"x"}', '{"score":7,"label":"fault","note":"x"}'],
        ["step 0", "step 0", "step 0"],  # a regex takes its minimum repetition
        ["no", "yes", "yes"],
    ]
    for g, row in zip(GRAMMARS, texts):
        for text in row:
            g.parse(text)


def test_response_cache_replays_exactly(tmp_path):
    calls = []

    def answer(req):
        calls.append(req.key)
        return example_text(req.grammar, req.sampling.seed)

    reqs = mixed_batch(6)[:3]
    inner = ScriptedEngine(answer)
    cached = CachingEngine(inner, ResponseCache(tmp_path / "r.sqlite"), "scripted:test")
    first = cached.generate(reqs)
    again = CachingEngine(
        ScriptedEngine(lambda r: pytest.fail("must not be called")), ResponseCache(tmp_path / "r.sqlite"), "scripted:test"
    )
    second = again.generate(reqs)
    assert [r.text for r in first] == [r.text for r in second]
    assert all(r.from_cache for r in second) and len(calls) == 3


def test_hub_ids_are_refused():
    with pytest.raises(ModelPathError, match="never downloads"):
        resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(ModelPathError, match="no such model folder"):
        resolve_model("./no/such/folder")


def test_profiles_load_and_reject_unknown_fields(tmp_path):
    assert list_profiles() == ["cpu-embedded", "gpu-node-8x", "gpu-single", "gpu-small"]
    assert load_profile("cpu-embedded").enable_prefix_caching is True
    bad = tmp_path / "bad.toml"
    bad.write_text("[engine]\nmax_model_length = 3\n")
    with pytest.raises(ValueError, match="max_model_length"):
        load_profile(str(bad))


OFFLINE_EXPECTED = {  # written out by hand: a change to offline.py must show up here as well
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "DO_NOT_TRACK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "token",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_HOST_IP": "127.0.0.1",
}


def test_offline_setup_sets_every_variable_on_a_clean_environment(monkeypatch):
    """Starting from an environment without any of them, enforce() sets each to its offline value."""
    from localfa import offline

    for key in OFFLINE_EXPECTED:
        monkeypatch.delenv(key, raising=False)
    offline.enforce()
    assert {key: os.environ.get(key) for key in OFFLINE_EXPECTED} == OFFLINE_EXPECTED
    assert offline.OFFLINE_ENV == OFFLINE_EXPECTED


def test_offline_setup_overrides_a_users_online_settings_but_keeps_their_host_ip(monkeypatch):
    """A user's setting that would phone home is overridden; only VLLM_HOST_IP (an address, not a
    network switch) keeps the user's own value, and an empty one counts as unset."""
    from localfa import offline

    online = {
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
        "HF_HUB_DISABLE_TELEMETRY": "0",
        "VLLM_NO_USAGE_STATS": "0",
        "VLLM_DO_NOT_TRACK": "0",
        "DO_NOT_TRACK": "0",
        "RAY_USAGE_STATS_ENABLED": "1",
        "RAY_AUTH_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "true",
        "VLLM_HOST_IP": "10.1.2.3",
    }
    for key, value in online.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LOCALFA_UNRELATED", "kept")
    offline.enforce()
    assert {key: os.environ[key] for key in online} == {**OFFLINE_EXPECTED, "VLLM_HOST_IP": "10.1.2.3"}
    assert os.environ["LOCALFA_UNRELATED"] == "kept"

    monkeypatch.setenv("VLLM_HOST_IP", "")
    offline.enforce()
    assert os.environ["VLLM_HOST_IP"] == "127.0.0.1"


def test_importing_localfa_applies_the_offline_setup():
    """A fresh interpreter with online settings comes out offline after `import localfa` alone."""
    env = {**os.environ, "HF_HUB_OFFLINE": "0", "VLLM_NO_USAGE_STATS": "0", "RAY_USAGE_STATS_ENABLED": "1"}
    code = (
        "import json, os, localfa; print(json.dumps({k: os.environ.get(k) for k in "
        "('HF_HUB_OFFLINE', 'VLLM_NO_USAGE_STATS', 'RAY_USAGE_STATS_ENABLED')}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert json.loads(out.stdout) == {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "RAY_USAGE_STATS_ENABLED": "0"}


def test_batch_session_isolates_a_failing_request():
    from localfa.engine.session import BatchSession

    def answer(req):
        return "not json" if req.key == "bad" else example_text(req.grammar, 0)

    session = BatchSession(ScriptedEngine(answer))
    good = Request([{"role": "user", "content": "a"}], GRAMMARS[2], key="good")
    bad = Request([{"role": "user", "content": "b"}], Grammar.json(Verdict), key="bad")
    tickets = session.submit([good, bad])
    results = dict(session.wait())
    assert results[tickets[0]].value == "no"  # example_text(yes_no, seed 0)
    assert isinstance(results[tickets[1]], InvalidOutputError)
    assert session.pending() == 0


def test_caching_session_replays_hits_without_the_engine(tmp_path):

    reqs = mixed_batch(6)[:3]
    first = CachingEngine(ScriptedEngine(lambda r: example_text(r.grammar, r.sampling.seed)), ResponseCache(tmp_path / "r.sqlite"), "id")
    s1 = first.session()
    t1 = s1.submit(reqs)
    got1 = dict(s1.wait())
    second = CachingEngine(ScriptedEngine(lambda r: pytest.fail("must not be called")), ResponseCache(tmp_path / "r.sqlite"), "id")
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


def test_methods_that_only_score_prompts_default_to_transformers(monkeypatch):
    """prism needs attention, which only transformers returns, and scores faster there on a CPU; a
    run with any generating method keeps the usual default (vLLM first)."""
    from localfa.engine import factory

    monkeypatch.setattr(factory, "engine_class", lambda name: type("Installed", (), {"available": staticmethod(lambda: True)}))
    assert factory.chosen_backend(factory.EngineOptions()) == "vllm"
    assert factory.chosen_backend(factory.EngineOptions(scoring_only=True)) == "transformers"
    assert factory.chosen_backend(factory.EngineOptions(engine="vllm", scoring_only=True)) == "vllm"  # a named engine stands
