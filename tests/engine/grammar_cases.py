"""The four grammar kinds used by the engine tests (real and scripted)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from localfa.engine.grammar import Grammar
from localfa.engine.types import Request, Sampling


class Verdict(BaseModel):
    score: int = Field(ge=0, le=100)
    label: Literal["fault", "fine", "unsure"]
    note: str = Field(min_length=1, max_length=40)


ARITH = """start: "(" expr ")"
expr: NUMBER ("+" NUMBER)*
NUMBER: /[0-9]{1,3}/
"""

GRAMMARS = [
    Grammar.json(Verdict),
    Grammar.regex(r"step [0-9]{1,2}", name="step_ref"),
    Grammar.choice(["yes", "no", "maybe"], name="yes_no"),
    Grammar.cfg(ARITH, name="arith"),
]

LONG_PREFIX = (
    "You are auditing a multi-agent run. Each step lists an agent and what it did. Judge carefully and answer in the required format. "
) * 40


def mixed_batch(n: int = 8, seed_base: int = 0, prefix: str = "") -> list[Request]:
    reqs = []
    for i in range(n):
        g = GRAMMARS[i % len(GRAMMARS)]
        msgs = []
        if prefix:
            msgs.append({"role": "system", "content": prefix})
        msgs.append({"role": "user", "content": f"Question {i}: is step {i} of the run faulty? Answer briefly."})
        reqs.append(Request(msgs, g, Sampling(temperature=0.8, top_p=0.95, max_tokens=64, seed=seed_base + i), key=f"q{i}"))
    return reqs
