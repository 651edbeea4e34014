"""One grammar per structured output, expressed as an Outlines output type.

A `Grammar` wraps exactly one of the four kinds Outlines knows (JSON schema / pydantic model,
regex, choice list, Lark CFG). Every backend enforces the same grammar: vLLM receives the
structured-outputs parameters that Outlines' own vLLM type adapter produces, the transformers
backend hands the output type to Outlines directly, and the scripted engine validates against it.
`parse()` re-validates the text on our side, so a backend bug can never leak a malformed value;
a JSON answer is checked by the schema compiled once into one Python check (`jsoncheck`).

Grammars cost microseconds at run time, because methods build many per trace (one per window,
chunk or step range) and the in-process engine waits while they are built:

- a grammar is interned by its content: building the same grammar again (another seed, another
  method, the same window) returns the first one, with its compiled validator;
- the code writes its own JSON schemas, so none is checked against the metaschema at run time
  (~30 ms each); `Grammar.check()` does that, and the tests run it on every grammar builder's
  output over many shapes (tests/engine/test_grammar_builders.py). A schema from outside the
  code (a user's file) must be checked with it before use.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Literal

import regex as re
from pydantic import BaseModel, ValidationError

from localfa.engine.errors import GrammarError, InvalidOutputError

GrammarKind = Literal["json", "regex", "choice", "cfg"]
INTERNED_MAX = 1024  # distinct grammars kept for reuse; the least recently built go first
_INTERNED: "OrderedDict[tuple[str, str, Any, Any], Grammar]" = OrderedDict()  # (name, kind, content, model)
_INTERN_LOCK = threading.Lock()


# What a model writes inside a free-text string (a JSON string with a maxLength and no pattern of its
# own): whitespace in runs of at most 32 spaces or tabs and two line breaks, and no control
# character. A small model that starts looping on whitespace or escapes (``"\n\n\n..."``, each
# character a token) otherwise writes until max_tokens cuts it and the answer is lost; a strong
# model's quotes of indented code fit. Only the model-facing schema carries it (`model_spec`):
# answers are still checked against `spec`, which it narrows.
_GAP = r"[ \t]{0,32}(?:\r?\n[ \t]{0,32}){0,2}"
TEXT_PATTERN = rf"^{_GAP}(?:[^\x00-\x20]{_GAP})*$"
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})  # values, not schemas: never closed
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions"})  # name -> schema maps


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` that admits only compact JSON with no undeclared keys.

    Small models loop on free whitespace and invent keys; both are closed here, inside the
    grammar itself (llguidance's `x-guidance` options), so every backend that enforces it through
    llguidance (Outlines on CPU, vLLM's `guidance` backend) behaves the same.
    """

    def close(node: Any) -> Any:
        if isinstance(node, list):
            return [close(v) for v in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k in _NAMED_SCHEMAS and isinstance(v, dict):
                out[k] = {name: close(sub) for name, sub in v.items()}
            elif k in _DATA_KEYWORDS or not isinstance(v, (dict, list)):
                out[k] = v  # a value (an enum's members), or a scalar keyword
            else:
                out[k] = close(v)
        if out.get("type") == "object" and "properties" in out:
            out.setdefault("additionalProperties", False)
        return out

    out = close(schema)
    out["x-guidance"] = {"whitespace_flexible": False, "key_separator": ":", "item_separator": ","}
    return out


def guard_text(schema: Any) -> Any:
    """A copy of `schema` whose free-text strings (type string, a maxLength, no pattern, format,
    enum or const) also carry `TEXT_PATTERN`."""
    if isinstance(schema, list):
        return [guard_text(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in _DATA_KEYWORDS else guard_text(v)) for k, v in schema.items()}
    if out.get("type") == "string" and "maxLength" in out and not {"pattern", "format", "enum", "const"} & out.keys():
        out["pattern"] = TEXT_PATTERN
    return out


@dataclass(frozen=True, eq=False)
class Grammar:
    """A named constraint on a model's output; build one with the class methods below."""

    name: str
    kind: GrammarKind
    spec: Any
    model: type[BaseModel] | None = field(default=None)

    # ---- constructors -------------------------------------------------------------------
    @classmethod
    def json(cls, schema: type[BaseModel] | dict[str, Any], name: str | None = None) -> "Grammar":
        """JSON constrained by a pydantic model (parsed into it) or a raw JSON schema dict."""
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            try:
                spec = schema.model_json_schema()
            except Exception as exc:  # pydantic raises several types here
                raise GrammarError(name or schema.__name__, str(exc)) from exc
            label = name or schema.__name__
            return _intern(label, "json", spec, lambda: cls(label, "json", compact_schema(spec), schema), schema)
        if not isinstance(schema, dict):
            raise GrammarError(name or "json", f"expected a pydantic model or a dict, got {type(schema).__name__}")
        label = name or schema.get("title", "json")
        return _intern(label, "json", schema, lambda: cls(label, "json", compact_schema(schema), None))

    @classmethod
    def regex(cls, pattern: str, name: str = "regex") -> "Grammar":
        return _intern(name, "regex", pattern, lambda: cls(name, "regex", pattern))

    @classmethod
    def choice(cls, options: list[str] | tuple[str, ...], name: str = "choice") -> "Grammar":
        opts = tuple(str(o) for o in options)
        if not opts:
            raise GrammarError(name, "a choice grammar needs at least one option")
        if len(set(opts)) != len(opts):
            raise GrammarError(name, "choice options must be distinct")
        return _intern(name, "choice", opts, lambda: cls(name, "choice", opts))

    @classmethod
    def cfg(cls, lark_grammar: str, name: str = "cfg") -> "Grammar":
        return _intern(name, "cfg", lark_grammar, lambda: cls(name, "cfg", lark_grammar))

    def check(self) -> "Grammar":
        """Check a JSON grammar's schema against its metaschema (Draft 7: the keywords our grammars
        use mean the same there, and checking is several times cheaper than 2020-12's dynamic
        references); raise `GrammarError` if it is not a valid schema. Returns the grammar.

        Not done at run time for the schemas the code writes (the tests check every builder);
        use it on a schema that comes from outside the code.
        """
        if self.kind == "json":
            import jsonschema

            try:
                self._validator_class.check_schema(self.spec)
            except jsonschema.SchemaError as exc:
                raise GrammarError(self.name, f"not a valid JSON schema: {exc.message}") from exc
        return self

    # ---- identity -----------------------------------------------------------------------
    @cached_property
    def fingerprint(self) -> str:
        """Content hash of the grammar as a model is held to it (`model_spec`): part of cache keys
        and of the run manifest."""
        payload = json.dumps({"kind": self.kind, "spec": self.model_spec}, sort_keys=True, default=list)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    # ---- what each backend needs --------------------------------------------------------
    @cached_property
    def model_spec(self) -> Any:
        """What a model is held to: `spec`, with every free-text string of a JSON grammar also
        bounded by `TEXT_PATTERN` (no loop on whitespace or escapes)."""
        return guard_text(self.spec) if self.kind == "json" else self.spec

    def output_type(self) -> Any:
        """The Outlines output type for this grammar (the model-facing `model_spec`)."""
        from outlines import types as otypes

        if self.kind == "json":  # always our compacted schema, also for pydantic models
            return otypes.JsonSchema(json.dumps(self.model_spec))
        if self.kind == "regex":
            return otypes.Regex(self.spec)
        if self.kind == "choice":
            return Literal[self.spec]  # type: ignore[valid-type]
        return otypes.CFG(self.spec)

    @property
    def _validator_class(self) -> Any:
        import jsonschema

        return jsonschema.validators.validator_for(self.spec, default=jsonschema.Draft7Validator)

    @cached_property
    def validator(self) -> Any:
        """The compiled JSON-schema validator, built once per grammar (not once per response:
        `jsonschema.validate` re-checks the schema itself on every call)."""
        return self._validator_class(self.spec)

    @cached_property
    def _check(self) -> Any:
        """The schema compiled into one check (`localfa.engine.jsoncheck`), or None where it uses
        keywords that compiler leaves to jsonschema. Invalid answers get jsonschema's message."""
        from localfa.engine.jsoncheck import compile_check

        return compile_check(self.spec)

    @cached_property
    def _regex(self) -> Any:
        return re.compile(self.spec)

    @cached_property
    def _lark_parser(self) -> Any:
        import lark

        return lark.Lark(self.spec, start="start", parser="earley")

    # ---- validation ---------------------------------------------------------------------
    def violation(self, data: Any) -> str | None:
        """Why a parsed JSON value breaks this JSON grammar's schema (jsonschema's best match,
        the message `jsonschema.validate` gives), or None: one compiled check when it holds."""
        check = self._check
        if check is not None and check(data):
            return None
        from jsonschema.exceptions import best_match

        error = best_match(self.validator.iter_errors(data))
        return None if error is None else str(error.message)

    def parse(self, text: str) -> Any:
        """Validate `text` against the grammar and return the parsed value."""
        if self.kind == "json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InvalidOutputError(self.name, text, f"not JSON ({exc})") from exc
            if self.model is not None:
                try:
                    return self.model.model_validate(data)
                except ValidationError as exc:
                    raise InvalidOutputError(self.name, text, str(exc).splitlines()[0]) from exc
            error = self.violation(data)
            if error is not None:
                raise InvalidOutputError(self.name, text, error)
            return data
        if self.kind == "regex":
            if self._regex.fullmatch(text) is None:
                raise InvalidOutputError(self.name, text, f"does not match /{self.spec}/")
            return text
        if self.kind == "choice":
            if text not in self.spec:
                raise InvalidOutputError(self.name, text, f"not one of {list(self.spec)}")
            return text
        import lark

        try:
            self._lark_parser.parse(text)
        except lark.exceptions.LarkError as exc:
            raise InvalidOutputError(self.name, text, f"not in the language ({type(exc).__name__})") from exc
        return text


def _intern(name: str, kind: GrammarKind, content: Any, build: Callable[[], Grammar], model: Any = None) -> Grammar:
    """The grammar already built with this name, kind, content (before compaction) and model,
    else `build()`'s, compiled first where its kind compiles (a regex, a Lark grammar). A hit
    costs one encoding of the content: no compaction, no fingerprint, no compiling."""
    key = (name, kind, content if isinstance(content, (str, tuple)) else _encode(content), model)
    with _INTERN_LOCK:
        hit = _INTERNED.get(key)
        if hit is not None:
            _INTERNED.move_to_end(key)
            return hit
    grammar = build()
    if grammar.kind == "regex":
        try:
            _ = grammar._regex
        except re.error as exc:
            raise GrammarError(grammar.name, f"regex does not compile: {exc}") from exc
    elif grammar.kind == "cfg":
        try:
            _ = grammar._lark_parser
        except Exception as exc:
            raise GrammarError(grammar.name, f"Lark grammar does not compile: {exc}") from exc
    with _INTERN_LOCK:
        _INTERNED[key] = grammar
        if len(_INTERNED) > INTERNED_MAX:
            _INTERNED.popitem(last=False)
    return grammar


def _encode(content: Any) -> bytes:
    """A schema as bytes with sorted keys: an intern key only (this process), never a fingerprint."""
    try:
        import msgspec  # ~20x faster than json.dumps(sort_keys=True) on a large schema
    except ImportError:
        return json.dumps(content, sort_keys=True, default=list).encode()
    return msgspec.json.Encoder(order="sorted", enc_hook=list).encode(content)


def clear_interned() -> None:
    """Forget every interned grammar (benchmarks that measure building from cold)."""
    with _INTERN_LOCK:
        _INTERNED.clear()
