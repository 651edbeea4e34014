"""`localfa inspect`: summary, --json, --lines, and the one-line error with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localfa.traces.load import load_trace

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
REPO = Path(__file__).resolve().parents[2]


def run_cli(argv: list[str]) -> int:
    """`localfa` in-process."""
    import localfa.cli as cli

    return cli.main(argv)


def test_bad_input_subprocess_exit_2_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"history": [', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "localfa", "inspect", str(bad)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {bad}: truncated JSON")


@pytest.fixture
def no_embedded_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Token counts that do not depend on whether the embedded model was converted yet."""
    import localfa.engine.model

    monkeypatch.setattr(localfa.engine.model, "embedded_model_dir_if_ready", lambda: None)


SUMMARIES = {
    "otel_genai_otlp.json": [
        "trace:        otel_genai_otlp",
        "format:       otel-genai, detected",
        "task:         Should I pack an umbrella for Paris tomorrow?",
        "steps:        5 (2 action, 3 observation)",
        "agents:       travel_planner, reviewer (2)",
        "lines:        11 (width 200)",
        "characters:   1,574",
        "tokens:       396 (approx)",
        "labels:       none",
        "final output: No umbrella needed: sunny tomorrow.",
        "ground truth: -",
    ],
    "openinference_trail_row.json": [
        "trace:        openinference_trail_row",
        "format:       openinference, detected",
        "task:         What is the capital of the country whose flag has a cedar tree?",
        "steps:        8 (2 action, 6 observation)",
        "agents:       CodeAgent (1)",
        "lines:        16 (width 200)",
        "characters:   2,402",
        "tokens:       606 (approx)",
        "labels:       mistake_agent=CodeAgent mistake_step=3 (agent there: CodeAgent) fault_steps=[3, 6] "
        "high_impact_steps=[6] categories=['Formatting Errors', 'Language-only']",
        "reason:       The step prints instead of keeping the result.",
        "final output: Tripoli",
        "ground truth: -",
    ],
    "magentic_one_log.jsonl": [
        "trace:        magentic_one_log",
        "format:       messages, detected",
        "task:         Which martial arts classes are near the NYSE after work?",
        "steps:        5",
        "agents:       human, Orchestrator, WebSurfer (3)",
        "lines:        5 (width 200)",
        "characters:   797",
        "tokens:       203 (approx)",
        "labels:       none",
        "final output: Renzo Gracie Jiu-Jitsu Wall Street",
        "ground truth: -",
    ],
}


@pytest.mark.parametrize("name", sorted(SUMMARIES))
def test_inspect_summary(name: str, capsys: pytest.CaptureFixture[str], no_embedded_tokenizer: None) -> None:
    assert run_cli(["inspect", str(FIX / name)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"source:       {FIX / name}"
    n = len(SUMMARIES[name])
    assert [lines[0], *lines[2 : n + 1]] == SUMMARIES[name]
    # then one row per step: its kind and size
    assert lines[n + 1] == "" and lines[n + 2].split() == ["step", "kind", "chars", "lines", "agent"]
    trace = load_trace(FIX / name)
    assert [row.split()[:2] for row in lines[n + 3 :]] == [[str(s.index), s.kind] for s in trace.steps]


def test_inspect_counts_tokens_with_the_tokenizer_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_embedded_tokenizer: None
) -> None:
    """A whitespace tokenizer makes the count checkable by hand: the records of the two steps are
    '{"step_id": 0, "agent": "human", "role": "user", "content": "a b c"}' (10 pieces) and
    '{"step_id": 1, "agent": "bot", "role": "assistant", "content": "d"}' (8 pieces)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path / "ws-tokenizer"
    folder.mkdir()
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    trace = tmp_path / "two.jsonl"
    trace.write_text('{"role": "user", "name": "human", "content": "a b c"}\n{"role": "assistant", "name": "bot", "content": "d"}\n')
    assert run_cli(["inspect", str(trace), "--json", "--tokenizer", str(folder)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["tokenizer"], info["tokens"]) == ("ws-tokenizer", 10 + 8)
    assert run_cli(["inspect", str(trace), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    # 4 characters a token, rounded up, over each record and its newline (69 and 68 characters)
    assert (info["tokenizer"], info["tokens"]) == ("approx", 18 + 17)


def test_inspect_json_and_forced_format(capsys: pytest.CaptureFixture[str], no_embedded_tokenizer: None) -> None:
    assert run_cli(["inspect", str(FIX / "openinference_trail_row.json"), "--json", "--format", "openinference"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "openinference" and info["steps"] == 8
    assert info["labels"]["high_impact_steps"] == [6] and info["labels"]["agent_at_mistake_step"] == "CodeAgent"
    assert (info["tokenizer"], info["tokens"], info["format_source"]) == ("approx", 606, "forced")


def test_inspect_lines(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIX / "whowhen_handcrafted.json")
    assert run_cli(["inspect", path, "--lines", "0:2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('   0 (step 0)| {"step_id": 0, "agent": "human"')
    assert out[3] == "[shown lines 0-2 of 0-5]"
    assert run_cli(["inspect", path, "--lines", "2:2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["lines"]
    assert [r["line"] for r in rows] == [2] and rows[0]["step"] == 2


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["--lines", "abc"], "--lines 'abc' is not A:B (line numbers from 0, e.g. 0:40)"),
        (["--lines", "5:2"], "--lines '5:2': need 0 <= A <= B"),
        (["--lines", "9999:10000"], "--lines '9999:10000' is outside the line view (lines 0..5)"),
        (
            ["--format", "csv"],
            "unknown format 'csv' (known: atif, swe-agent, mini-swe-agent, claude-code, codex, openhands, inspect_ai, whowhen, "
            "telbench, vercel-ai, openinference, otel-genai, messages)",
        ),
    ],
)
def test_inspect_bad_options(args: list[str], expect: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIX / "ag2_groupchat.json")
    assert run_cli(["inspect", path, *args]) == 2
    assert capsys.readouterr().err == f"error: {path}: {expect}\n"


def test_inspect_missing_file_and_bad_tokenizer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["inspect", str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'none.json'}: no such file\n"
    assert run_cli(["inspect", str(FIX / "ag2_groupchat.json"), "--tokenizer", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path}: no tokenizer.json in this folder (--tokenizer takes a local Hugging Face model folder)\n"
    )
