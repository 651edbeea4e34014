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
        return cls(name or schema.get("title", "json"), "json", compact_schema(schema), None)

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

    def structured_outputs(self) -> dict[str, Any]:
        """vLLM structured-outputs fields (in-process and in the HTTP request body).

        Produced by Outlines' own vLLM type adapter, so the grammar vLLM enforces is the one
        Outlines would enforce; JSON is kept compact (free whitespace makes small models loop).
        """
        try:
            from outlines.models.vllm_offline import VLLMOfflineTypeAdapter

            fields = VLLMOfflineTypeAdapter().format_output_type(self.output_type())
        except ImportError:  # an HTTP-only client host may lack Outlines: same mapping by hand
            fields = self._structured_outputs_by_hand()
        except Exception as exc:
            raise GrammarError(self.name, f"Outlines cannot express it: {exc}") from exc
        return fields

    def _structured_outputs_by_hand(self) -> dict[str, Any]:
        if self.kind == "json":
            return {"json": self.spec}
        if self.kind == "regex":
            return {"regex": self.spec}
        if self.kind == "choice":
            return {"choice": list(self.spec)}
        return {"grammar": self.spec}

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
            import jsonschema

            try:
                jsonschema.validate(data, self.spec)
            except jsonschema.ValidationError as exc:
                raise InvalidOutputError(self.name, text, exc.message) from exc
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
