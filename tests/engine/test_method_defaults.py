"""A profile's `[methods.NAME]` tables size a method for its model, under the user's own options."""

from __future__ import annotations

from pathlib import Path

import pytest

from localfa.engine.factory import EngineOptions, method_defaults
from localfa.engine.scripted import scripted_default
from localfa.engine.settings import EMBEDDED_PROFILE, MethodDefaults, load_profile
from localfa.methods.base import MethodContext
from localfa.methods.registry import MethodOptionError, get_method
from localfa.methods.runner import method_job, run_jobs
from tests.methods.synthetic import synthetic_trace


def test_profile_reads_method_tables(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[engine]\nmax_model_len = 4096\n[methods.all-at-once]\nreason_chars = 50\n")
    settings = load_profile(str(path))
    assert settings.max_model_len == 4096
    assert settings.methods == {"all-at-once": {"reason_chars": 50}}


def test_profile_refuses_a_methods_entry_that_is_not_a_table(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[methods]\nfalat = 3\n")
    with pytest.raises(ValueError, match=r"p\.toml: \[methods\]"):
        load_profile(str(path))


def test_embedded_model_takes_the_embedded_profile_tables_on_local_backends_only() -> None:
    embedded = method_defaults(EngineOptions(engine="vllm"), "vllm")
    assert embedded.profile == EMBEDDED_PROFILE
    assert embedded.tables == load_profile(EMBEDDED_PROFILE).methods
    assert method_defaults(EngineOptions(engine="scripted"), "scripted") == MethodDefaults()
    assert method_defaults(EngineOptions(engine="vllm", model="/models/big"), "vllm") == MethodDefaults()
    named = method_defaults(EngineOptions(engine="scripted", profile=EMBEDDED_PROFILE), "scripted")
    assert named.profile == EMBEDDED_PROFILE


def test_the_embedded_model_starts_on_its_profiles_engine_settings() -> None:
    """Unnamed, the embedded model runs as its profile says (float32: bf16 is emulated on a CPU
    without native bf16, several times slower); a named model or profile keeps its own."""
    profile = load_profile(EMBEDDED_PROFILE)
    assert profile.dtype == "float32"
    assert EngineOptions(engine="vllm").settings() == profile
    assert EngineOptions(engine="vllm", max_model_len=4096).settings().dtype == "float32"
    assert EngineOptions(engine="vllm", model="/models/big").settings().dtype == "auto"
    assert EngineOptions(engine="vllm", profile="gpu-single").settings() == load_profile("gpu-single")


def test_user_options_win_over_the_profile_which_wins_over_the_default() -> None:
    defaults = MethodDefaults("small", {"all-at-once": {"reason_chars": 50, "max_chars": 900}})
    method = get_method("all-at-once:max_chars=4000")
    resolved = method.for_model(defaults)
    assert resolved.options.reason_chars == 50  # the profile's
    assert resolved.options.max_chars == 4000  # the user's
    assert method.options.reason_chars == 200  # the method's own default is untouched
    assert resolved.from_profile == {"reason_chars": 50}
    assert resolved.for_model(defaults) is resolved.for_model(defaults)  # resolved once
    assert method.for_model(MethodDefaults()) is method


def test_a_bad_profile_value_names_the_profile_and_the_method() -> None:
    with pytest.raises(MethodOptionError, match=r"profile small \[methods.all-at-once\].*no_such"):
        get_method("all-at-once").for_model(MethodDefaults("small", {"all-at-once": {"no_such": 1}}))


def test_the_record_says_which_options_the_profile_set() -> None:
    engine = scripted_default()
    engine.method_defaults = MethodDefaults("small", {"all-at-once": {"reason_chars": 50}})
    trace = synthetic_trace(6, "t1", "hello")
    job = method_job(engine, get_method("all-at-once"), MethodContext(trace, seed=0))
    [(_, diag)] = list(run_jobs(engine, [job]))
    assert diag.error is None
    options = diag.details["options"]
    assert options["profile"] == "small"
    assert options["from_profile"] == {"reason_chars": 50}
    assert options["values"]["reason_chars"] == 50
    assert engine.requests[0].grammar.spec["properties"]["reason"]["maxLength"] == 50  # the run used it
