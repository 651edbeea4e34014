"""Method names -> method factories. A new method registers here and every command can use it."""

from __future__ import annotations

from typing import Any, Callable

from localfa.methods.base import Method

_FACTORIES: dict[str, Callable[..., Method]] = {}


def register(name: str) -> Callable[[Callable[..., Method]], Callable[..., Method]]:
    def deco(factory: Callable[..., Method]) -> Callable[..., Method]:
        _FACTORIES[name] = factory
        return factory

    return deco


def _load_builtin() -> None:
    # Importing a method module registers it.
    from localfa.methods import baselines  # noqa: F401
    from localfa.methods.safari import method  # noqa: F401


def method_names() -> list[str]:
    _load_builtin()
    return sorted(_FACTORIES)


def get_method(name: str, **options: Any) -> Method:
    """A configured method; unknown names get an error that lists the known ones."""
    _load_builtin()
    if name not in _FACTORIES:
        raise KeyError(f"unknown method {name!r} (known: {', '.join(sorted(_FACTORIES))})")
    return _FACTORIES[name](**options)
