"""The one validator of method options, and the error it raises.

Both the registry (a spec string, keyword arguments) and a method applying a profile's table
(`BaseMethod.for_model`) build options here, so every bad option reads the same way.
"""

from __future__ import annotations

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
        return TypeAdapter(options_cls).validate_python(given)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", str(exc))
        ctx_error = (err.get("ctx") or {}).get("error")
        if ctx_error is not None:  # a ValueError raised by the options' own checks
            msg = str(ctx_error)
        prefix = f"option {where}: " if where else ""
        raise MethodOptionError(f"method {name}: {prefix}{msg}") from None
