"""A Ray sweep on the REAL embedded model (vLLM CPU build): 2 engine workers, loopback only,
and the driver opens no outbound connection (the offline audit, as for a diagnosis)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.real
pytest.importorskip("ray")

AUDIT = textwrap.dedent("""
    import json, sys
    seen = []
    def hook(event, args):
        if event == "socket.connect":
            seen.append(["connect", repr(args[1])])
        elif event == "socket.getaddrinfo":
            seen.append(["getaddrinfo", repr(args[0])])
    sys.addaudithook(hook)
    from localfa.cli import main
    if __name__ == "__main__":
        try:
            code = main({args!r})
        except SystemExit as exc:
            code = exc.code
        print("AUDIT " + json.dumps(seen), flush=True)
        sys.exit(code)
""")

LOCAL = ("127.", "'localhost'", "::1", "'/", "b'/", "'\\\\x00", "('0.0.0.0'")


def test_ray_sweep_with_two_workers_on_the_real_model(whowhen, tmp_path):
    run = tmp_path / "RUN"
    profile = tmp_path / "small-kv.toml"  # two engines on a shared 2-core box: 1 GiB of KV cache each
    profile.write_text("[engine]\ncpu_kv_cache_gib = 1\n")
    args = [
        "bench",
        str(whowhen / "algorithm-generated"),
        "--methods",
        "all-at-once:max_chars=6000",
        "--limit",
        "4",
        "--seeds",
        "0",
        "--engine",
        "vllm",
        "--profile",
        str(profile),
        "--ray",
        "local",
        "--workers",
        "2",
        "--no-progress",
        "--out",
        str(run),
    ]
    script = tmp_path / "audit.py"
    script.write_text(AUDIT.format(args=args))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4 and len({r["trace"] for r in records}) == 4
    assert not [r for r in records if r["error"]]
    assert all(r["usage"]["calls"] == 1 and r["step"] is not None for r in records)
    cluster = json.loads((run / "manifest.json").read_text())["cluster"]
    assert cluster["workers"] == 2 and cluster["nodes"] == ["127.0.0.1"]
    assert all(w["resources"].get("CPU") == 1 for w in cluster["worker_hosts"])  # 2 cores shared out
    line = next(x for x in proc.stdout.splitlines() if x.startswith("AUDIT "))
    events = json.loads(line[len("AUDIT ") :])
    outbound = [e for e in events if not any(tok in e[1] for tok in LOCAL) and e[1] not in ("None", "''")]
    assert outbound == [], f"non-loopback network use: {outbound}"
