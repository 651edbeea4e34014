"""Ray sweeps on a local instance (scripted engine): same records as one process, workers and
drivers killed mid-sweep, offline switches. Each test starts its own loopback-only instance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import localfa  # noqa: F401  (sets Ray's switches before Ray is imported, as the CLI does)

pytest.importorskip("ray")

from localfa.bench.driver import run_units_sweep  # noqa: E402
from localfa.bench.ray_executor import RayExecutor
from localfa.bench.sweep import load_traces, parse_methods, run_sweep  # noqa: E402
from localfa.cluster.runtime import reap_session  # noqa: E402
from localfa.engine.scripted import scripted_default  # noqa: E402
from tests.cluster.helpers import LOCALFA, by_key, raw_lines, start_cli, wait_for_lines, write_whowhen  # noqa: E402


def test_ray_sweep_with_two_workers_equals_the_single_process_sweep(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=3)])
    methods = parse_methods("all-at-once,step-by-step,binary-search,random")
    single = run_sweep(tmp_path / "one", traces, methods, [0, 1], scripted_default(), progress=False)
    executor = RayExecutor("local", 2, {"engine": "scripted"})
    res = run_units_sweep(tmp_path / "ray", traces, methods, [0, 1], executor, concurrency=4, progress=False)
    assert res.written == single.written == 6 * 4 * 2
    assert by_key(tmp_path / "ray") == by_key(tmp_path / "one")  # identical apart from timings
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    cluster = manifest["cluster"]
    assert cluster["workers"] == 2 and cluster["ray_version"] and cluster["auth_mode"] == "token"
    assert cluster["nodes"] == ["127.0.0.1"]  # a local instance lives on loopback only
    assert len({w["pid"] for w in cluster["worker_hosts"]}) == 2
    assert manifest["engine"]["backend"] == "scripted"


def _bench_args(data, run, ray=True):
    flags = "--methods all-at-once,binary-search --seeds 0,1 --engine scripted --concurrency 2 --no-progress"
    return ["bench", str(data), *flags.split(), "--out", str(run)] + (["--ray", "local", "--workers", "2"] if ray else [])


def test_a_worker_killed_mid_sweep_loses_no_trace(tmp_path):
    data = write_whowhen(tmp_path / "ww", per_subset=3)
    run = tmp_path / "run"
    proc = start_cli(_bench_args(data, run), LOCALFA_SCRIPTED_DELAY_S="0.1")
    assert wait_for_lines(run / "results.jsonl", 3, proc) >= 3, proc.communicate()
    victim = json.loads((run / "manifest.json").read_text())["cluster"]["worker_hosts"][0]["pid"]
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "worker 1 lost" in err and "go back to the queue" in err
    lines = raw_lines(run)
    assert len(lines) == len({(r["trace"], r["method"], r["budget"], r["seed"]) for r in lines}) == 6 * 2 * 2
    assert not [r for r in lines if r["error"]]


def test_a_driver_killed_with_sigkill_resumes_without_duplicates(tmp_path):
    data = write_whowhen(tmp_path / "ww", per_subset=3)
    run = tmp_path / "run"
    proc = start_cli(_bench_args(data, run), LOCALFA_SCRIPTED_DELAY_S="0.1")
    n = wait_for_lines(run / "results.jsonl", 3, proc)
    assert proc.poll() is None and n >= 3, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    before = by_key(run)
    assert 3 <= len(before) < 24
    done = subprocess.run([*LOCALFA, *_bench_args(data, run)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "already done" in done.stderr
    after = by_key(run)
    assert len(raw_lines(run)) == len(after) == 24  # complete, no line written twice
    assert all(after[k] == v for k, v in before.items())
    clean = _bench_args(data, tmp_path / "clean", ray=False)  # one process, no Ray
    assert subprocess.run([*LOCALFA, *clean], capture_output=True, timeout=300).returncode == 0
    assert after == by_key(tmp_path / "clean")


def test_reap_session_only_touches_orphans_holding_files_of_that_session(tmp_path):
    session = tmp_path / "session_x"
    (session / "logs").mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time; f=open(sys.argv[1],'a'); time.sleep(60)", str(session / "logs" / "agent.log")]
    )
    try:
        time.sleep(0.5)
        assert reap_session(str(session)) == []  # its parent (this test) is alive: not an orphan
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
    assert reap_session("relative/path") == []


def test_ray_usage_statistics_are_off_before_ray_is_imported():
    code = (
        "import os, sys; import localfa; assert 'ray' not in sys.modules; "
        "print(os.environ['RAY_USAGE_STATS_ENABLED']); "
        "from localfa.cluster.runtime import import_ray; ray = import_ray(); "
        "from ray._common.usage import usage_lib; print(usage_lib.usage_stats_enabled(), os.environ['RAY_AUTH_MODE'])"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "False", "token"]
