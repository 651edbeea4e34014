"""The answer localfa gives for one trace, whatever method produced it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class Diagnosis(BaseModel):
    """Decisive faulty step, responsible agent, evidence and reasoning, plus what it cost."""

    trace: str
    source: str = ""
    subset: str | None = None
    method: str
    seed: int
    budget: str | None = None
    step: int | None = None
    agent: str | None = None
    # The method answered that the run shows no decisive error (where the caller allows it:
    # `localfa.methods.none_answer`); step and agent are then None.
    no_error: bool = False
    reasoning: str = ""
    evidence: list[str] = Field(default_factory=list)
    spans: list[tuple[int, int]] | None = None  # span-level methods: inclusive step ranges
    # How far to trust the answer, 0..1: an ensemble's agreement share; None for a method that
    # has no measure of its own.
    confidence: float | None = None
    stop_reason: str = "submitted"
    usage: dict[str, int] = Field(default_factory=lambda: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0})
    wall_s: float = 0.0
    details: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    # "transient" (the engine was unavailable: a re-run may succeed) or "final"; set from the
    # exception itself by the runner, so sweeps know what to retry on resume; "unreadable": the
    # trace file could not be read (`localfa.results.ResultRecord.unreadable`).
    error_kind: Literal["transient", "final", "unreadable"] | None = None
    transcript: list[dict[str, Any]] | None = None

    def record(self, with_transcript: bool = False) -> dict[str, Any]:
        """The JSON line written for this diagnosis."""
        exclude = None if with_transcript else {"transcript"}
        return self.model_dump(mode="json", exclude=exclude)
