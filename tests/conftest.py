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
def vllm_engine(embedded_model_dir, request):
    """The session's in-process engine. Where this session also runs the server's tests, the server
    is launched first and loads beside this engine and the first real tests (`served_launch`)."""
    from localfa.engine.factory import make_engine

    if any(_uses_the_server(item) for item in request.session.items):
        request.getfixturevalue("served_launch")
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
def served_launch(embedded_model_dir, tmp_path_factory):
    """ONE real `localfa serve` of the embedded model (vLLM's API server behind localfa's key guard)
    for the session, launched and not awaited. Its start is about 50 s on two cores, most of it
    single-threaded imports (vLLM's, in two processes), so it is launched beside the session
    engine's own start (`vllm_engine`) rather than waited for alone; idle once up, it used 0.35 s
    of CPU in 20 s (2026-12-07). Killed at the end if still up."""
    from tests.serving.served import kill_served, launch_served

    launch = launch_served(tmp_path_factory.mktemp("serve") / "vllm.log")
    yield launch
    kill_served(launch.proc)


@pytest.fixture(scope="session")
def served(served_launch):
    """The launched server, once up; the test that stops it runs last of the tests that use it
    (`keep_the_servers_users_together`)."""
    from tests.serving.served import await_served, kill_served

    try:
        server = await_served(served_launch)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield server
    kill_served(server.proc, server.tree)


@pytest.fixture
def vllm_server(served, monkeypatch) -> str:
    """The session server's URL, its key in LOCALFA_API_KEY (read by the openai backend, inherited
    by a `localfa` child process)."""
    from tests.serving.served import SERVE_KEY

    monkeypatch.setenv("LOCALFA_API_KEY", SERVE_KEY)
    return served.url


@pytest.fixture(scope="session")
def real_sweep(vllm_engine, tmp_path_factory):
    """Every model-calling method on the session's engine, audited (tests/realsweep.py): the
    methods' end-to-end tests, the offline audit of a sweep and the real report all read it."""
    from tests.realsweep import run_real_sweep

    return run_real_sweep(vllm_engine, tmp_path_factory.mktemp("real-sweep"))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    keep_the_servers_users_together(items)
    real_tests_last(items)
    group_for_workers(config, items)
    # Real-engine tests are the ones that matter; CI runs them. LOCALFA_SKIP_REAL=1 is for a quick
    # local loop only.
    if os.environ.get("LOCALFA_SKIP_REAL") == "1":
        skip = pytest.mark.skip(reason="LOCALFA_SKIP_REAL=1")
        for item in items:
            if "real" in item.keywords:
                item.add_marker(skip)


def keep_the_servers_users_together(items) -> None:
    """The tests of the session's one server run as one block where the first of them stands, the
    test that stops it last."""
    from tests.serving.served import STOPS_THE_SERVER

    users = [item for item in items if _uses_the_server(item)]
    if not users:
        return
    first = items.index(users[0])  # no user stands before it
    users.sort(key=lambda item: item.nodeid == STOPS_THE_SERVER)  # stable: the others keep their order
    chosen = {id(item) for item in users}
    items[:] = items[:first] + users + [item for item in items[first:] if id(item) not in chosen]


def _uses_the_server(item) -> bool:
    return "served" in getattr(item, "fixturenames", ())


def _needs_the_model(item) -> bool:
    return "real" in item.keywords or _uses_the_server(item)


def real_tests_last(items) -> None:
    """The real-engine tests after all the others, each group in its own order. `.ci/run` runs mypy
    and the docs build beside the tests: the other tests use one core and leave the second to them,
    while a vLLM engine binds its threads to both cores and slows by half beside one busy core (the
    real sweep, first of the real tests, took 292 s beside mypy and 196 s after it: two CI runs on
    the 2-core box, 2026-12-06)."""
    items[:] = [item for item in items if not _needs_the_model(item)] + [item for item in items if _needs_the_model(item)]


#: Test folders whose modules share one worker: local Ray instances, one at a time.
ONE_WORKER_FOLDERS = ("tests/cluster/",)


def group_for_workers(config, items) -> None:
    """With pytest-xdist's `--dist loadgroup` (pyproject's addopts): every real-engine test in one
    group, last in the queue, so one worker runs them in order while no other test shares the cores
    (a vLLM engine binds its threads to both); every other test grouped by module, so a module's
    fixtures are built once, and spread over the workers before it. Without xdist, nothing changes."""
    if not getattr(config.option, "loadgroup", False):  # what xdist sets in its workers for --dist loadgroup
        return
    for item in items:
        where = item.nodeid.split("::", 1)[0]
        if _needs_the_model(item):
            group = "real-engine"
        else:
            group = next((folder for folder in ONE_WORKER_FOLDERS if where.startswith(folder)), where)
        item.add_marker(pytest.mark.xdist_group(group))


class _AfterXdist:
    """A plugin whose collection hook runs after xdist's (a conftest has one hook of a name)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items) -> None:
        check_the_groups_held(config, items)


def pytest_configure(config) -> None:
    config.pluginmanager.register(_AfterXdist(), "localfa-xdist-groups-held")


def check_the_groups_held(config, items) -> None:
    """xdist marks a grouped test by its id (`...@group`); where it cannot (a pytest it does not
    know), the real-engine tests would start an engine in every worker at once: say so and stop."""
    if getattr(config.option, "loadgroup", False) and any("@" not in item.nodeid for item in items):
        raise pytest.UsageError(
            "pytest-xdist's --dist loadgroup did not group the tests under this pytest (pin pytest<9.2, or run with -n 0)"
        )


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
