"""A valid answer for a grammar without a model: what `--engine scripted` says by default.

Used by the scripted engine in sweeps and CLI smoke runs, where the point is the machinery
(resume, reports), not the answer. JSON picks the first branch, the lowest number and the
shortest string; regex takes the first alternative and the minimum repetition.
"""

from __future__ import annotations

import json
import random
from typing import Any

from localfa.engine.grammar import Grammar


def example_text(grammar: Grammar, seed: int | None = None) -> str:
    rng = random.Random(seed)
    if grammar.kind == "json":
        value = _from_schema(grammar.spec, grammar.spec, rng)
        return json.dumps(value, separators=(",", ":"))
    if grammar.kind == "choice":
        return grammar.spec[rng.randrange(len(grammar.spec))]
    if grammar.kind == "regex":
        return _from_regex(grammar.spec)
    raise ValueError(f"grammar {grammar.name!r}: the scripted engine cannot invent a CFG answer; script it")


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        path = node["$ref"].lstrip("#/").split("/")
        target: Any = root
        for part in path:
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _from_schema(node: dict[str, Any], root: dict[str, Any], rng: random.Random) -> Any:
    node = _resolve(node, root)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return node["enum"][rng.randrange(len(node["enum"]))]
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = node[key]
            return _from_schema(options[rng.randrange(len(options))], root, rng)
    if "allOf" in node:
        return _from_schema(node["allOf"][0], root, rng)
    typ = node.get("type", "object")
    if isinstance(typ, list):
        typ = typ[0]
    if typ == "object":
        props = node.get("properties", {})
        return {k: _from_schema(props[k], root, rng) for k in props if k in node.get("required", [])}
    if typ == "array":
        n = node.get("minItems", 0)
        return [_from_schema(node.get("items", {"type": "string"}), root, rng) for _ in range(n)]
    if typ == "integer":
        lo = node.get("minimum", node.get("exclusiveMinimum", -1) + 1 if "exclusiveMinimum" in node else 0)
        hi = node.get("maximum", lo + 10)
        return rng.randint(int(lo), int(max(lo, hi)))
    if typ == "number":
        return float(node.get("minimum", 0))
    if typ == "boolean":
        return False
    if typ == "null":
        return None
    return "x" * int(node.get("minLength", 1))


def _from_regex(pattern: str) -> str:
    import re._parser as sre_parse  # stdlib parser: enough for the patterns grammars use

    def emit(items: Any) -> str:
        out = []
        for op, arg in items:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(arg))
            elif name == "IN":
                first = arg[0]
                if str(first[0]) == "LITERAL":
                    out.append(chr(first[1]))
                elif str(first[0]) == "RANGE":
                    out.append(chr(first[1][0]))
                elif str(first[0]) == "CATEGORY":
                    out.append("0" if "DIGIT" in str(first[1]) else "a")
                else:
                    out.append("a")
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                lo, _hi, sub = arg
                out.append(emit(sub) * lo)
            elif name == "SUBPATTERN":
                out.append(emit(arg[-1]))
            elif name == "BRANCH":
                out.append(emit(arg[1][0]))
            elif name == "ANY":
                out.append("a")
            elif name == "CATEGORY":
                out.append("0" if "DIGIT" in str(arg) else " " if "SPACE" in str(arg) else "a")
        return "".join(out)

    return emit(sre_parse.parse(pattern))
