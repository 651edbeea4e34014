"""`localfa inspect`: summary, --json, --lines, and the one-line error with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
REPO = Path(__file__).resolve().parents[2]


def run_cli(argv: list[str]) -> int:
    """`localfa` in-process."""
    import localfa.cli as cli

    return cli.main(argv)


def test_bad_input_subprocess_exit_2_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"history": [', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "localfa", "inspect", str(bad)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {bad}: truncated JSON")


@pytest.mark.parametrize("name", ["otel_genai_otlp.json", "openinference_trail_row.json", "magentic_one_log.jsonl"])
def test_inspect_summary(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["inspect", str(FIX / name)]) == 0
    out = capsys.readouterr().out
    for key in ("trace:", "format:", "steps:", "agents:", "characters:", "tokens:", "labels:"):
        assert key in out


def test_inspect_json_and_forced_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["inspect", str(FIX / "openinference_trail_row.json"), "--json", "--format", "openinference"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "openinference" and info["steps"] == 8
    assert info["labels"]["high_impact_steps"] == [6] and info["labels"]["agent_at_mistake_step"] == "CodeAgent"
    assert info["tokenizer"]  # "approx" unless an embedded tokenizer is ready


def test_inspect_lines(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIX / "whowhen_handcrafted.json")
    assert run_cli(["inspect", path, "--lines", "0:2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('   0 (step 0)| {"step_id": 0, "agent": "human"')
    assert out[3].startswith("[shown lines 0-2 of 0-")
    assert run_cli(["inspect", path, "--lines", "2:2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["lines"]
    assert [r["line"] for r in rows] == [2] and rows[0]["step"] == 2


@pytest.mark.parametrize(("args", "expect"), [
    (["--lines", "abc"], "is not A:B"),
    (["--lines", "5:2"], "need 0 <= A <= B"),
    (["--lines", "9999:10000"], "is outside the line view"),
    (["--format", "csv"], "unknown format 'csv'"),
])
def test_inspect_bad_options(args: list[str], expect: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIX / "ag2_groupchat.json")
    assert run_cli(["inspect", path, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}: ") and expect in err


def test_inspect_missing_file_and_bad_tokenizer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["inspect", str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'none.json'}: no such file\n"
    assert run_cli(["inspect", str(FIX / "ag2_groupchat.json"), "--tokenizer", str(tmp_path)]) == 2
    assert "no tokenizer.json" in capsys.readouterr().err
