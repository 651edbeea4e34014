"""A JSON grammar's validator is compiled once per grammar, however many responses it checks
(issue 13: re-checking the schema on every response cost ~18 ms a call)."""

from __future__ import annotations

import sys

import jsonschema
import pytest

from localfa.engine.errors import GrammarError, InvalidOutputError
from localfa.engine.grammar import Grammar


def test_validator_is_built_once_however_many_responses(monkeypatch):
    built = []
    real = jsonschema.validators.validator_for

    def counting(schema, *args, **kwargs):
        if sys._getframe(1).f_globals.get("__name__") == "localfa.engine.grammar":
            built.append(1)  # a validator class looked up by our code, i.e. a validator being built
        return real(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.validators, "validator_for", counting)
    monkeypatch.setattr(jsonschema, "validate", lambda *a, **k: pytest.fail("per-response jsonschema.validate"))
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
    assert len(built) == 1


def test_error_messages_are_jsonschemas_best_match():
    g = Grammar.json({"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}, "required": ["n"]}, name="bounded")
    with pytest.raises(InvalidOutputError, match=r"bounded.*7 is greater than the maximum of 5"):
        g.parse('{"n":7}')
    with pytest.raises(InvalidOutputError, match=r"'n' is a required property"):
        g.parse("{}")


def test_a_bad_schema_is_refused_when_the_grammar_is_built():
    with pytest.raises(GrammarError, match="not a valid JSON schema"):
        Grammar.json({"type": "object", "properties": {"n": {"type": "no-such-type"}}}, name="broken")
