"""Context budgets, as users write them: `none`, `25k` tokens, `100000c` characters, `scale:2`.

`scale:F` is SAFARI's fixed scaling factor: the budget is the token position of the labelled
fault divided by F, so the fault lies F times beyond what fits.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex as re

_BUDGET = re.compile(r"^(?:(?P<none>none)|scale:(?P<scale>\d+(?:\.\d+)?)|(?P<num>\d+(?:\.\d+)?)(?P<k>[kKmM]?)(?P<unit>c|chars|t|tokens)?)$")


@dataclass(frozen=True)
class Budget:
    """A resolved budget: `limit` in `unit` ("tokens" or "chars"), or None for no limit."""

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


def parse_budget(text: str | None) -> Budget:
    """Parse a budget string; raise ValueError with the accepted forms on anything else."""
    if text is None or text == "":
        return Budget()
    m = _BUDGET.match(text.strip())
    if not m:
        raise ValueError(f"budget {text!r}: use none, 25k (tokens), 100000c (characters) or scale:2")
    if m["none"]:
        return Budget()
    if m["scale"]:
        factor = float(m["scale"])
        if factor <= 0:
            raise ValueError(f"budget {text!r}: the scaling factor must be positive")
        return Budget(scale=factor)
    mult = {"": 1, "k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}[m["k"] or ""]
    unit = "chars" if (m["unit"] or "").startswith("c") else "tokens"
    return Budget(unit=unit, limit=int(float(m["num"]) * mult))


def resolve_scale(budget: Budget, fault_token_position: int | None, floor: int = 512) -> Budget:
    """Turn `scale:F` into a token limit for one trace (needs the labelled fault's position)."""
    if budget.scale is None:
        return budget
    if fault_token_position is None:
        raise ValueError("a scale:F budget needs a labelled fault step in the trace")
    return Budget(unit="tokens", limit=max(floor, int(fault_token_position / budget.scale)), scale=budget.scale)
