"""DRIFT as a registered method: `localfa diagnose --method drift`, `localfa bench --methods drift`."""

from __future__ import annotations

from typing import ClassVar

from localfa.methods.base import BaseMethod, MethodContext, Program
from localfa.methods.drift.audit import METHOD, Audit
from localfa.methods.drift.options import DriftOptions


class Drift(BaseMethod):
    """Claim Keeper -> Support Seeker -> Dependency Tracer over spans; answers spans, step and agent."""

    name: ClassVar[str] = METHOD
    Options: ClassVar[type] = DriftOptions
    view_path = "localfa.view.paths:drift_path"
    oracle_policy = "localfa.methods.drift.oracle:POLICY"
    oracle_mutants = "localfa.methods.drift.mutants:MUTANTS"

    def run(self, ctx: MethodContext) -> Program:
        return Audit(ctx, self.options).run()
