"""The oracle's error models: when a call errs, and which wrong step it names when it does.

This module is the one place the error models and their parameters are defined (docs/ceilings.md
describes them in words).

``noise=iid`` (the default, ``oracle:p=0.7``): every call is honest with probability p,
independently of every other call; a wrong step is drawn uniformly among the candidates within 3
steps of the labelled one (`policy.nearby_other`).

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
  candidates (never the labelled step) with weight `WEIGHTS.base`, times an earliness factor
  (1 + `WEIGHTS.early` · (1 - position), position 0 at the first step, 1 at the last), plus
  `WEIGHTS.adjacent` for the steps next to the labelled one, `WEIGHTS.adopter` for the step that
  adopted the error (the first later step of another agent), `WEIGHTS.same_agent` for the
  labelled agent's other steps, `WEIGHTS.agent_first` for that agent's first step and
  `WEIGHTS.last` for the trace's last step.

What a fooled call answers is its policy's `wrong` answer, of the same kind as the honest one; a
call that judges several steps at once may name several (FALAT's fooled windows and ratings take
the steps that show the error for its source: `localfa.methods.falat.oracle._symptoms`).

Every draw uses the request's own random source (`_draw` in the engine: request seed, trace,
key), so a run is reproducible and independent of batching.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from typing import Literal, Sequence

from localfa.traces.model import Trace, normalize_agent

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


def adopter_step(trace: Trace, mistake: int) -> int | None:
    """The step that adopted the error: the first step after `mistake` by another agent."""
    agent = normalize_agent(trace.agent_at(mistake))
    for i in range(mistake + 1, len(trace.steps)):
        if normalize_agent(trace.agent_at(i)) != agent:
            return i
    return None


def wrong_step_weights(trace: Trace, mistake: int, pool: Sequence[int], weights: WrongStepWeights = WEIGHTS) -> list[float]:
    """The weight of each step of `pool` as a realistic wrong answer (module doc)."""
    n = max(1, len(trace.steps) - 1)
    agent = normalize_agent(trace.agent_at(mistake)) if 0 <= mistake < len(trace.steps) else None
    same = [i for i in range(len(trace.steps)) if agent is not None and normalize_agent(trace.agent_at(i)) == agent]
    first_of_agent = same[0] if same else None
    adopter = adopter_step(trace, mistake) if agent is not None else None
    last = len(trace.steps) - 1
    out = []
    for s in pool:
        w = weights.base * (1.0 + weights.early * (1.0 - min(max(s, 0), n) / n))
        if abs(s - mistake) == 1:
            w += weights.adjacent
        if s == adopter:
            w += weights.adopter
        if s in same:
            w += weights.same_agent
        if s == first_of_agent:
            w += weights.agent_first
        if s == last:
            w += weights.last
        out.append(w)
    return out


def realistic_wrong_step(trace: Trace, mistake: int, candidates: Sequence[int], rng: random.Random) -> int:
    """A wrong step among `candidates` (not `mistake` unless it is the only one), drawn with the
    realistic weights."""
    pool = sorted(c for c in set(candidates) if c != mistake)
    if not pool:
        return mistake
    return rng.choices(pool, weights=wrong_step_weights(trace, mistake, pool))[0]
