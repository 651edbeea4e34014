"""SAFARI as a registered method: options in, one investigation program per trace out."""

from __future__ import annotations

from localfa.methods.base import BaseMethod, MethodContext, Program
from localfa.methods.safari.investigator import METHOD, Investigation, SafariOptions


class Safari(BaseMethod):
    name = METHOD
    Options = SafariOptions

    def run(self, ctx: MethodContext) -> Program:
        return Investigation(ctx, self.options).run()
