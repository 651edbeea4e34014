"""Registers SAFARI with the method registry."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from localfa.grammars.safari import SafariLimits
from localfa.methods.base import MethodContext, Program
from localfa.methods.registry import register
from localfa.methods.safari.investigator import METHOD, Investigation, SafariOptions


class Safari:
    name = METHOD

    def __init__(self, **options: Any) -> None:
        known = {f.name for f in fields(SafariOptions)}
        unknown = sorted(set(options) - known - {f.name for f in fields(SafariLimits)})
        if unknown:
            raise ValueError(f"safari: unknown option(s) {', '.join(unknown)}")
        limit_opts = {k: options.pop(k) for k in list(options) if k in {f.name for f in fields(SafariLimits)}}
        self.options = SafariOptions(**options)
        if limit_opts:
            self.options.limits = SafariLimits(**limit_opts)

    def run(self, ctx: MethodContext) -> Program:
        return Investigation(ctx, self.options).run()

    def describe(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self.options)


@register(METHOD)
def make(**options: Any) -> Safari:
    return Safari(**options)
