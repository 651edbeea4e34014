"""What SAFARI's prompt may hold: the user's budget (within the window), else the window, else none.

The cap is in the unit the prompt is measured in (`meter.PromptMeter`): tokens of the model's
tokenizer, or characters when the budget is written in characters or the engine cannot count
tokens (then a token budget is applied as characters and the record carries a warning).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from localfa.methods.base import MethodContext
from localfa.methods.budget import CHARS_PER_TOKEN, Budget, BudgetError, measured_chars_per_token, resolve_budget
from localfa.methods.safari.meter import PromptMeter, meter_for, token_unit
from localfa.traces.lineview import LineView


@dataclass(frozen=True)
class ContextPlan:
    """What the prompt may hold: `mode` none (no cap), window (the model's own) or budget."""

    mode: str
    unit: str = "tokens"
    cap: int | None = None
    budget: Budget = field(default_factory=Budget)
    window: int | None = None  # the model's window in `unit`, where it has one (a cap never passes it)

    @property
    def label(self) -> str:
        return self.budget.label if self.mode == "budget" else self.mode

    def describe(self) -> str | None:
        if self.cap is None:
            return None
        return f"{self.cap} {'characters' if self.unit == 'chars' else 'tokens'}"


def plan_context(ctx: MethodContext, view: LineView, turn_max_tokens: int) -> tuple[ContextPlan, PromptMeter]:
    """The cap in force for this trace and the meter that measures prompts against it."""
    exact = token_unit(ctx) == "tokens"
    warnings: list[str] = []
    budget = resolve_budget(ctx.budget, ctx.trace, ctx.count_tokens, view=view)
    window = None
    if ctx.max_model_len:
        window = ctx.max_model_len - 2 * turn_max_tokens - 64
        if window < 1:
            raise BudgetError(
                f"the model's window ({ctx.max_model_len} tokens) leaves no room for a "
                f"prompt next to SAFARI's turn ({turn_max_tokens} tokens, twice for the retry)"
            )

    def chars_per_token() -> float:
        # This trace's ratio where the tokenizer can tell (a character cap must respect the window).
        return measured_chars_per_token(view.text(), ctx.count_tokens) if exact else CHARS_PER_TOKEN

    def as_chars(tokens: int, what: str) -> int:
        chars = int(tokens * CHARS_PER_TOKEN)
        warnings.append(
            f"the engine cannot count tokens with the model's tokenizer: {what} of {tokens} tokens applied as "
            f"{chars} characters ({CHARS_PER_TOKEN:g} per token)"
        )
        return chars

    if budget.limit is not None:
        unit, cap = budget.unit, budget.limit
        if unit == "tokens" and not exact:
            unit, cap = "chars", as_chars(cap, f"budget {budget.label}")
        window_cap = None if window is None else (window if unit == "tokens" else int(window * chars_per_token()))
        if window_cap is not None:
            cap = min(cap, window_cap)
        plan = ContextPlan("budget", unit, cap, budget, window_cap)
    elif window is not None:
        plan = (
            ContextPlan("window", "tokens", window, budget, window)
            if exact
            else ContextPlan("window", "chars", (chars := as_chars(window, "the window")), budget, chars)
        )
    else:
        plan = ContextPlan("none", "tokens" if exact else "chars", None, budget)
    meter = meter_for(ctx, plan.unit)
    meter.warnings.extend(warnings)
    return plan, meter
