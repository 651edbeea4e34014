"""A JSON schema compiled into one Python check: microseconds to build and to run.

Methods build grammars per trace and check every answer against one, so both must be cheap;
`jsonschema` interprets the schema on every call (~0.1-0.3 ms an answer here) and
`fastjsonschema` generates code (~30 ms a schema). `compile_check` turns the subset of JSON
Schema (Draft 7 meaning) that our grammars use into nested closures, once per grammar, and
returns None for a schema using anything else, which then goes to `jsonschema` as before.
Only the yes/no answer comes from here: the message for an invalid answer is still jsonschema's
own (`Grammar.parse` asks it when this check says no), and tests compare the two on many answers.
"""

from __future__ import annotations

import re  # as jsonschema's own `pattern` check
from typing import Any, Callable

Check = Callable[[Any], bool]

# Keywords that change nothing about validity (annotations, and llguidance's own options).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "x-guidance", "$schema", "$id", "$comment", "format"})
_KNOWN = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "const", "enum", "anyOf", "oneOf", "allOf",
        "items", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "$ref", "$defs", "definitions",
    }
)  # fmt: skip


_ALL_KEYWORDS = _KNOWN | _ANNOTATIONS
_STRING_LEAF = frozenset({"type", "minLength", "maxLength"}) | _ANNOTATIONS
_NUMBER_LEAF = frozenset({"type", "minimum", "maximum"}) | _ANNOTATIONS


class Unsupported(Exception):
    """The schema uses something this compiler does not: use jsonschema for it."""


def compile_check(schema: dict[str, Any]) -> Check | None:
    """One function `value -> bool` equal to Draft 7 validation of `schema`, or None."""
    try:
        return _Compiler(schema).node(schema)
    except Unsupported:
        return None


def _leaf(schema: dict[str, Any]) -> Check | None:
    """One closure for the shapes most nodes of our grammars have (a bounded string, a bounded
    integer, a boolean, a constant string); None for anything else (the general path)."""
    typ = schema.get("type")
    if typ == "string" and schema.keys() <= _STRING_LEAF:
        lo: int = schema.get("minLength", 0)
        if schema.get("maxLength") is None:
            return lambda v: isinstance(v, str) and len(v) >= lo
        hi: int = schema["maxLength"]
        return lambda v: isinstance(v, str) and lo <= len(v) <= hi
    if typ == "integer" and schema.keys() <= _NUMBER_LEAF:
        low, high = schema.get("minimum"), schema.get("maximum")
        if type(low) is int and type(high) is int:
            a: int = low
            b: int = high
            return lambda v: (type(v) is int or (type(v) is float and v.is_integer())) and a <= v <= b
        return None
    if typ == "boolean" and len(schema) == 1:
        return lambda v: v is True or v is False
    if typ is None and "const" in schema and len(schema) == 1 and isinstance(schema["const"], str):
        const = schema["const"]
        return lambda v: v == const and isinstance(v, str)
    return None


def _const(const: Any) -> Check:
    return lambda v: equal(v, const)


def _combine(how: str, checks: list[Check]) -> Check:
    """anyOf / oneOf / allOf over compiled checks."""
    if how == "anyOf":
        return lambda v: any(c(v) for c in checks)
    if how == "oneOf":
        return lambda v: sum(1 for c in checks if c(v)) == 1
    return lambda v: all(c(v) for c in checks)


def _only_for(kind: type, check: Check) -> Check:
    """`check` applies to values of one JSON type (float: any number); others pass it."""
    if kind is float:
        return lambda v: isinstance(v, bool) or not isinstance(v, (int, float)) or check(v)
    return lambda v: not isinstance(v, kind) or check(v)


def _is_type(name: str, value: Any) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "integer":  # Draft 6+: 1.0 is an integer
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float))
    raise Unsupported(f"type {name!r}")


