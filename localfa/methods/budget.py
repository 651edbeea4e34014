"""Context budgets, as users write them: `none`, `25k` tokens, `100000c` characters, `scale:2`.

`scale:F` is SAFARI's fixed scaling factor: the budget is the token position of the labelled
fault divided by F, so the fault lies F times beyond what fits. `resolve_budget` is the ONE
place a budget string becomes a limit for one trace; SAFARI and the baselines both call it, so
the same label means the same limit everywhere. No floor is applied: a budget too small for a
method is that method's to refuse, with a clear error, never silently raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import regex as re

from localfa.traces.model import Trace

#: Characters per token when a token count must become a character count (or back) and no
#: tokenizer measurement is at hand. Shared by SAFARI and the baselines.
CHARS_PER_TOKEN = 4.0

#: Tokens a chat template adds around each message (role header, end-of-turn marker). A
#: budget counted in tokens charges every message this much on top of its content.
TEMPLATE_TOKENS_PER_MESSAGE = 8

_BUDGET = re.compile(
    r"^(?:(?P<none>none)|scale:(?P<scale>\S+)"
    r"|(?P<num>\d+(?:\.\d+)?)(?P<k>[kKmM]?)(?P<unit>c|chars|t|tokens)?)$"
)


class BudgetError(ValueError):
    """A budget that cannot apply to this trace (no labelled fault to scale from, too small)."""


@dataclass(frozen=True)
class Budget:
    """A budget: `limit` in `unit` ("tokens" or "chars"), or None for no limit.

    `scale` is set for `scale:F`; its `limit` is known only once resolved against a trace.
    """

    unit: str = "tokens"
    limit: int | None = None
    scale: float | None = None

    @property
    def label(self) -> str:
        if self.scale is not None:
            return f"scale:{self.scale:g}"
        if self.limit is None:
            return "none"
        return f"{self.limit}{'c' if self.unit == 'chars' else ''}"

    def describe(self) -> str:
        """The limit in words, for prompts and error messages."""
        if self.limit is None:
            return "no limit"
        return f"{self.limit} {'characters' if self.unit == 'chars' else 'tokens'}"


def parse_budget(text: str | None) -> Budget:
    """Parse a budget string; raise ValueError with the accepted forms on anything else."""
    if text is None or text.strip() == "":
        return Budget()
    m = _BUDGET.match(text.strip())
    if not m:
        raise ValueError(f"budget {text!r}: use none, 25k (tokens), 100000c (characters) or scale:2")
    if m["none"]:
        return Budget()
    if m["scale"] is not None:
        try:
            factor = float(m["scale"])
        except ValueError:
            raise ValueError(f"budget {text!r}: the scaling factor must be a number, e.g. scale:2") from None
        if not factor > 0 or factor == float("inf"):
            raise ValueError(f"budget {text!r}: the scaling factor must be a positive number")
        return Budget(scale=factor)
    mult = {"": 1, "k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}[m["k"] or ""]
    unit = "chars" if (m["unit"] or "").startswith("c") else "tokens"
    limit = int(float(m["num"]) * mult)
    if limit <= 0:
        raise ValueError(f"budget {text!r}: a budget must be at least 1 {unit[:-1]}")
    return Budget(unit=unit, limit=limit)


def resolve_scale(budget: Budget, fault_token_position: int | None) -> Budget:
    """Turn `scale:F` into a token limit for one trace: the fault's token position / F."""
    if budget.scale is None:
        return budget
    if fault_token_position is None:
        raise BudgetError(f"budget {budget.label}: the trace has no labelled fault step to scale from")
    return Budget(unit="tokens", limit=max(1, int(fault_token_position / budget.scale)), scale=budget.scale)


def labelled_fault_step(trace: Trace) -> int | None:
    """The step a `scale:` budget refers to: the labelled mistake, else the earliest fault."""
    labels = trace.labels
    if labels is None:
        return None
    if labels.mistake_step is not None:
        return labels.mistake_step
    return min(labels.fault_steps) if labels.fault_steps else None


def resolve_budget(text: str | Budget | None, trace: Trace, count_tokens: Callable[[str], int] | None = None, view: Any = None) -> Budget:
    """The budget in force for `trace`: parsed, and for `scale:F` resolved on the trace's tokens.

    Token positions are those of the numbered line view (`LineView.token_position_of_step`),
    counted with `count_tokens` (the engine's tokenizer) when given; pass the caller's `view`
    (a `LineView` of the trace) to reuse its token counts. Raises `BudgetError` when a `scale:`
    budget meets a trace without a labelled fault.
    """
    budget = text if isinstance(text, Budget) else parse_budget(text)
    if budget.scale is None:
        return budget
    step = labelled_fault_step(trace)
    if step is None:
        return resolve_scale(budget, None)
    from localfa.traces.lineview import LineView

    if not 0 <= step < len(trace.steps):
        raise BudgetError(f"budget {budget.label}: the labelled fault step {step} is outside the trace")
    view = view if view is not None else LineView(trace, count_tokens=count_tokens)
    return resolve_scale(budget, view.token_position_of_step(step))


def measured_chars_per_token(text: str, count_tokens: Callable[[str], int] | None, sample_chars: int = 20000) -> float:
    """Characters per token of `text` under the engine's tokenizer (CHARS_PER_TOKEN without one)."""
    sample = text[:sample_chars]
    if count_tokens is None or not sample.strip():
        return CHARS_PER_TOKEN
    try:
        n = int(count_tokens(sample))
    except Exception:  # a tokenizer hiccup must not end the run: use the usual ratio
        return CHARS_PER_TOKEN
    return max(1.0, len(sample) / max(1, n))


def limit_in_chars(budget: Budget, chars_per_token: float = CHARS_PER_TOKEN) -> int | None:
    """The budget's limit as characters (tokens converted at `chars_per_token`)."""
    if budget.limit is None:
        return None
    return budget.limit if budget.unit == "chars" else int(budget.limit * chars_per_token)
