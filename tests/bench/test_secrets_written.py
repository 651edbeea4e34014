"""No secret a trace carried is written anywhere (issue 55, case 8): an ``sk-proj-`` key, an
``Authorization: Bearer`` header and the running process's own LOCALFA_API_KEY, in the decisive
step (so SAFARI quotes it as evidence and keeps it in its memory) and in the task, reached
records, the response cache and the pages. Checked byte for byte over every file the commands
write, the response cache's SQLite files included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from localfa.redact import redact

LOCALFA = [sys.executable, "-m", "localfa"]
OPENAI_KEY = "sk-proj-Zq8xW3vN5mK2pL9rT4yU6iO1aS7dF0gH"
BEARER = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.Q1x2Y3z4"
OWN_KEY = "lfk-own-process-key-7e9d2c41"
SECRETS = (OPENAI_KEY, BEARER, OWN_KEY)


def secret_trace(path: Path) -> Path:
    fault = (
        f"I will call the API with OPENAI_API_KEY={OPENAI_KEY} and the header Authorization: Bearer {BEARER}; "
        f"the local server key is {OWN_KEY}. The table has 12 rows, so the answer is 12."
    )
    history = [
        {"name": "Planner", "role": "assistant", "content": "Plan: fetch the table through the API and count its rows."},
        {"name": "Coder", "role": "assistant", "content": "Fetching the table."},
        {"name": "Coder", "role": "assistant", "content": fault},
        {"name": "Checker", "role": "assistant", "content": "I accept 12."},
    ]
    data = {"question": f"Count the rows (key {OPENAI_KEY})", "history": history, "mistake_agent": "Coder", "mistake_step": "2"}
    path.write_text(json.dumps(data))
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOCALFA_API_KEY": OWN_KEY}
    p = subprocess.run([*LOCALFA, *args], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


def leaks(root: Path) -> list[str]:
    found = []
    for f in root.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            found += [f"{f.relative_to(root)}: {s[:12]}..." for s in SECRETS if s.encode() in data]
    return found


def test_redact_knows_the_key_formats_and_keeps_json_well_formed():
    line = json.dumps({"quote": f'Authorization: "Bearer {BEARER}" and {OPENAI_KEY}', "n": 1})
    masked = redact(line)
    assert json.loads(masked) == {"quote": 'Authorization: "Bearer ***" and ***', "n": 1}
    assert redact("scikit-learn's sk-learn stays") == "scikit-learn's sk-learn stays"


def test_records_cache_and_pages_hold_no_secret_the_trace_carried(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    trace = secret_trace(data / "leaky.json")
    out = tmp_path / "out"
    out.mkdir()
    diag = out / "diag.jsonl"
    p = run(
        "diagnose",
        str(trace),
        "--method",
        "safari",
        "--engine",
        "oracle",
        "--transcript",
        "--quiet",
        "--out",
        str(diag),
        "--html",
        str(out / "diag.html"),
    )
    assert all(s not in p.stdout + p.stderr for s in SECRETS)
    record = json.loads(diag.read_text())
    assert record["evidence"] and "***" in json.dumps(record)  # SAFARI quoted the step, masked
    run_dir = out / "run"
    run("bench", str(data), "--methods", "safari,all-at-once", "--engine", "oracle", "--out", str(run_dir), "--no-progress")
    assert list(run_dir.glob("cache/**/*")), "the sweep kept a response cache"
    run("view", str(run_dir), "--out", str(out / "view.html"))
    run("summarize", str(run_dir))
    run("report", str(run_dir))
    assert leaks(out) == []


def test_a_results_file_from_elsewhere_is_masked_on_the_page(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    trace = secret_trace(data / "leaky.json")
    results = tmp_path / "diag.jsonl"
    run("diagnose", str(trace), "--method", "all-at-once", "--engine", "scripted", "--quiet", "--out", str(results))
    forged = json.loads(results.read_text()) | {"reasoning": f"the key {OPENAI_KEY} and {OWN_KEY}", "evidence": [f"Bearer {BEARER}"]}
    results.write_text(json.dumps(forged) + "\n")
    run("view", str(results), "--out", str(tmp_path / "page.html"))
    page = (tmp_path / "page.html").read_text()
    assert all(s not in page for s in SECRETS) and "***" in page
