"""The oracle cannot read the answer key, by construction (issue 49).

A rule is a function of an `Ask`: the request, the fault's fingerprint, a random source and the
error model. These tests hold the construction in place: no field of `Ask` or `FaultFingerprint`
carries a trace, a step id or a position; the policy modules import nothing that could reach a
trace (`localfa.traces`, the oracle's own label reader, the methods' machinery); and the one module
that reads labels is imported by the engine alone.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

from localfa.oracle.fingerprint import FaultFingerprint, FaultText
from localfa.oracle.policy import Ask
from localfa.oracle.registry import registered_policies
from tests.architecture.test_one_place import _imports

REPO = Path(__file__).resolve().parents[2]
# What a policy module may import from localfa: the policy protocol, the prompt reader, the
# fingerprint, the grammars' constants and the fences' own reader. Nothing that holds a trace.
ALLOWED = ("localfa.oracle.policy", "localfa.oracle.prompt", "localfa.oracle.fingerprint", "localfa.grammars", "localfa.methods.fencing")
LABEL_READER = "localfa.oracle.labels"


def _policy_files() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for _, (target, _policy) in registered_policies().by_method.items():
        module = target.partition(":")[0]
        out[module] = REPO / (module.replace(".", "/") + ".py")
    return out


def test_every_method_policy_is_checked():
    files = _policy_files()
    assert {"localfa.methods.baselines_oracle", "localfa.insights.oracle"} <= set(files)
    assert any("safari" in m for m in files) and any("falat" in m for m in files) and any("drift" in m for m in files)
    assert all(p.exists() for p in files.values()), files


def test_policy_modules_import_nothing_that_reaches_a_trace():
    bad: list[str] = []
    for module, path in _policy_files().items():
        for name in _imports(path):
            if name.startswith("localfa") and not name.startswith(ALLOWED):
                bad.append(f"{module} imports {name}")
    assert not bad, "policy modules may import only " + ", ".join(ALLOWED) + ":\n" + "\n".join(sorted(bad))


def test_only_the_engine_reads_labels():
    readers = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "localfa").rglob("*.py"))
        if any(n == LABEL_READER or n.startswith(LABEL_READER + ".") for n in _imports(p))
    ]
    assert readers == ["localfa/oracle/engine.py"], readers


def _field_types(cls: type) -> dict[str, str]:
    hints = typing.get_type_hints(cls)
    return {f.name: str(hints[f.name]) for f in dataclasses.fields(cls)}


def test_an_ask_holds_the_request_and_the_fingerprint_only():
    fields = _field_types(Ask)
    assert set(fields) == {"request", "fingerprint", "rng", "noise", "threshold", "key", "recognitions"}, fields
    assert not any("Trace" in t or "Labels" in t for t in fields.values()), fields


def test_a_fingerprint_holds_words_and_names_only():
    """No step id, position or trace: shingles (strings), an agent name, categories, a flag."""
    assert set(_field_types(FaultFingerprint)) == {"faults", "agent", "categories", "no_fault"}
    assert set(_field_types(FaultText)) == {"shingles", "distinctive"}
    assert "int" not in _field_types(FaultText)["shingles"]
