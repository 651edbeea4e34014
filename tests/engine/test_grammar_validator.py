"""A JSON grammar's check is compiled once per grammar, however many responses it checks
(issue 13: re-checking the schema on every response cost ~18 ms a call; issue 26: one compiled
check, not jsonschema's interpreter, for each answer). A bad schema is refused
by `Grammar.check()` (tests/engine/test_grammar_builders.py)."""

from __future__ import annotations

import jsonschema
import pytest

from localfa.engine.errors import InvalidOutputError
from localfa.engine.grammar import Grammar, clear_interned


def test_a_valid_answer_is_one_compiled_check(monkeypatch):
    """Valid answers go through the check compiled once per grammar; jsonschema is never asked
    (it is only for the message of an invalid answer), and never per response with `validate`."""
    import localfa.engine.jsoncheck as jsoncheck

    compiled = []
    real = jsoncheck.compile_check

    def counting(schema):
        compiled.append(1)
        return real(schema)

    monkeypatch.setattr(jsoncheck, "compile_check", counting)
    monkeypatch.setattr(jsonschema.validators, "validator_for", lambda *a, **k: pytest.fail("jsonschema asked about a valid answer"))
    monkeypatch.setattr(jsonschema, "validate", lambda *a, **k: pytest.fail("per-response jsonschema.validate"))
    clear_interned()  # an interned twin from another test would already hold its check
    g = Grammar.json(
        {
            "type": "object",
            "properties": {"n": {"type": "integer", "maximum": 5}, "tag": {"type": "string", "maxLength": 3}},
            "required": ["n"],
        },
        name="count_me",
    )
    for i in range(50):
        assert g.parse(f'{{"n":{i % 5}}}') == {"n": i % 5}
    assert len(compiled) == 1


def test_error_messages_are_jsonschemas_best_match():
    g = Grammar.json({"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}, "required": ["n"]}, name="bounded")
    with pytest.raises(InvalidOutputError, match=r"bounded.*7 is greater than the maximum of 5"):
        g.parse('{"n":7}')
    with pytest.raises(InvalidOutputError, match=r"'n' is a required property"):
        g.parse("{}")
