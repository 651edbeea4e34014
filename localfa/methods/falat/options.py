"""FALAT's options: the knobs the paper leaves open, each with the value we chose, checked once.

Defaults are the paper's where it gives one (top 3, t̂ ± 2) and otherwise sized for a strong
open-weight model with a 32k-token window; the embedded 135M model's small values live in its
profile (serving/profiles/cpu-embedded.toml, `[methods.falat]`), never here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from localfa.engine.types import Sampling
from localfa.grammars.falat import FalatLimits

ASSUMED_WINDOW_TOKENS = 32768  # a strong model's window, used (and warned about) when none is known


@dataclass(frozen=True)
class FalatOptions(FalatLimits):
    """Settings of one FALAT run (``falat:window=3:pair_quota=4``); all go to the manifest.

    window: steps per window (the paper gives no value; 5 is ours, sweep it).
    step_tokens: cap on one step's raw text in the window prompts (full text returns in stage 3).
    pair_quota: the later candidates each candidate's links are typed to (its reach); follow_up
        chains are traced transitively, so a short reach still finds a long chain's source.
    group_size: candidates per links / rating request; a group's prompt shows its members' text
        and the next `pair_quota` candidates' (one shared prefix, so cost stays linear).
    pair_step_tokens: cap on a candidate's raw text where it is shown only as the target of an
        earlier group's links.
    rank_step_tokens: cap on a candidate's raw text in its own group's view (its links and its
        rating read it); pair_step_tokens caps it where it is only a later group's lookahead.
    task_chars, output_chars, agent_prompt_chars: what the prior shows of the task, the wrong
        output (and the correct one with ground truth), each agent's system prompt.
    top_k: candidates verified (the paper's 3).
    context_tokens: the model's window; none: what the engine reports (32,768 assumed, and the
        record warns, when it reports none).
    with_ground_truth: judge against the trace's correct answer instead of the prior's estimate.
    temperature: the prior (a free-form plan); judge_temperature: every call that decides which
        steps stay in the search (stage and step summaries, links, ratings, verdicts, re-search),
        kept near-greedy as DRIFT's checks (a passive or unflagged step is a judgement).
    The text bounds the model writes (plan_chars ... argument_chars) are FalatLimits' fields.
    """

    window: int = 5
    step_tokens: int = 2048
    pair_quota: int = 3
    group_size: int = 12
    pair_step_tokens: int = 1024
    rank_step_tokens: int = 2048
    task_chars: int = 8000
    output_chars: int = 4000
    agent_prompt_chars: int = 2000
    top_k: int = 3
    context_tokens: int | None = None
    with_ground_truth: bool = False
    temperature: float = 0.7
    judge_temperature: float = 0.2
    top_p: float = 0.95

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.window <= 50:
            raise ValueError("window must be in 1..50")
        for name in ("step_tokens", "pair_step_tokens", "rank_step_tokens"):
            if not 16 <= getattr(self, name) <= 32768:
                raise ValueError(f"{name} must be in 16..32768")
        for name in ("task_chars", "output_chars", "agent_prompt_chars"):
            if not 100 <= getattr(self, name) <= 200_000:
                raise ValueError(f"{name} must be in 100..200000")
        if not 1 <= self.pair_quota <= 50:
            raise ValueError("pair_quota must be in 1..50")
        if not 1 <= self.group_size <= 64:
            raise ValueError("group_size must be in 1..64")
        if not 1 <= self.top_k <= 10:
            raise ValueError("top_k must be in 1..10")
        if self.context_tokens is not None and self.context_tokens < 1024:
            raise ValueError("context_tokens must be at least 1024 (or none: the engine's)")
        for name in ("temperature", "judge_temperature"):
            if not 0.0 <= getattr(self, name) <= 2.0:
                raise ValueError(f"{name} must be in 0..2")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError("top_p must be in (0, 1]")

    @property
    def limits(self) -> FalatLimits:
        return FalatLimits(**{f.name: getattr(self, f.name) for f in fields(FalatLimits)})

    def sampling(self, max_tokens: int, judge: bool = False) -> Sampling:
        t = self.judge_temperature if judge else self.temperature
        return Sampling(temperature=t, top_p=self.top_p, max_tokens=max_tokens)
