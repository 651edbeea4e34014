"""Node-level policy helpers: what a schema node admits (`node_ints`) and text cut to its bound
(`clip_to`), so method policies never read a grammar's bounds by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from localfa.engine.grammar import Grammar
from localfa.oracle.policy import PolicyError, clip_to, node_ints, schema_ints

ROOT = Path(__file__).resolve().parents[2]


def test_node_ints_lists_ranges_and_unions():
    assert node_ints({"type": "integer", "minimum": 2, "maximum": 5}) == [2, 3, 4, 5]
    assert node_ints({"enum": [7, None, 3, True]}) == [3, 7]  # null and booleans are not step ids
    assert node_ints({"enum": [None]}) == []  # only null admitted: no integer (not 0..max)
    assert node_ints({"const": 4}) == [4]
    nullable = {"anyOf": [{"type": "integer", "minimum": 8, "maximum": 9}, {"type": "null"}, {"enum": [1]}]}
    assert node_ints(nullable) == [1, 8, 9]


def test_node_ints_follows_refs_and_refuses_an_open_range():
    root = {"$defs": {"Step": {"type": "integer", "minimum": 0, "maximum": 2}}}
    assert node_ints({"anyOf": [{"$ref": "#/$defs/Step"}, {"type": "null"}]}, root) == [0, 1, 2]
    with pytest.raises(PolicyError, match="no maximum"):
        node_ints({"type": "integer", "minimum": 0})


def test_schema_ints_is_node_ints_of_the_property():
    g = Grammar.json(
        {"type": "object", "properties": {"step": {"anyOf": [{"type": "integer", "minimum": 3, "maximum": 4}, {"type": "null"}]}}}
    )
    assert schema_ints(g, "step") == [3, 4]


def test_clip_to_cuts_to_the_nodes_max_length_only():
    assert clip_to({"type": "string", "maxLength": 3}, "abcdef") == "abc"
    assert clip_to({"type": "string", "maxLength": 10}, "abc") == "abc"
    long = "x" * 5000
    assert clip_to({"type": "string"}, long) == long  # no bound: as it is (no invented default)


def test_method_policies_read_schema_bounds_only_through_the_helpers():
    """A policy that reads maxLength/minimum/maximum/enum itself is the workaround these helpers replace."""
    by_hand = re.compile(r"""["'](maxLength|minimum|maximum|enum)["']""")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "localfa" / "methods").rglob("*oracle.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if by_hand.search(line)
    ]
    assert not found, "\n".join(found)
