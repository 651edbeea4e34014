"""A Ray sweep on the REAL embedded model (vLLM CPU build): 2 engine workers, loopback only, and
no process of it (the driver, Ray's processes, the engine workers) opens an outbound connection:
the same audit and loopback filter as every offline test (tests/netaudit.py)."""

from __future__ import annotations

import json

import pytest

import localfa  # noqa: F401  (sets Ray's switches before Ray is imported: Ray reads them once, at import)
from tests.netaudit import audited_pids, outbound, run_audited

pytestmark = pytest.mark.real
pytest.importorskip("ray")


def test_ray_sweep_with_two_workers_on_the_real_model(whowhen, tmp_path):
    run = tmp_path / "RUN"
    profile = tmp_path / "small-kv.toml"  # two engines on a shared 2-core box: 1 GiB of KV cache each
    profile.write_text('[engine]\ncpu_kv_cache_gib = 1\ndtype = "float32"\n')  # as the embedded profile: bf16 is emulated on AVX2
    args = [
        "bench",
        str(whowhen / "algorithm-generated"),
        "--methods",
        "all-at-once:max_chars=2000:reason_chars=40",  # short prompts and answers: the point is the cluster, not the model
        "--limit",
        "2",  # one trace a worker: the point is that both start the real engine and their parts merge
        "--seeds",
        "0",
        "--engine",
        "vllm",
        "--profile",
        "small-kv.toml",  # relative: the workers get it resolved (issue 25.10)
        "--ray",
        "local",
        "--workers",
        "2",
        "--no-progress",
        "--out",
        "RUN",  # relative too: the workers' cache folder is RUN/cache made absolute
    ]
    proc, events = run_audited(args, tmp_path, timeout_s=900, record_processes=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 and len({r["trace"] for r in records}) == 2
    assert not [r for r in records if r["error"]]
    assert all(r["usage"]["calls"] == 1 and r["step"] is not None for r in records)
    manifest = json.loads((run / "manifest.json").read_text())
    cluster = manifest["cluster"]
    assert cluster["workers"] == 2 and cluster["nodes"] == ["127.0.0.1"]
    assert all(w["resources"].get("CPU") == 1 for w in cluster["worker_hosts"])  # 2 cores shared out
    assert manifest["response_cache"] == str((run / "cache").resolve())
    assert [p.name for p in (run / "cache").glob("responses*.sqlite")] == ["responses.sqlite"]  # the workers' parts merged
    workers = {w["pid"] for w in cluster["worker_hosts"]}
    assert workers <= audited_pids(tmp_path)  # the audit ran inside both engine workers
    assert outbound(events) == [], f"non-loopback network use: {outbound(events)}"
