"""A diagnosis on the real engine makes no outbound connection (air-gapped users depend on it)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[1]

AUDIT = textwrap.dedent("""
    import json, socket, sys
    seen = []
    def hook(event, args):
        if event == "socket.connect":
            seen.append(["connect", repr(args[1])])
        elif event == "socket.getaddrinfo":
            seen.append(["getaddrinfo", repr(args[0])])
    sys.addaudithook(hook)
    from localfa.cli import main
    if __name__ == "__main__":
        code = main(["diagnose", {trace!r}, "--engine", "vllm", "--max-turns", "2", "--out", {out!r}])
        print("AUDIT " + json.dumps(seen), flush=True)
        sys.exit(code)
""")

LOCAL = ("127.", "'localhost'", "::1", "'/", "b'/", "'\\\\x00", "('0.0.0.0'")


def test_diagnosis_makes_no_outbound_connection(tmp_path):
    script = tmp_path / "audit.py"
    out = tmp_path / "out.jsonl"
    script.write_text(AUDIT.format(trace=str(REPO / "examples" / "failed_run.json"), out=str(out)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("AUDIT "))
    events = json.loads(line[len("AUDIT "):])
    outbound = [e for e in events if not any(tok in e[1] for tok in LOCAL) and e[1] not in ("None", "''")]
    assert outbound == [], f"non-loopback network use: {outbound}"
    rec = json.loads(out.read_text().splitlines()[0])
    assert 0 <= rec["step"] < 8
