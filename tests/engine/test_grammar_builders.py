"""Grammars cost microseconds at run time (issue 26): the schemas the code writes are not checked
against the metaschema when built; instead every grammar builder's output is checked here, over
many trace shapes, and grammars are interned by their content."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import jsonschema
import pytest

import localfa.engine.grammar as grammar_module
from localfa.engine.errors import GrammarError, InvalidOutputError
from localfa.engine.grammar import Grammar, clear_interned
from localfa.engine.scripted import scripted_default
from localfa.grammars.safari import SafariLimits, evaluator_grammar
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method, method_names
from localfa.methods.runner import method_job, run_jobs
from localfa.oracle.engine import OracleEngine
from localfa.traces.model import Labels, Step, Trace

ROOT = Path(__file__).resolve().parents[2]
BUILDER_DIRS = [ROOT / "grammars", ROOT / "localfa" / "methods"]
SHAPES = [1, 2, 3, 5, 8, 13, 40]  # steps per trace
# option variants that reach builders the defaults do not (a SAFARI run shown whole rarely ends forced)
EXTRA_SPECS = [
    "drift:segment=true:tracer=ledger",
    "drift:tracer=per-claim",
    "drift:confirm=true:confirm_when=always",
    "safari:max_turns=1",
    # the "none" answer (issue 54): its final grammars
    "all-at-once:allow_none=true",
    "binary-search:allow_none=true",
    "safari:allow_none=true:max_turns=1",
]
PER_NAME = 4  # grammars of one name compared answer by answer with jsonschema (the rest: schema checked)


def _shape(n: int, long: int, with_gt: bool) -> Trace:
    agents = ["Planner", "Coder", "Terminal", "Web Surfer"][: max(1, min(4, n))]
    steps = [
        Step(
            index=i,
            agent=agents[i % len(agents)],
            role="assistant",
            content=f"Step {i}: the {agents[i % len(agents)]} says x={i * 7}. " + "detail " * long,
            kind="observation" if agents[i % len(agents)] == "Terminal" and n > 3 else "action",
        )
        for i in range(n)
    ]
    return Trace(
        id=f"shape{n}-{long}-{int(with_gt)}",
        source=f"shape{n}-{long}.json",
        format="messages",
        task="Count the even addresses in the list.",
        steps=steps,
        final_output="4",
        ground_truth="8" if with_gt else None,
        labels=Labels(mistake_agent=agents[min(1, len(agents) - 1)], mistake_step=min(1, n - 1)),
    )


def _builder_functions() -> set[tuple[str, str]]:
    """(file, name) of every function annotated to return a Grammar, in grammars/ and methods/."""
    found = set()
    for folder in BUILDER_DIRS:
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef) and node.returns is not None and ast.unparse(node.returns).strip("'\"") == "Grammar":
                    found.add((str(path), node.name))
    return found


def _all_method_specs() -> list[str]:
    return [name for name in method_names()] + EXTRA_SPECS


@pytest.fixture(scope="module")
def built_grammars():
    """Every grammar the methods build on the scripted engine over many shapes, and which
    functions ran (to see that every builder was reached)."""
    seen: dict[tuple[str, str], Grammar] = {}
    called: set[tuple[str, str]] = set()
    builders = _builder_functions()
    real = grammar_module._intern

    def recording(*args, **kwargs) -> Grammar:
        out = real(*args, **kwargs)
        seen.setdefault((out.name, out.fingerprint), out)
        frame = sys._getframe(1)
        for _ in range(8):  # the builder that made it: a few frames up (Grammar.json, the builder)
            if frame is None:
                break
            where = (frame.f_code.co_filename, frame.f_code.co_name)
            if where in builders:
                called.add(where)
            frame = frame.f_back
        return out

    grammar_module._intern = recording
    # minimal answers (scripted), and a careful model's and a sloppy one's (the oracle): later
    # stages (claims to check, candidates to verify) are reached only with answers that have content
    engines = [scripted_default(), OracleEngine(1.0), OracleEngine(0.5)]
    traces = [_shape(n, long, gt) for n in SHAPES for long, gt in ((0, True), (60, False))]
    try:
        clear_interned()
        for spec in _all_method_specs():
            method = get_method(spec)
            for engine in engines:
                jobs = [method_job(engine, method, MethodContext(t, seed=0), key=t.id) for t in traces]
                for _ in run_jobs(engine, jobs, concurrency=8):
                    pass
    finally:
        grammar_module._intern = real
    return seen, called


def test_every_builders_output_is_a_valid_schema(built_grammars):
    seen, _ = built_grammars
    json_grammars = [g for g in seen.values() if g.kind == "json"]
    assert len(json_grammars) > 20
    bad = []
    for g in json_grammars:
        try:
            g.check()
        except GrammarError as exc:
            bad.append(str(exc))
    assert not bad, bad


def test_every_grammar_builder_was_reached(built_grammars):
    _, called = built_grammars
    builders = _builder_functions()
    assert len(builders) >= 10  # the walk found the builders (safari, falat, drift, ...)
    missed = sorted(f"{Path(p).relative_to(ROOT)}:{name}" for p, name in builders - called)
    assert not missed, f"builders no method reached over the shapes here (add a shape or a spec to EXTRA_SPECS): {missed}"


def test_a_builder_made_grammar_is_not_checked_against_the_metaschema(monkeypatch):
    def refuse(*args, **kwargs):
        pytest.fail("a metaschema check at run time")

    for cls in (jsonschema.Draft7Validator, jsonschema.Draft202012Validator):
        monkeypatch.setattr(cls, "check_schema", classmethod(refuse))
    clear_interned()
    g = evaluator_grammar(SafariLimits())
    assert g.parse('{"feedback":"fine","score":70}') == {"feedback": "fine", "score": 70}
    raw = Grammar.json({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, name="raw")
    assert raw.parse('{"n":1}') == {"n": 1}


def test_check_refuses_a_bad_schema_with_the_grammars_name():
    g = Grammar.json({"type": "object", "properties": {"n": {"type": "no-such-type"}}}, name="broken")
    with pytest.raises(GrammarError, match="broken.*not a valid JSON schema"):
        g.check()


def test_grammars_are_interned_by_content():
    clear_interned()
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}, "required": ["n"]}
    a = Grammar.json(schema, name="count")
    b = Grammar.json({"required": ["n"], "properties": {"n": {"maximum": 5, "type": "integer"}}, "type": "object"}, name="count")
    assert a is b  # same content, keys in another order
    assert Grammar.json(schema, name="other") is not a  # the name is part of the identity (error messages)
    assert Grammar.json({**schema, "required": []}, name="count") is not a
    assert Grammar.regex("a[0-9]", name="r") is Grammar.regex("a[0-9]", name="r")
    assert Grammar.choice(["x", "y"], name="c") is Grammar.choice(("x", "y"), name="c")
    assert Grammar.choice(["y", "x"], name="c") is not Grammar.choice(["x", "y"], name="c")
    validator = a.validator
    assert Grammar.json(schema, name="count").validator is validator  # compiled once, reused
    with pytest.raises(InvalidOutputError, match="greater than the maximum"):
        b.parse('{"n":7}')


def test_the_intern_table_is_bounded(monkeypatch):
    monkeypatch.setattr(grammar_module, "INTERNED_MAX", 3)
    clear_interned()
    first = Grammar.choice(["a"], name="c0")
    for i in range(1, 4):
        Grammar.choice(["a"], name=f"c{i}")
    assert len(grammar_module._INTERNED) == 3
    assert Grammar.choice(["a"], name="c0") is not first  # the oldest was forgotten


def test_bad_regex_and_cfg_are_refused_when_built():
    with pytest.raises(GrammarError, match="regex does not compile"):
        Grammar.regex("(unclosed", name="bad_re")
    with pytest.raises(GrammarError, match="Lark grammar does not compile"):
        Grammar.cfg("start: undefined_rule", name="bad_cfg")


def test_enum_members_are_values_not_schemas():
    g = Grammar.json({"enum": [{"type": "object", "properties": {}}]}, name="weird_enum")
    assert g.spec["enum"] == [{"type": "object", "properties": {}}]  # not closed with additionalProperties
    nested = Grammar.json({"type": "object", "properties": {"enum": {"type": "object", "properties": {"a": {"type": "string"}}}}})
    assert nested.spec["properties"]["enum"]["additionalProperties"] is False  # a property named like a keyword is a schema


# ---- the compiled check agrees with jsonschema on every builder's grammar -----------------------

_REPLACEMENTS = [None, True, 0, -1, 7, 10**9, 1.5, 2.0, "", "x", "x" * 5000, [], {}, ["x"], {"zz": 1}]


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _replace(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    out = list(value)
    out[head] = _replace(value[head], rest, new)
    return out


def _mutants(value):
    """The answer with each node replaced by wrong values, a key dropped or added, an item added."""
    for path in list(_paths(value))[:60]:
        for new in _REPLACEMENTS:
            yield _replace(value, path, new)
        node = value
        for p in path:
            node = node[p]
        if isinstance(node, dict):
            for k in node:
                yield _replace(value, path, {kk: vv for kk, vv in node.items() if kk != k})
            yield _replace(value, path, {**node, "zz_unknown": 1})
        if isinstance(node, list):
            yield _replace(value, path, [*node, node[0] if node else "x"])


def test_the_compiled_check_agrees_with_jsonschema_on_every_builders_grammar(built_grammars):
    from localfa.engine.examples import example_text
    from localfa.engine.jsoncheck import compile_check

    seen, _ = built_grammars
    compared = 0
    per_name: dict[str, int] = {}
    for g in (g for g in seen.values() if g.kind == "json" and g.model is None):
        check = compile_check(g.spec)
        assert check is not None, f"{g.name}: a builder's schema uses a keyword the compiled check leaves to jsonschema"
        per_name[g.name] = per_name.get(g.name, 0) + 1
        if per_name[g.name] > PER_NAME:
            continue
        for seed in (0, 1):
            answer = json.loads(example_text(g, seed))
            for value in [answer, *_mutants(answer)]:
                assert check(value) == g.validator.is_valid(value), (g.name, value)
                compared += 1
    assert compared > 1000
