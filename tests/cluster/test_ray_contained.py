"""Issue 25 on Ray: no hang, no mixed models, no idle engine between rounds, poison units that
kill workers recorded instead of re-queued forever, paths that reach workers resolved."""

from __future__ import annotations

import json
import os
import time

import pytest

import localfa  # noqa: F401  (sets Ray's switches before Ray is imported, as the CLI does)
from localfa.bench.driver import run_units_sweep
from localfa.bench.ray_executor import RayExecutor, check_same_model
from localfa.bench.sweep import load_traces, parse_methods
from localfa.bench.units import Unit, run_units
from localfa.cluster.runtime import ClusterError, resolve_paths, shortfall
from localfa.cluster.worker import EngineWorker
from tests.cluster.helpers import raw_lines, write_whowhen


def test_workers_the_cluster_cannot_hold_are_named_at_once():
    msg = shortfall({"num_gpus": 1, "num_cpus": 1}, 16, {"GPU": 12.0, "CPU": 64.0}, {"GPU": 12.0, "CPU": 60.0})
    assert msg == "--workers 16 need 16 GPUs (1 each); the cluster has 12 GPUs (12 free)"
    assert shortfall({"num_gpus": 1, "num_cpus": 1}, 12, {"GPU": 12.0, "CPU": 64.0}, {}) is None
    assert shortfall({"num_cpus": 0}, 100, {"CPU": 2.0}, {}) is None


def info(host: str, sha: str | None, window: int, version: str = "0.32.0") -> dict:
    return {
        "host": host,
        "model": {"path": "/models/m", "sha256": sha},
        "max_model_len": window,
        "engine": {"backend": "vllm", "vllm_version": version, "max_model_len": window, "engine_args": {"dtype": "bfloat16"}},
    }


def test_workers_serving_different_models_windows_or_versions_are_refused():
    check_same_model([info("a", "x", 8192), info("b", "x", 8192)])  # the same: fine
    with pytest.raises(ClusterError) as err:
        check_same_model([info("a", "x", 8192), info("b", "x", 8192), info("c", "y", 4096)])
    msg = str(err.value)
    assert "differ in model, window" in msg and "workers 1, 2 on a, b: model=x, window=8192" in msg
    assert "workers 3 on c: model=y, window=4096" in msg
    with pytest.raises(ClusterError, match="engine_version"):
        check_same_model([info("a", "x", 8192), info("b", "x", 8192, version="0.33.0")])


def test_relative_paths_reach_workers_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "m").mkdir(parents=True)
    (tmp_path / "small.toml").write_text("[engine]\n")
    got = resolve_paths({"model": "models/m", "profile": "small.toml", "cache_dir": "runs/x/cache", "engine": "vllm"})
    assert got == {
        "model": str(tmp_path / "models" / "m"),
        "profile": str(tmp_path / "small.toml"),
        "cache_dir": str(tmp_path / "runs" / "x" / "cache"),
        "engine": "vllm",
    }
    assert resolve_paths({"profile": "gpu-single", "model": None})["profile"] == "gpu-single"  # a name, not a path


def test_a_worker_keeps_its_engine_fed_between_the_drivers_rounds(tmp_path, monkeypatch):
    """Units sent while others run join them: they do not wait for the engine to drain."""
    monkeypatch.setenv("LOCALFA_SCRIPTED_DELAY_S", "0.25")
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1, steps=40)])
    slow = Unit(traces[0], parse_methods("binary-search")[0], "none", 0)  # ~6 calls, one after another
    quick = Unit(traces[1], parse_methods("all-at-once")[0], "none", 0)  # one call
    worker = EngineWorker({"engine": "scripted"}, run_units)
    try:
        worker.info(60)
        worker.submit([(0, slow)], 4)
        time.sleep(0.5)  # the slow unit is in flight: the driver's next round arrives
        worker.submit([(1, quick)], 4)
        order: list[int] = []
        deadline = time.time() + 60
        while len(order) < 2 and time.time() < deadline:
            order += [idx for idx, _ in worker.poll(0.5)]
        assert order == [1, 0]  # the quick unit finished while the slow one still ran
    finally:
        worker.stop()


pytest.importorskip("ray")


def test_too_many_workers_fail_at_once_with_what_is_missing(tmp_path):
    n = (os.cpu_count() or 1) + 1  # CPU engines ask for at least one core each
    ex = RayExecutor("local", n, {"engine": "transformers"}, place_timeout_s=30)
    started = time.perf_counter()
    try:
        with pytest.raises(ClusterError) as err:
            ex.start(tmp_path)
    finally:
        ex.close()
    assert f"--workers {n} need {n} CPUs (1 each); the cluster has {n - 1} CPUs" in str(err.value)
    assert time.perf_counter() - started < 120


def test_a_unit_that_kills_two_workers_is_recorded_and_never_queued_again(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALFA_SCRIPTED_EXIT_ON", "Task 2?")  # an engine process dies on that trace's prompt
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=3) / "algorithm-generated"])
    said: list[str] = []
    ex = RayExecutor("local", 3, {"engine": "scripted"}, say=said.append)
    res = run_units_sweep(tmp_path / "run", traces, parse_methods("all-at-once,random"), [0], ex, concurrency=2, progress=False)
    lines = raw_lines(tmp_path / "run")
    assert res.written == len(lines) == 6  # every unit once, none lost, the sweep not failed
    bad = [r for r in lines if r["error"]]
    assert [(r["trace"], r["method"]) for r in bad] == [("whowhen/algorithm-generated/2", "all-at-once")]  # only the poison
    assert bad[0]["error"].startswith("WorkerLostError: 2 engine workers died while running this unit")
    assert bad[0]["error_kind"] == "final"
    lost = [m for m in said if " lost (" in m]
    assert len(lost) == 2, said  # two deaths, not one per worker: it was not queued a third time
    assert "each to run alone" in lost[0] and "1 recorded as errors" in lost[1]


def test_a_local_ray_sweep_opens_no_outbound_connection_in_any_process(tmp_path):
    """The same audit and loopback filter as every offline test, over the driver, Ray's own
    processes and the engine workers (Ray's dashboard-less API server used to ask the cloud
    metadata servers which cloud it runs on)."""
    from tests.netaudit import audited_pids, outbound, run_audited

    data = write_whowhen(tmp_path / "ww", per_subset=2)
    args = ["bench", str(data), "--methods", "all-at-once", "--engine", "scripted", "--ray", "local", "--workers", "2"]
    proc, events = run_audited([*args, "--no-progress", "--out", "RUN"], tmp_path, timeout_s=300, record_processes=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    workers = {w["pid"] for w in json.loads((tmp_path / "RUN" / "manifest.json").read_text())["cluster"]["worker_hosts"]}
    assert len(workers) == 2 and workers <= audited_pids(tmp_path)  # the audit ran inside both workers
    assert outbound(events) == [], f"non-loopback network use: {outbound(events)}"
