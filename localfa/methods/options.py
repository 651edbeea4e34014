"""The one validator of method options, and the error it raises.

Both the registry (a spec string, keyword arguments) and a method applying a profile's table
(`BaseMethod.for_model`) build options here, so every bad option reads the same way.
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError


class MethodOptionError(ValueError):
    """A method spec that names an unknown method, an unknown option or a bad value."""


def build_options(name: str, options_cls: type, given: dict[str, Any]) -> Any:
    """The one option validator: unknown keys, types and ranges, one message shape for all."""
    known = [f.name for f in fields(options_cls)] if is_dataclass(options_cls) else []
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise MethodOptionError(f"method {name}: unknown option(s) {', '.join(unknown)} (known: {', '.join(known) or 'none'})")
    if not known:
        return options_cls()
    try:
        options: Any = TypeAdapter(options_cls).validate_python(given)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", str(exc))
        ctx_error = (err.get("ctx") or {}).get("error")
        if ctx_error is not None:  # a ValueError raised by the options' own checks
            msg = str(ctx_error)
        prefix = f"option {where}: " if where else ""
        raise MethodOptionError(f"method {name}: {prefix}{msg}") from None
    for f in fields(options_cls):
        problem = sampling_problem(f.name, getattr(options, f.name, None))
        if problem:
            raise MethodOptionError(f"method {name}: option {f.name}: {problem}")
    return options


def sampling_problem(field: str, value: Any) -> str | None:
    """Why a number cannot be this option, or None: no option is NaN or infinite, a temperature
    (any ``*temperature``) is at least 0, a ``top_p`` lies in (0, 1]."""
    if not isinstance(value, float) or isinstance(value, bool):
        return None
    if not math.isfinite(value):
        return f"{value} is not a finite number"
    if field.endswith("temperature") and value < 0:
        return f"a temperature is at least 0, got {value}"
    if field.endswith("top_p") and not 0 < value <= 1:
        return f"top_p lies in (0, 1], got {value}"
    return None
