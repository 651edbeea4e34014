"""DRIFT's options: every knob, checked once, recorded in the run manifest.

Defaults are the authors' (NJU-LINK/DRIFT, issue 51) for a strong model on a 32k window: a few
decision-critical claims a chunk (`claims_per_chunk` 5, the grammar's), 8 claims to a support or
tracer call (`claims_per_call`; every committed claim is checked, up to `max_checked_claims`), the
joint tracer, temperature 0.1 at every stage (the strong-model profiles take these). Our earlier
defaults stay reachable by options (`AS_BEFORE`, docs/methods/drift.md); the embedded model's
small values come from its profile (serving/profiles/cpu-embedded.toml, ``[methods.drift]``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal, get_args

from localfa.engine.types import Sampling
from localfa.grammars.drift import DriftLimits

Tracer = Literal["per-claim", "ledger", "joint"]
TRACERS: tuple[str, ...] = get_args(Tracer)
Support = Literal["ledger", "per-claim"]
SUPPORTS: tuple[str, ...] = get_args(Support)
SamplingStage = Literal["keeper", "check", "tracer"]
# Our defaults before issue 51, as options (``drift:<AS_BEFORE>``): 20 claims a chunk, 32 checked,
# one support and one tracer request per claim, temperature 0.2 (the run text those requests showed
# is gone: evidence packets replaced it, docs/methods/drift.md).
AS_BEFORE = (
    "claims_per_chunk=20:max_checked_claims=32:claims_per_call=32:tracer=per-claim:support=per-claim:keeper_guidance=false:keeper_reask=false:early_marks=false"
    ":keeper_temperature=0.2:tracer_temperature=0.2:check_temperature=0.2"
)


@dataclass(frozen=True)
class DriftOptions(DriftLimits):
    """Spans, chunking, how many claims are checked, how the tracer asks, output bounds, sampling.

    `max_checked_claims`: committed claims the support checks judge (the riskiest first);
    `claims_per_call`: claims one support call or one joint (or ledger) tracer call judges, the
    authors' at most 8 (a run read in many chunks records more: they go out in several calls,
    all in one batch, none left unjudged). `packet_tokens`: the token budget of one claim's evidence packet (`packets`: its own spans
    whole, then the passages of other steps that mention its terms), counted by the engine's
    tokenizer; the support checks read packets only, the tracer the whole run where it fits the
    window, else packets. `claim_spans_whole`: the spans that introduce and commit a claim are
    shown uncut in its packet (the authors' own spans uncut), in the rest of the window's share of
    each claim beside `packet_tokens` (cut head and tail only where that share cannot hold them,
    recorded as `claim_spans_cut`); false: they share `packet_tokens` with its uses and passages. `support`: ``ledger`` (the authors': one call over every checked claim)
    or ``per-claim`` (one call each, all in one batch). `confirm`: one more call on the chosen
    first error (is it the earliest harmful span of the run?) before it is answered, where the
    tracer's first error is not the span the ledger says introduced its claim
    (`confirm_when=disagree`) or always; off by default: on the oracle it lost more answers under
    errors than it mended (docs/methods/drift.md). `early_marks`:
    the tracer may mark a span before the one the ledger says introduced a claim (where the run
    shows it made earlier). `keeper_guidance`: the keeper prompt asks for the authors' few decision-critical claims
    ("prefer 3-5") and says a search or tool call is not a commitment. `chunk_tokens` None: as many tokens of run text per ledger chunk as the window holds next to
    the ledger so far, the instructions and the answer; `chunk_max_spans` None: no cap on spans
    per chunk (a chunk is sized by tokens alone). `order_retries`: how many times a ledger answer
    whose spans break introduced <= consequential <= use is asked again before it is repaired.
    `tracer` (the modes measured side by side: docs/methods/drift.md): ``joint`` (the authors'
    tracer, the default: one request over every checked claim, DIRECT ones too, with the explicit
    first-error rule; it traces even when no claim is risky), ``per-claim`` (one request per risky
    claim, all in one batch) or ``ledger`` (one request over every risky claim). `late_endpoints`: the authors'
    completion of the prediction: every committed claim's consequential span and last use join
    the predicted spans (after the first error span; all of them when none was found), so the
    span set is never empty where the run committed to a claim; the answered step is unchanged. The ledger
    decides everything downstream, so the keeper and the tracer sample at their own, low,
    temperatures; `check_temperature` serves segmentation and the support checks.
    """

    segment: bool = False
    keeper_guidance: bool = True
    keeper_reask: bool = True
    chunk_tokens: int | None = None
    chunk_max_spans: int | None = None
    segment_max_steps: int = 40
    max_checked_claims: int = 128
    claims_per_call: int = 8
    packet_tokens: int = 1000
    claim_spans_whole: bool = True
    support: Support = "ledger"
    confirm: bool = False
    confirm_when: Literal["always", "disagree"] = "disagree"
    early_marks: bool = True
    order_retries: int = 1
    tracer: Tracer = "joint"
    verify_evidence: bool = True
    late_endpoints: bool = True
    keeper_temperature: float = 0.1
    tracer_temperature: float = 0.1
    check_temperature: float = 0.1
    top_p: float = 0.95

    def __post_init__(self) -> None:
        super().__post_init__()  # the output bounds (DriftLimits' fields, settable as drift:claim_chars=...)
        if self.chunk_tokens is not None and self.chunk_tokens < 256:
            raise ValueError("chunk_tokens must be at least 256 (or none: fit the window)")
        if self.chunk_max_spans is not None and self.chunk_max_spans < 1:
            raise ValueError("chunk_max_spans must be at least 1 (or none: no cap)")
        if not 2 <= self.segment_max_steps <= 200:
            raise ValueError("segment_max_steps must be in 2..200")
        if not 1 <= self.max_checked_claims <= 128:
            raise ValueError("max_checked_claims must be in 1..128")
        if not 1 <= self.claims_per_call <= 128:
            raise ValueError("claims_per_call must be in 1..128")
        if not 200 <= self.packet_tokens <= 16000:
            raise ValueError("packet_tokens must be in 200..16000")
        if self.confirm_when not in ("always", "disagree"):
            raise ValueError("confirm_when must be always or disagree")
        if self.support not in SUPPORTS:
            raise ValueError(f"support must be one of {', '.join(SUPPORTS)}")
        if not 0 <= self.order_retries <= 3:
            raise ValueError("order_retries must be in 0..3")
        if self.tracer not in TRACERS:
            raise ValueError(f"tracer must be one of {', '.join(TRACERS)}")
        for name in ("keeper_temperature", "tracer_temperature", "check_temperature"):
            if not 0 <= getattr(self, name) <= 2:
                raise ValueError(f"{name} must be in 0..2")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")

    @property
    def limits(self) -> DriftLimits:
        return DriftLimits(**{f.name: getattr(self, f.name) for f in fields(DriftLimits)})

    def sampling(self, max_tokens: int, stage: SamplingStage) -> Sampling:
        t = {"keeper": self.keeper_temperature, "tracer": self.tracer_temperature, "check": self.check_temperature}[stage]
        return Sampling(temperature=t, top_p=self.top_p, max_tokens=max_tokens)
