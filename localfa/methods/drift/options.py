"""DRIFT's options: every knob, checked once, recorded in the run manifest."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from localfa.engine.types import Sampling
from localfa.grammars.drift import DriftLimits

TRACERS = ("per-claim", "ledger")


@dataclass(frozen=True)
class DriftOptions(DriftLimits):
    """Spans, chunking, how many claims are checked, how the tracer asks, output bounds, sampling.

    `chunk_tokens` None: as many tokens of run text per ledger chunk as the window holds next to
    the ledger, the instructions and the answer. `tracer`: ``per-claim`` (one request per risky
    claim, all in one batch) or ``ledger`` (one request over every risky claim).
    """

    segment: bool = False
    chunk_tokens: int | None = None
    chunk_max_spans: int = 12
    segment_max_steps: int = 40
    ledger_shown: int = 12
    max_checked_claims: int = 12
    tracer: Literal["per-claim", "ledger"] = "per-claim"
    verify_evidence: bool = True
    temperature: float = 0.7
    top_p: float = 0.95
    check_temperature: float = 0.2

    def __post_init__(self) -> None:
        super().__post_init__()  # the output bounds (DriftLimits' fields, settable as drift:claim_chars=...)
        if self.chunk_tokens is not None and self.chunk_tokens < 256:
            raise ValueError("chunk_tokens must be at least 256 (or none: fit the window)")
        if not 1 <= self.chunk_max_spans <= 40:
            raise ValueError("chunk_max_spans must be in 1..40 (the ledger grammar grows with its square)")
        if not 2 <= self.segment_max_steps <= 200:
            raise ValueError("segment_max_steps must be in 2..200")
        if not 0 <= self.ledger_shown <= 64:
            raise ValueError("ledger_shown must be in 0..64")
        if not 1 <= self.max_checked_claims <= 64:
            raise ValueError("max_checked_claims must be in 1..64")
        if self.tracer not in TRACERS:
            raise ValueError(f"tracer must be one of {', '.join(TRACERS)}")
        for name in ("temperature", "check_temperature"):
            if not 0 <= getattr(self, name) <= 2:
                raise ValueError(f"{name} must be in 0..2")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")

    @property
    def limits(self) -> DriftLimits:
        return DriftLimits(**{f.name: getattr(self, f.name) for f in fields(DriftLimits)})

    def sampling(self, max_tokens: int, check: bool = False) -> Sampling:
        t = self.check_temperature if check else self.temperature
        return Sampling(temperature=t, top_p=self.top_p, max_tokens=max_tokens)
