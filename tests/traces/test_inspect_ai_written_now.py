"""Logs written now by the installed inspect_ai (its offline `mockllm` model) read as the fixtures do:
the importer follows the format inspect_ai really writes, not only the copy committed here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from localfa.traces.load import load_traces

MAKE_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "agent_logs" / "inspect_ai" / "make_logs.py"


def test_fresh_inspect_ai_logs_read_like_the_fixtures(tmp_path):
    spec = importlib.util.spec_from_file_location("make_inspect_logs", MAKE_LOGS)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path in module.main(tmp_path):
        fresh = load_traces(path)
        kept = load_traces(MAKE_LOGS.parent / path.name)
        assert [t.id.split("/")[-1] for t in fresh] == [t.id.split("/")[-1] for t in kept] == ["sum-1", "sum-2"]
        for a, b in zip(fresh, kept):
            assert a.format == b.format == "inspect_ai"
            assert [(s.agent, s.kind) for s in a.steps] == [(s.agent, s.kind) for s in b.steps]
            assert a.task == b.task and a.final_output == b.final_output
            assert a.metadata.get("verdict") == b.metadata.get("verdict")
