"""SAFARI as a registered method: options in, one lazily built investigation per trace out."""

from __future__ import annotations

from typing import ClassVar

from localfa.methods.base import BaseMethod, MethodContext, Program
from localfa.methods.safari.investigator import METHOD, SafariOptions, investigate


class Safari(BaseMethod):
    """The active investigator (paper: SAFARI). See `investigator` for the loop."""

    name: ClassVar[str] = METHOD
    Options: ClassVar[type] = SafariOptions
    view_path = "localfa.view.paths:safari_path"
    oracle_policy = "localfa.methods.safari.oracle:POLICY"
    oracle_mutants = "localfa.methods.safari.mutants:MUTANTS"
    options: SafariOptions

    def run(self, ctx: MethodContext) -> Program:
        # A generator: the trace is viewed, tokenised and checked only when first advanced.
        return investigate(ctx, self.options)
