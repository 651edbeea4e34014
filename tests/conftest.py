"""Shared fixtures: the Who&When dev split and ONE real engine per backend per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WHOWHEN = REPO.parent / "shared" / "data" / "whowhen"


@pytest.fixture(scope="session")
def whowhen() -> Path:
    if not WHOWHEN.is_dir():
        pytest.skip(f"Who&When dev split not found at {WHOWHEN}")
    return WHOWHEN


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    from localfa.engine.model import embedded_model_dir

    return embedded_model_dir()


@pytest.fixture(scope="session")
def vllm_engine(embedded_model_dir):
    from localfa.engine.factory import make_engine

    engine = make_engine("vllm")
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def transformers_engine(embedded_model_dir):
    from localfa.engine.factory import make_engine

    engine = make_engine("transformers")
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def vllm_server(embedded_model_dir, tmp_path_factory):
    """A real `vllm serve` of the embedded model on a free loopback port, stopped at the end."""
    from localfa.engine.settings import load_profile
    from localfa.serving.launch import start_server, stop_server

    log = tmp_path_factory.mktemp("server") / "vllm.log"
    proc, url = start_server(load_profile("cpu-embedded"), embedded_model_dir, "127.0.0.1", None, log_path=log, timeout_s=420)
    yield url
    stop_server(proc)


@pytest.fixture(scope="session")
def real_sweep(tmp_path_factory):
    """Every model-calling method on the embedded model, audited (tests/realsweep.py): the methods'
    end-to-end tests, the offline audit of a sweep and the real report all read it."""
    from tests.realsweep import run_sweep

    return run_sweep(tmp_path_factory.mktemp("real-sweep"))


def pytest_collection_modifyitems(config, items):
    # Real-engine tests are the ones that matter; CI runs them. LOCALFA_SKIP_REAL=1 is for a quick
    # local loop only.
    if os.environ.get("LOCALFA_SKIP_REAL") == "1":
        skip = pytest.mark.skip(reason="LOCALFA_SKIP_REAL=1")
        for item in items:
            if "real" in item.keywords:
                item.add_marker(skip)


# ---- the real-engine share of the run, printed at the end (CI's budget: under 12 of its minutes) ----

_REAL_SECONDS: dict[str, float] = {}
_REAL_RAN: set[str] = set()


def pytest_runtest_logreport(report):
    """Sum setup, call and teardown of every real-engine test that ran (a session fixture's start
    counts in the setup of the first test that asks for it)."""
    if "real" in report.keywords:
        _REAL_SECONDS[report.nodeid] = _REAL_SECONDS.get(report.nodeid, 0.0) + report.duration
        if report.when == "call":
            _REAL_RAN.add(report.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    if _REAL_RAN:
        total = sum(_REAL_SECONDS[n] for n in _REAL_RAN)
        terminalreporter.write_line(f"real_engine_tests={len(_REAL_RAN)} real_engine_seconds={total:.0f}")