def equal(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema sees it: booleans equal only booleans, 1 == 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return bool(a == b)


def _hashable(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


class _Compiler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def node(self, schema: Any) -> Check:
        if schema is True or schema == {}:
            return lambda v: True
        if schema is False:
            return lambda v: False
        if not isinstance(schema, dict):
            raise Unsupported("a schema that is not an object")
        for key in schema:
            if key not in _ALL_KEYWORDS:
                raise Unsupported(key)
        leaf = _leaf(schema)
        if leaf is not None:
            return leaf
        checks: list[Check] = []
        if "$ref" in schema:  # Draft 7: $ref overrides its siblings
            return self.ref(schema["$ref"])
        if "type" in schema:
            checks.append(self.type_check(schema["type"]))
        if "const" in schema:
            checks.append(_const(schema["const"]))
        if "enum" in schema:
            checks.append(self.enum_check(schema["enum"]))
        for key in ("anyOf", "oneOf", "allOf"):
            if key in schema:
                checks.append(_combine(key, [self.node(s) for s in schema[key]]))
        for kind, check in (
            (dict, self.object_check(schema)),
            (list, self.array_check(schema)),
            (str, self.string_check(schema)),
            (float, self.number_check(schema)),
        ):
            if check is not None:
                checks.append(_only_for(kind, check))
        if not checks:
            return lambda v: True
        if len(checks) == 1:
            return checks[0]
        return _combine("allOf", checks)

    def ref(self, ref: str) -> Check:
        if ref in self.refs:
            return self.refs[ref]
        if ref != "#" and not ref.startswith("#/"):
            raise Unsupported(f"$ref {ref!r}")
        target: Any = self.root
        for part in ref[2:].split("/") if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise Unsupported(f"$ref {ref!r} does not resolve")
            target = target[part]
        slot: list[Check] = []
        self.refs[ref] = lambda v: slot[0](v)  # recursive schemas see themselves
        slot.append(self.node(target))
        return self.refs[ref]

    @staticmethod
    def type_check(typ: Any) -> Check:
        names = [typ] if isinstance(typ, str) else list(typ)
        for n in names:
            _is_type(n, None)  # an unknown type name raises Unsupported now, not per answer
        if len(names) == 1:
            name = names[0]
            return lambda v: _is_type(name, v)
        return lambda v: any(_is_type(n, v) for n in names)

    @staticmethod
    def enum_check(options: list[Any]) -> Check:
        if all(_hashable(o) for o in options):
            members = frozenset(options)
            return lambda v: _hashable(v) and v in members
        return lambda v: any(equal(v, o) for o in options)

    def object_check(self, schema: dict[str, Any]) -> Check | None:
        props = {k: self.node(s) for k, s in (schema.get("properties") or {}).items()}
        required = list(schema.get("required") or [])
        extra = schema.get("additionalProperties", True)
        if not props and not required and extra is True:
            return None
        extra_check = None if extra is True else self.node(extra)

        def check(v: dict[str, Any]) -> bool:
            for k in required:
                if k not in v:
                    return False
            for k, item in v.items():
                c = props.get(k)
                if c is not None:
                    if not c(item):
                        return False
                elif extra_check is not None and not extra_check(item):
                    return False
            return True

        return check

    def array_check(self, schema: dict[str, Any]) -> Check | None:
        items = schema.get("items")
        if isinstance(items, list):
            raise Unsupported("tuple items")
        each = None if items is None else self.node(items)
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        unique = bool(schema.get("uniqueItems"))
        if each is None and lo is None and hi is None and not unique:
            return None

        def check(v: list[Any]) -> bool:
            if (lo is not None and len(v) < lo) or (hi is not None and len(v) > hi):
                return False
            if unique and any(equal(v[i], v[j]) for i in range(len(v)) for j in range(i + 1, len(v))):
                return False
            return each is None or all(each(x) for x in v)

        return check

    @staticmethod
    def string_check(schema: dict[str, Any]) -> Check | None:
        lo, hi, pattern = schema.get("minLength"), schema.get("maxLength"), schema.get("pattern")
        if lo is None and hi is None and pattern is None:
            return None
        rx = re.compile(pattern) if pattern is not None else None

        def check(v: str) -> bool:
            if (lo is not None and len(v) < lo) or (hi is not None and len(v) > hi):
                return False
            return rx is None or rx.search(v) is not None

        return check

    @staticmethod
    def number_check(schema: dict[str, Any]) -> Check | None:
        lo, hi = schema.get("minimum"), schema.get("maximum")
        xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if any(isinstance(b, bool) for b in (lo, hi, xlo, xhi)):
            raise Unsupported("a boolean bound (Draft 4)")
        if lo is None and hi is None and xlo is None and xhi is None:
            return None

        def check(v: float) -> bool:
            return not (
                (lo is not None and v < lo)
                or (hi is not None and v > hi)
                or (xlo is not None and v <= xlo)
                or (xhi is not None and v >= xhi)
            )

        return check
