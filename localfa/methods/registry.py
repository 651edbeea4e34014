"""The one list of methods, and the one way to configure them.

A method is named by a spec string, the same everywhere (``diagnose --method``, ``bench
--methods``, the Python API): ``NAME`` or ``NAME:key=value:key=value``, e.g. ``safari:max_turns=20``
or ``all-at-once:with_ground_truth=true``. Its canonical form (options sorted) is the method's
label in records. Modules load lazily, on first use, so listing methods imports nothing heavy.

Adding a method: write a module with a `BaseMethod` subclass (see `localfa.methods.base`), add
one line to `METHODS` below, and it works in every command.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Sequence

from localfa.methods.base import BaseMethod
from localfa.methods.options import MethodOptionError, build_options
from localfa.values import number_or_text

METHODS: dict[str, str] = {
    "safari": "localfa.methods.safari.method:Safari",
    "falat": "localfa.methods.falat.method:Falat",
    "drift": "localfa.methods.drift.method:Drift",
    "all-at-once": "localfa.methods.baselines:AllAtOnce",
    "step-by-step": "localfa.methods.baselines:StepByStep",
    "binary-search": "localfa.methods.baselines:BinarySearch",
    "random": "localfa.methods.baselines:RandomFloor",
    "heuristic": "localfa.methods.baselines:HeuristicFloor",
    "prism": "localfa.methods.prism.method:Prism",
    "vote": "localfa.methods.ensemble.vote:Vote",
    "cascade": "localfa.methods.ensemble.cascade:Cascade",
}

DEFAULT_METHOD = "safari"

SPEC_HELP = (
    "NAME or NAME:key=value:key=value, e.g. safari:max_turns=20 or all-at-once:with_ground_truth=true "
    "(the paper's 'with G'). Methods: " + ", ".join(sorted(METHODS))
)


def _option_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null"):
        return None
    return number_or_text(text)


def _fmt_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)


@dataclass(frozen=True)
class MethodSpec:
    """A registered method name and its options; `label` is the canonical text form."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        return ":".join([self.name, *(f"{k}={_fmt_value(v)}" for k, v in self.options)])

    @property
    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)

    @classmethod
    def of(cls, name: str, **options: Any) -> "MethodSpec":
        return cls(name, tuple(sorted((k.replace("-", "_"), v) for k, v in options.items())))

    @classmethod
    def parse(cls, text: str) -> "MethodSpec":
        parts = [p.strip() for p in text.strip().split(":")]
        name = parts[0]
        if not name:
            raise MethodOptionError(f"method {text!r}: empty name")
        opts: dict[str, Any] = {}
        for part in parts[1:]:
            if "=" not in part:
                raise MethodOptionError(f"method {text!r}: option {part!r} is not key=value")
            k, v = part.split("=", 1)
            if not k.strip():
                raise MethodOptionError(f"method {text!r}: option {part!r} has no key")
            opts[k.strip()] = _option_value(v.strip())
        return cls.of(name, **opts)


def parse_methods(text: str) -> list[MethodSpec]:
    """A comma-separated list of specs, each given once."""
    specs = [MethodSpec.parse(p) for p in text.split(",") if p.strip()]
    if not specs:
        raise MethodOptionError("no methods given")
    labels = [s.label for s in specs]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise MethodOptionError(f"method(s) given twice: {', '.join(dup)}")
    return specs


def method_names() -> list[str]:
    return sorted(METHODS)


def method_class(name: str) -> type[BaseMethod]:
    """The class registered under `name`, imported on first use."""
    target = METHODS.get(name)
    if target is None:
        raise MethodOptionError(f"unknown method {name!r} (known: {', '.join(method_names())})")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


# Options every method takes, beside its own: whether it may answer "no decisive error"
# (`localfa.methods.none_answer`; unset: only on a run its harness marked passed and nobody labelled).
SHARED_OPTIONS = ("allow_none",)


def method_option_names(name: str) -> list[str]:
    """The option names `name` accepts (its own, then `SHARED_OPTIONS`)."""
    options_cls = method_class(name).Options
    own = [f.name for f in fields(options_cls)] if is_dataclass(options_cls) else []
    return own + [o for o in SHARED_OPTIONS if o not in own]


def only_scoring(specs: Sequence[str | MethodSpec]) -> bool:
    """Build every spec (a bad one raises `MethodOptionError` before an engine starts, which takes
    minutes) and say whether all of them only score prompts (prism): the default local backend
    is then transformers."""
    return all([get_method(spec).scores_prompts for spec in specs])  # a list: every spec is built


def get_method(spec: str | MethodSpec, **options: Any) -> BaseMethod:
    """A configured method from a spec string or `MethodSpec`; keyword options override."""
    parsed = MethodSpec.parse(spec) if isinstance(spec, str) else spec
    merged = {**parsed.options_dict, **{k.replace("-", "_"): v for k, v in options.items()}}
    allow_none = merged.pop("allow_none", None)
    if allow_none is not None and not isinstance(allow_none, bool):
        raise MethodOptionError(f"method {parsed.name}: option allow_none: must be true or false, got {allow_none!r}")
    cls = method_class(parsed.name)
    return cls(build_options(parsed.name, cls.Options, merged), given=merged, allow_none=allow_none)
