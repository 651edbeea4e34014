"""Every Who&When development trace loads with its labels, and `localfa inspect` works on each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localfa.traces import LineView, iter_trace_files, load_trace, normalize_agent

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "whowhen"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"Who&When data not found at {DATA} (shared/ beside the repo)")

# Labels whose agent did not act at the labelled step (kept as published; loaders warn).
KNOWN_LABEL_WARNINGS = {"whowhen/algorithm-generated/14", "whowhen/algorithm-generated/15", "whowhen/hand-crafted/20"}


def run_cli(argv: list[str]) -> int:
    """`localfa` in-process."""
    from localfa.cli import main

    return main(argv)


def _files() -> list[Path]:
    return iter_trace_files([DATA]) if DATA.is_dir() else []


def test_all_files_found_in_natural_order() -> None:
    files = _files()
    assert len(files) == 60
    alg = [f.name for f in files if f.parent.name == "algorithm-generated"]
    assert alg[:3] == ["1.json", "2.json", "3.json"] and alg[-1] == "40.json"
    assert not any(f.name in ("README.md", "LICENSE") for f in files)


def test_every_trace_loads_with_labels() -> None:
    warned = set()
    for f in _files():
        raw = json.loads(f.read_text(encoding="utf-8"))
        t = load_trace(f)
        assert t.format == "whowhen" and t.subset == f.parent.name
        assert t.id == f"whowhen/{f.parent.name}/{f.stem}"
        assert len(t.steps) == len(raw["history"])
        assert t.labels.mistake_step == int(raw["mistake_step"])
        assert t.labels.fault_steps == [int(raw["mistake_step"])]
        assert t.labels.mistake_agent == raw["mistake_agent"]
        assert t.labels.reason == raw["mistake_reason"]
        # the label agent is one of the trace's agents once normalised (Websurfer vs WebSurfer)
        assert normalize_agent(raw["mistake_agent"]) in t.agent_names()
        resolved = t.resolve_agent(raw["mistake_agent"])
        assert resolved in [a.name for a in t.agents] + [s.agent for s in t.steps]
        assert normalize_agent(resolved) == normalize_agent(raw["mistake_agent"])
        assert t.task == raw["question"]
        assert t.metadata["is_correct"] is False
        if t.subset == "algorithm-generated":
            assert {a.name for a in t.agents} >= set(raw["system_prompt"])
        else:
            assert t.final_output is None or "\n" not in t.final_output
        if "label_warnings" in t.metadata:
            warned.add(t.id)
    assert warned == KNOWN_LABEL_WARNINGS


def test_known_quirks() -> None:
    t = load_trace(DATA / "algorithm-generated" / "36.json")
    assert t.steps[7].content == ""  # an empty message, kept as a step
    t = load_trace(DATA / "algorithm-generated" / "30.json")
    assert t.labels.categories == ["Factual_Error"]  # the one file with a `labels` field
    t = load_trace(DATA / "hand-crafted" / "11.json")
    assert t.labels.mistake_agent == "Websurfer" and t.resolve_agent("Websurfer") == "WebSurfer"
    t = load_trace(DATA / "hand-crafted" / "3.json")
    assert t.labels.categories == ["Tool failure"]


def test_inspect_on_every_file_in_process(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import localfa.engine.model

    monkeypatch.setattr(localfa.engine.model, "embedded_model_dir_if_ready", lambda: None)  # approx tokens
    for f in _files():
        code = run_cli(["inspect", str(f), "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        info = json.loads(out)
        raw = json.loads(f.read_text(encoding="utf-8"))
        assert info["format"] == "whowhen" and info["steps"] == len(raw["history"])
        assert info["labels"]["mistake_step"] == int(raw["mistake_step"])
        # every step's content is in the view, and each step starts a line of its own
        assert info["characters"] > sum(len(h["content"]) for h in raw["history"])
        assert info["lines"] >= info["steps"] and info["tokenizer"] == "approx"
    # and the text summary on one of each subset, value by value
    for f, expect in (
        (
            DATA / "algorithm-generated" / "1.json",
            [
                "format:       whowhen (algorithm-generated), detected",
                "steps:        6 (4 action, 2 observation)",
                "agents:       Excel_Expert, BusinessLogic_Expert, DataVerification_Expert (3); environment: Computer_terminal",
                "lines:        33 (width 200)",
                "characters:   5,418",
                "tokens:       1,357 (approx)",
                "labels:       mistake_agent=Excel_Expert mistake_step=0 (agent there: Excel_Expert) fault_steps=[0]",
            ],
        ),
        (
            DATA / "hand-crafted" / "12.json",
            [
                "format:       whowhen (hand-crafted), detected",
                "steps:        20",
                "agents:       human, Orchestrator, WebSurfer, Assistant (4)",
                "lines:        132 (width 200)",
                "characters:   21,206",
                "tokens:       5,315 (approx)",
                "labels:       mistake_agent=Assistant mistake_step=16 (agent there: Assistant) fault_steps=[16]",
            ],
        ),
    ):
        assert run_cli(["inspect", str(f)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [lines[2], *lines[4:10]] == expect


def test_longest_trace_view() -> None:
    longest = max(_files(), key=lambda f: f.stat().st_size)
    t = load_trace(longest)
    v = LineView(t)
    assert v.total_chars >= sum(len(s.content) for s in t.steps)
    m = t.labels.mistake_step
    assert v.step_at_line(v.line_of_step(m)) == m


def test_the_code_executor_is_the_environment_never_an_answer() -> None:
    """Computer_terminal (CaptainAgent) and ComputerTerminal (Magentic-One) run code and print its
    output: observations, never an agent a method may name (issue 54)."""
    from localfa.methods.baselines import agent_choices

    seen = 0
    for f in _files():
        t = load_trace(f)
        executors = [s.index for s in t.steps if s.agent.split(" (")[0].replace("_", "").lower() == "computerterminal"]
        seen += len(executors)
        assert all(t.steps[i].kind == "observation" for i in executors)
        assert not set(executors) & set(t.action_steps())
        assert not any("terminal" in a.lower() for a in agent_choices(t))
        assert t.label_answerable() == (t.labels.mistake_step not in executors)
    assert seen == 98  # 96 Computer_terminal steps, 2 ComputerTerminal steps in the dev split
    only = load_trace(DATA / "algorithm-generated" / "14.json")  # the one dev label on an executor's output
    assert not only.label_answerable() and any("no method can answer it" in w for w in only.metadata["label_warnings"])
