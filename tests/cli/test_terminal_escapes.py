"""No trace can send a terminal an escape sequence through localfa (issue 55, case 10): an agent
named with an OSC title sequence, a CSI colour, an 8-bit CSI and a carriage return, and a file
name carrying one, reached `inspect`, `diagnose`, `summarize`, summary.md and `bench`'s error lines."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from localfa.terminal import terminal_safe

LOCALFA = [sys.executable, "-m", "localfa"]
EVIL = "Coder\x1b]0;PWNED-TITLE\x07\x1b[31mRED\x1b[0m\x9b2J\rX\x1b]52;c;ZXZpbA==\x1b\\"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LOCALFA, *args], capture_output=True, text=True, timeout=300)


def clean(text: str) -> bool:
    return not CONTROL.search(text)


def write(folder: Path) -> Path:
    folder.mkdir()
    history = [
        {"name": ["Planner", EVIL, "Checker"][i % 3], "role": "assistant", "content": f"step {i}: counted {40 + i} rows"} for i in range(6)
    ]
    trace = folder / "a.json"
    trace.write_text(json.dumps({"question": "rows?", "history": history, "mistake_agent": EVIL, "mistake_step": "1"}))
    (folder / "bad\x1b]0;FILE-TITLE\x07.json").write_text("{not json")
    return trace


def test_terminal_safe_removes_every_sequence_and_keeps_text():
    assert terminal_safe(EVIL) == "CoderREDX"
    assert terminal_safe("line\n\ttabbed é 中文 🙂") == "line\n\ttabbed é 中文 🙂"
    assert terminal_safe("a\x1bPq#0;2;0;0;0\x1b\\b\u202eevil") == "abevil"


def test_no_command_prints_a_traces_escape_sequence(tmp_path):
    trace = write(tmp_path / "data")
    for args in (["inspect", str(trace)], ["inspect", str(trace), "--json"], ["inspect", str(trace), "--lines", "1:40"]):
        p = run(*args)
        assert p.returncode == 0 and clean(p.stdout) and clean(p.stderr), args
        assert "CoderRED" in p.stdout or "Coder" in p.stdout
    p = run("diagnose", str(trace), "--engine", "scripted")
    assert clean(p.stdout) and clean(p.stderr) and "CoderRED" in p.stdout  # the verdict line names the agent, inert
    run_dir = tmp_path / "run"
    p = run(
        "bench", str(tmp_path / "data"), "--methods", "all-at-once,random", "--engine", "scripted", "--out", str(run_dir), "--no-progress"
    )
    assert "bad.json: not valid JSON" in p.stderr and clean(p.stderr), p.stderr
    p = run("summarize", str(run_dir))
    assert p.returncode == 0 and clean(p.stdout) and clean(p.stderr) and "CoderRED" in p.stdout
    assert clean((run_dir / "summary.md").read_text())
    p = run("report", str(run_dir))
    assert clean(p.stdout) and clean(p.stderr)
