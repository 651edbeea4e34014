"""One grammar per structured output, expressed as an Outlines output type.

A `Grammar` wraps exactly one of the four kinds Outlines knows (JSON schema / pydantic model,
regex, choice list, Lark CFG). Every backend enforces the same grammar: vLLM receives the
structured-outputs parameters that Outlines' own vLLM type adapter produces, the transformers
backend hands the output type to Outlines directly, and the scripted engine validates against it.
`parse()` re-validates the text on our side, so a backend bug can never leak a malformed value.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import regex as re
from pydantic import BaseModel, ValidationError

from localfa.engine.errors import GrammarError, InvalidOutputError

GrammarKind = Literal["json", "regex", "choice", "cfg"]
_CHECKED_SCHEMAS: set[str] = set()  # fingerprints of schemas already checked against the metaschema


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` that admits only compact JSON with no undeclared keys.

    Small models loop on free whitespace and invent keys; both are closed here, inside the
    grammar itself (llguidance's `x-guidance` options), so every backend that enforces it through
    llguidance (Outlines on CPU, vLLM's `guidance` backend) behaves the same.
    """

    def close(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: close(v) for k, v in node.items()}
            if node.get("type") == "object" and "properties" in node:
                node.setdefault("additionalProperties", False)
            return node
        if isinstance(node, list):
            return [close(v) for v in node]
        return node

    out = close(schema)
    out["x-guidance"] = {"whitespace_flexible": False, "key_separator": ":", "item_separator": ","}
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
            return cls(name or schema.__name__, "json", compact_schema(spec), schema)
        if not isinstance(schema, dict):
            raise GrammarError(name or "json", f"expected a pydantic model or a dict, got {type(schema).__name__}")
        grammar = cls(name or schema.get("title", "json"), "json", compact_schema(schema), None)
        _ = grammar.validator  # checks the schema against its metaschema, once, now
        return grammar

    @classmethod
    def regex(cls, pattern: str, name: str = "regex") -> "Grammar":
        try:
            re.compile(pattern)
        except re.error as exc:
            raise GrammarError(name, f"regex does not compile: {exc}") from exc
        return cls(name, "regex", pattern)

    @classmethod
    def choice(cls, options: list[str] | tuple[str, ...], name: str = "choice") -> "Grammar":
        opts = tuple(str(o) for o in options)
        if not opts:
            raise GrammarError(name, "a choice grammar needs at least one option")
        if len(set(opts)) != len(opts):
            raise GrammarError(name, "choice options must be distinct")
        return cls(name, "choice", opts)

    @classmethod
    def cfg(cls, lark_grammar: str, name: str = "cfg") -> "Grammar":
        try:
            import lark

            lark.Lark(lark_grammar, start="start", parser="earley")
        except Exception as exc:
            raise GrammarError(name, f"Lark grammar does not compile: {exc}") from exc
        return cls(name, "cfg", lark_grammar)

    # ---- identity -----------------------------------------------------------------------
    @cached_property
    def fingerprint(self) -> str:
        """Content hash of the grammar: part of cache keys and of the run manifest."""
        payload = json.dumps({"kind": self.kind, "spec": self.spec}, sort_keys=True, default=list)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    # ---- what each backend needs --------------------------------------------------------
    def output_type(self) -> Any:
        """The Outlines output type for this grammar."""
        from outlines import types as otypes

        if self.kind == "json":  # always our compacted schema, also for pydantic models
            return otypes.JsonSchema(json.dumps(self.spec))
        if self.kind == "regex":
            return otypes.Regex(self.spec)
        if self.kind == "choice":
            return Literal[self.spec]  # type: ignore[valid-type]
        return otypes.CFG(self.spec)

    @cached_property
    def validator(self) -> Any:
        """The compiled JSON-schema validator, built once per grammar (not once per response:
        `jsonschema.validate` re-checks the schema itself on every call).

        The schema is checked against the Draft 7 metaschema (the keywords our grammars use mean
        the same there, and checking is several times cheaper than 2020-12's dynamic references),
        once per distinct schema in the process.
        """
        import jsonschema

        cls = jsonschema.validators.validator_for(self.spec, default=jsonschema.Draft7Validator)
        if self.fingerprint not in _CHECKED_SCHEMAS:
            try:
                cls.check_schema(self.spec)
            except jsonschema.SchemaError as exc:
                raise GrammarError(self.name, f"not a valid JSON schema: {exc.message}") from exc
            _CHECKED_SCHEMAS.add(self.fingerprint)
        return cls(self.spec)

    @cached_property
    def _lark_parser(self) -> Any:
        import lark

        return lark.Lark(self.spec, start="start", parser="earley")

    # ---- validation ---------------------------------------------------------------------
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
            from jsonschema.exceptions import best_match

            error = best_match(self.validator.iter_errors(data))  # the error jsonschema.validate raises
            if error is not None:
                raise InvalidOutputError(self.name, text, error.message)
            return data
        if self.kind == "regex":
            if re.fullmatch(self.spec, text) is None:
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
