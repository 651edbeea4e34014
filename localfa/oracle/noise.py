"""The oracle's error models: when a call errs, and which wrong step it names when it does.

This module is the one place the error models and their parameters are defined (docs/ceilings.md
describes them in words).

Everything a wrong answer may depend on is read from the request's prompt (`PromptView`): the ids
it shows, where it shows the fault (the id whose text carries the fault's fingerprint; none where
it does not carry it), the agent it shows beside each id, and the labelled agent's name. Never the
label's position: a prompt that hides the fault gives the error model nothing to aim near.

``noise=iid`` (the default, ``oracle:p=0.7``): every call is honest with probability p,
independently of every other call; a wrong step is drawn uniformly among the candidates within 3
steps of where the prompt shows the fault (else of the honest answer), else among all others.

``noise=real`` (``oracle:p=0.7:noise=real``): errors shaped like a real judge's.

- *Correlated within a trace.* Each trace gets one honesty h drawn once from a Beta with mean p and
  concentration `spread` (``spread=4`` by default: h ~ Beta(p·4, (1-p)·4)); every call on that
  trace is honest with probability h. A hard trace fools every call on it more often; the mean
  over traces stays p. h is drawn from (the noise's `seed`, the trace id) only: it is a property
  of the trace for the simulated model, as a real model's difficulty is, so the run seed moves
  which calls err but not how hard the trace is (a run's seeds do not average the difficulty out).
  ``spread=inf`` gives back independent errors with the biased choice below.
- *Harder on longer traces* (optional, ``length=L``, 0 by default): a trace of n steps, longer
  than `REFERENCE_STEPS`, has mean honesty p · (REFERENCE_STEPS / n) ** L instead of p, as a real
  judge's attention thins over a long run. With L = 0 the mean over traces is p; with L > 0, p is
  the honesty on a short run (the calibration fits L to the published gap between Who&When's
  short algorithm-generated and long hand-crafted runs).
- *Biased toward the positions judges favour, and plausible.* A wrong step is drawn among the
  candidates (never the honest answer) with weight `WEIGHTS.base`, times an earliness factor
  (1 + `WEIGHTS.early` · (1 - position), position 0 at the first shown step, 1 at the last), plus
  `WEIGHTS.adjacent` for the steps next to where the prompt shows the fault, `WEIGHTS.adopter` for
  the shown step that adopted it (the first later shown step of another agent),
  `WEIGHTS.same_agent` for the labelled agent's other shown steps, `WEIGHTS.agent_first` for that
  agent's first shown step and `WEIGHTS.last` for the last shown step.

What a fooled call answers is its policy's `wrong` answer, of the same kind as the honest one; a
call that judges several steps at once may name several.

Every draw uses the request's own random source (`_draw` in the engine: request seed, trace,
key), so a run is reproducible and independent of batching.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from typing import Literal, Sequence

from localfa.naming import normalize_agent

NoiseKind = Literal["iid", "real"]
NOISE_KINDS: tuple[str, ...] = ("iid", "real")
DEFAULT_SPREAD = 4.0
REFERENCE_STEPS = 10  # a run this long (or shorter) gets the mean honesty p itself


@dataclass(frozen=True)
class WrongStepWeights:
    """How strongly a wrong answer favours each kind of step (see module doc)."""

    base: float = 1.0
    early: float = 1.0
    adjacent: float = 4.0
    adopter: float = 3.0
    same_agent: float = 1.5
    agent_first: float = 3.0
    last: float = 3.0


WEIGHTS = WrongStepWeights()


@dataclass(frozen=True)
class NoiseModel:
    """Which error model the oracle uses (`kind`), at which mean honesty `p`, with which
    difficulty spread (`spread`: the Beta's concentration, `math.inf` for none), which length
    effect (`length`: 0 for none) and seed."""

    kind: str = "iid"
    p: float = 1.0
    spread: float = DEFAULT_SPREAD
    seed: int = 0
    length: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in NOISE_KINDS:
            raise ValueError(f"noise must be one of {', '.join(NOISE_KINDS)}, got {self.kind!r}")
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p must be in [0, 1], got {self.p}")
        if not self.spread > 0:
            raise ValueError(f"spread must be positive, got {self.spread}")
        if not self.length >= 0:
            raise ValueError(f"length must be at least 0, got {self.length}")

    @property
    def real(self) -> bool:
        return self.kind == "real"

    def mean_honesty(self, n_steps: int) -> float:
        """The mean honesty of a trace of `n_steps` steps (p, lowered on long runs by `length`)."""
        if not self.real or self.length == 0 or n_steps <= REFERENCE_STEPS:
            return self.p
        return self.p * (REFERENCE_STEPS / n_steps) ** self.length

    def honesty(self, trace_id: str, n_steps: int = 0) -> float:
        """The probability that a call on this trace is honest (p itself under iid)."""
        mean = self.mean_honesty(n_steps)
        if not self.real or mean in (0.0, 1.0) or math.isinf(self.spread):
            return mean
        digest = hashlib.sha256(f"difficulty\x1f{self.seed}\x1f{trace_id}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        return rng.betavariate(mean * self.spread, (1.0 - mean) * self.spread)

    def describe(self) -> str:
        if not self.real:
            return "iid"
        spread = "inf" if math.isinf(self.spread) else f"{self.spread:g}"
        length = f",length={self.length:g}" if self.length else ""
        return f"real(spread={spread}{length},seed={self.seed})"


IID = NoiseModel()


@dataclass(frozen=True)
class PromptView:
    """What the error model may know of one request, all read from its prompt: the ids it shows,
    the id it shows the fault at (None: the prompt does not carry it), the agent it shows for each
    id, and the labelled agent's name (the fingerprint's)."""

    shown: tuple[int, ...]
    fault: int | None = None
    agents: dict[int, str] = field(default_factory=dict)
    labelled_agent: str | None = None


def adopter_step(view: PromptView) -> int | None:
    """The shown step that adopted the error: the first shown step after the fault by another agent."""
    if view.fault is None:
        return None
    agent = normalize_agent(view.agents.get(view.fault, ""))
    return next((i for i in sorted(view.shown) if i > view.fault and normalize_agent(view.agents.get(i, "")) != agent), None)


def wrong_step_weights(view: PromptView, pool: Sequence[int], weights: WrongStepWeights = WEIGHTS) -> list[float]:
    """The weight of each step of `pool` as a realistic wrong answer (module doc), from what the
    prompt shows: earliness within the shown ids, the neighbours of and the adopter after the fault
    where the prompt shows it, the labelled agent's shown steps, the last shown step."""
    everything = sorted(set(view.shown) | set(pool))
    lo, hi = (everything[0], everything[-1]) if everything else (0, 0)
    span = max(1, hi - lo)
    who = normalize_agent(view.labelled_agent) if view.labelled_agent else None
    same = [i for i in everything if who is not None and normalize_agent(view.agents.get(i, "")) == who]
    first_of_agent = same[0] if same else None
    adopter = adopter_step(view)
    out = []
    for s in pool:
        w = weights.base * (1.0 + weights.early * (1.0 - (min(max(s, lo), hi) - lo) / span))
        if view.fault is not None and abs(s - view.fault) == 1:
            w += weights.adjacent
        if s == adopter:
            w += weights.adopter
        if s in same:
            w += weights.same_agent
        if s == first_of_agent:
            w += weights.agent_first
        if s == hi:
            w += weights.last
        out.append(w)
    return out


def realistic_wrong_step(view: PromptView, candidates: Sequence[int], rng: random.Random, avoid: int | None = None) -> int:
    """A wrong step among `candidates` (never `avoid`, the honest answer, unless it is the only
    one), drawn with the realistic weights."""
    pool = sorted(c for c in set(candidates) if c != avoid)
    if not pool:
        return avoid if avoid is not None else sorted(candidates)[0]
    return rng.choices(pool, weights=wrong_step_weights(view, pool))[0]


def iid_wrong_step(view: PromptView, candidates: Sequence[int], rng: random.Random, avoid: int | None = None, spread: int = 3) -> int:
    """A wrong step among `candidates` other than `avoid`: within `spread` of where the prompt shows
    the fault (or of `avoid`) where one is, else any other."""
    pool = sorted(c for c in set(candidates) if c != avoid)
    if not pool:
        return avoid if avoid is not None else sorted(candidates)[0]
    centre = view.fault if view.fault is not None else avoid
    near = [c for c in pool if centre is not None and abs(c - centre) <= spread]
    return rng.choice(near or pool)
