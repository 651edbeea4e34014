"""FALAT's options: the knobs the paper leaves open, each with the value we chose, checked once."""

from __future__ import annotations

from dataclasses import dataclass

from localfa.engine.types import Sampling


@dataclass(frozen=True)
class FalatOptions:
    """Settings of one FALAT run (``falat:window=3:pair_cap=10``); all go to the manifest.

    window: steps per window (the paper gives no value; 5 is our default, sweep it).
    step_tokens: cap on one step's raw text in the window prompts (full text returns in stage 3).
    pair_cap: most candidate pairs typed per trace, nearest pairs first; the rest are recorded.
    pair_step_tokens: cap on each step's raw text shown with a pair.
    top_k: candidates verified (the paper's 3).
    with_ground_truth: judge against the trace's correct answer instead of the prior's estimate.
    """

    window: int = 5
    step_tokens: int = 400
    pair_cap: int = 28
    pair_step_tokens: int = 120
    top_k: int = 3
    with_ground_truth: bool = False
    temperature: float = 0.7
    top_p: float = 0.95

    def __post_init__(self) -> None:
        if not 1 <= self.window <= 50:
            raise ValueError("window must be in 1..50")
        if not 16 <= self.step_tokens <= 8192:
            raise ValueError("step_tokens must be in 16..8192")
        if not 1 <= self.pair_cap <= 1000:
            raise ValueError("pair_cap must be in 1..1000")
        if not 16 <= self.pair_step_tokens <= 4096:
            raise ValueError("pair_step_tokens must be in 16..4096")
        if not 1 <= self.top_k <= 10:
            raise ValueError("top_k must be in 1..10")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError("temperature must be in 0..2")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError("top_p must be in (0, 1]")

    def sampling(self, max_tokens: int) -> Sampling:
        return Sampling(temperature=self.temperature, top_p=self.top_p, max_tokens=max_tokens)
