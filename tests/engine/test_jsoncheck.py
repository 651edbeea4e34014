"""The compiled JSON check means what Draft 7 means, on the cases where Python and JSON differ."""

from __future__ import annotations

import jsonschema
import pytest

from localfa.engine.jsoncheck import compile_check


def _same(schema, values):
    check = compile_check(schema)
    assert check is not None
    reference = jsonschema.Draft7Validator(schema)
    for v in values:
        assert check(v) == reference.is_valid(v), (schema, v)


def test_booleans_are_not_numbers_and_whole_floats_are_integers():
    _same({"type": "integer", "minimum": 0, "maximum": 3}, [0, 3, 4, -1, True, False, 1.0, 1.5, "1", None])
    _same({"type": "number", "exclusiveMaximum": 2}, [1, 1.99, 2, 2.0, True, "1"])
    _same({"enum": [0, 1, "a"]}, [0, 1, 1.0, False, True, "a", "b", None])
    _same({"const": False}, [False, 0, None, True])


def test_enums_of_lists_objects_and_refs():
    _same({"enum": [[1, 2], [2, 1]]}, [[1, 2], [2, 1], [1, 2, 3], [1], [True, 2], "x"])
    _same({"const": {"a": [1]}}, [{"a": [1]}, {"a": [1.0]}, {"a": [True]}, {"a": [1], "b": 2}])
    schema = {
        "type": "object",
        "$defs": {"Leaf": {"type": "string", "maxLength": 2}},
        "properties": {"leaf": {"$ref": "#/$defs/Leaf"}, "many": {"type": "array", "items": {"$ref": "#/$defs/Leaf"}, "maxItems": 2}},
        "required": ["leaf"],
        "additionalProperties": False,
    }
    _same(
        schema,
        [
            {"leaf": "ab"},
            {"leaf": "abc"},
            {},
            {"leaf": "a", "many": ["a", "b"]},
            {"leaf": "a", "many": ["a", "b", "c"]},
            {"leaf": "a", "x": 1},
        ],
    )


def test_combinators_and_patterns():
    _same({"anyOf": [{"type": "string", "pattern": "^s[0-9]$"}, {"type": "integer"}]}, ["s1", "s12", 3, 3.5, None])
    _same({"oneOf": [{"type": "integer"}, {"type": "number"}]}, [1, 1.5, "x"])
    _same({"allOf": [{"minLength": 2}, {"maxLength": 3}]}, ["a", "ab", "abcd", 5])
    _same({"type": ["string", "null"], "minLength": 1}, ["", "a", None, 0])


def test_unknown_keywords_are_left_to_jsonschema():
    assert compile_check({"type": "object", "patternProperties": {"^a": {"type": "string"}}}) is None
    assert compile_check({"type": "string", "contentMediaType": "text/plain"}) is None
    assert compile_check({"$ref": "https://example.org/schema"}) is None


@pytest.mark.parametrize("value", [{"a": 1}, {"b": {"a": {"b": {}}}}, {"a": {}}])
def test_recursive_references(value):
    node = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"$ref": "#"}}, "additionalProperties": False}
    _same(node, [value])
