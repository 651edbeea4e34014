"""`prism`: who broke the run and when, from a small model's prefill signals; nothing is decoded.

The nearest design the note on MASPrism (arXiv 2605.07509; `../shared/papers/masprism-note.md`,
secondary sources) supports, in two score requests (`localfa.engine.scoring`):

1. Pass 1 scores the run with every step cut to `step_tokens` (windows of `window_tokens` that
   overlap by `overlap` steps when the run is longer). Per step: mean token NLL, and the
   attention of the last `layers` layers between steps. Symptoms: the top `symptom_share` of
   steps by NLL, those holding failure words first; candidates: the `candidates` earlier action
   steps the symptoms attend to most.
2. Pass 2 scores a focused prompt: symptoms and candidates restored (up to `full_tokens`), every
   other step cut to `rest_tokens`, a cue before the earliest symptom. Symptoms are re-picked, and
   candidates ranked by attention from later symptoms weighted by the NLL drop, times
   (1 + 0.3 x the symptoms whose top attended steps include it) (`localfa.methods.prism.signals`).

The answer is the top candidate, the agent acting there, a confidence equal to the score margin
((best - second) / best), and the symptom steps and attention that pointed back as evidence.
Where the engine returns no attention (vLLM), or `layers=0`, the NLL-only variant runs:
candidates are the top action steps by pass-1 NLL (failure words first), ranked by their pass-2
NLL (+30% with failure words). No label is read.

Departures from the note: windows over long runs (the paper only truncates); the failure-word
list is ours (the paper's is unpublished); a step's failure words are read from its whole text;
symptoms may be observation steps but answers only action steps; when no symptom follows any
candidate, pass 1's attention sum H_k ranks them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from localfa.engine.scoring import score_grammar, segment_nll
from localfa.engine.types import Request, Response, Sampling, Score
from localfa.limits import Limits, LimitsHit, shorten
from localfa.methods.base import BaseMethod, Calls, MethodContext, Program
from localfa.methods.baselines import answer_steps, step_text
from localfa.methods.names import agent_names
from localfa.methods.prism.render import SYSTEM, TASK_TOKENS, Shown, cut, render, token_counts, windows
from localfa.methods.prism.signals import Matrix, Ranked, candidates, has_failure_words, rank, rank_by_nll, symptoms

HEADER_TOKENS = 14  # a step's header and fence lines
PROMPT_TOKENS = 120  # the system note and the chat template


@dataclass(frozen=True)
class PrismOptions:
    """Budgets (tokens) and shares of the two passes; defaults follow the note where it gives them."""

    step_tokens: int = 96  # pass 1: every step cut to this
    full_tokens: int = 512  # pass 2: symptoms and candidates restored up to this
    rest_tokens: int = 16  # pass 2: every other step
    symptom_share: float = 0.2  # Who&When: the top 20% of steps by NLL
    candidates: int = 5  # K: earlier steps kept, and each symptom's top attended steps
    layers: int = 6  # the last layers whose attention is read (0: the NLL-only variant)
    window_tokens: int = 4096  # the most tokens one prompt holds (also within the engine's window)
    overlap: int = 4  # steps two consecutive windows share
    chunk: int = 128  # query rows per attention chunk (memory bound)

    def __post_init__(self) -> None:
        if min(self.step_tokens, self.full_tokens, self.rest_tokens, self.candidates, self.chunk) < 1:
            raise ValueError("step_tokens, full_tokens, rest_tokens, candidates and chunk must be at least 1")
        if not 0 < self.symptom_share <= 1:
            raise ValueError("symptom_share must lie in (0, 1]")
        if self.layers < 0 or self.overlap < 0:
            raise ValueError("layers and overlap must be at least 0")
        if self.window_tokens < 512:
            raise ValueError("window_tokens must be at least 512")


@dataclass
class Signals:
    """Per-step NLL and step-to-step attention over the whole run (None: no attention)."""

    nll: list[float | None]
    att: Matrix | None


class Prism(BaseMethod):
    name: ClassVar[str] = "prism"
    scores_prompts: ClassVar[bool] = True
    Options: ClassVar[type] = PrismOptions
    options: PrismOptions

    def run(self, ctx: MethodContext) -> Program:
        o = self.options
        trace = ctx.trace
        hit = LimitsHit(Limits.from_env())
        n = hit.steps(len(trace.steps))
        texts = [hit.step_text(i, step_text(s).strip()) for i, s in enumerate(trace.steps[:n])]
        ntok = token_counts(ctx.count_tokens_many, texts)
        failing = [has_failure_words(t) for t in texts]
        allowed = set(answer_steps(trace, n))
        task = shorten((trace.task or "").strip(), 4 * TASK_TOKENS)
        window = min(o.window_tokens, int(0.95 * ctx.max_model_len)) if ctx.max_model_len else o.window_tokens
        room = max(window - PROMPT_TOKENS - TASK_TOKENS, 256)
        names = agent_names(trace)

        # pass 1: every step cut to the same budget, in overlapping windows
        short = [cut(t, k, o.step_tokens) for t, k in zip(texts, ntok)]
        parts = windows([min(k, o.step_tokens) + HEADER_TOKENS for k in ntok], room, o.overlap)
        shown1 = [render(trace, names, short, part, task) for part in parts]
        first = yield from self._score(ctx, "prism/pass1", shown1)
        one = merge(n, shown1, first)
        sym1 = symptoms(one.nll, failing, o.symptom_share)
        if one.att is not None:
            cands = candidates(one.att, sym1, allowed, o.candidates)
        else:
            cands = [i for i in symptoms(one.nll, failing, 1.0) if i in allowed]
            cands = sorted(cands, key=lambda i: (not failing[i], -(one.nll[i] or 0.0), i))[: o.candidates]
        if not cands:  # no symptom follows an action step: the most surprising action steps
            cands = sorted(allowed, key=lambda i: (not failing[i], -(one.nll[i] or 0.0), i))[: o.candidates]

        # pass 2: the focused prompt, symptoms and candidates restored
        focus = set(sym1) | set(cands)
        shown2 = focused(trace, names, texts, ntok, focus, task, min(sym1, default=None), room, o)
        (second,) = yield from self._score(ctx, "prism/pass2", [shown2])
        two = merge(n, [shown2], [second])
        sym2 = symptoms([two.nll[i] if i in shown2.steps else None for i in range(n)], failing, o.symptom_share)
        variant = "attention" if two.att is not None and one.att is not None else "nll-only"
        if two.att is not None and one.att is not None:
            ranked = rank(two.att, two.nll, sym2, cands, o.candidates)
            if ranked.margin() == 0 and max(ranked.scores.values(), default=0.0) <= 0:
                ranked, variant = rank(one.att, one.nll, sym1, cands, o.candidates), "attention (pass 1: no later symptom in pass 2)"
        else:
            ranked = rank_by_nll(two.nll, failing, cands)
        best = ranked.order()[0]
        return ctx.diagnosis(
            self.name,
            step=best,
            confidence=round(ranked.margin(), 4),
            reasoning=f"step {best}: the step later symptoms ({', '.join(map(str, sym2 or sym1))}) point back to most ({variant})",
            evidence=evidence(ranked, best, two.nll, failing),
            details={
                "variant": variant,
                "windows": len(parts),
                "pass1": {"nll": _rounded(one.nll), "symptoms": sym1, "candidates": cands},
                "pass2": {
                    "nll": _rounded(two.nll),
                    "symptoms": sym2,
                    "scores": {str(k): round(v, 5) for k, v in ranked.scores.items()},
                    "support": {str(k): v for k, v in ranked.support.items()},
                    "shown_steps": len(shown2.steps),
                },
                "margin": round(ranked.margin(), 4),
                "layers": second.value.get("layers", []),
                "limits_hit": hit.as_details(),
            },
        )

    def _score(self, ctx: MethodContext, key: str, shown: list[Shown]) -> Calls[list[Response]]:
        """Score each prompt in one batch; each step's block is a segment."""
        o = self.options
        requests: list[Request] = []
        for w, s in enumerate(shown):
            spec = Score(tuple(s.spans), tuple(range(-o.layers, 0)), o.chunk)
            messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": s.content}]
            req = ctx.request(f"{key}.{w}" if len(shown) > 1 else key, messages, score_grammar(), Sampling(temperature=0.0, max_tokens=1))
            requests.append(replace(req, score=spec))
        responses = yield requests
        return list(responses)


def focused(
    trace: Any, names: Any, texts: list[str], ntok: list[int], focus: set[int], task: str, cue: int | None, room: int, o: PrismOptions
) -> Shown:
    """Pass 2's prompt: focus steps up to `full_tokens`, the rest to `rest_tokens`, shrunk (the
    restored steps first, then the rest, then the rest dropped) until it fits `room` tokens."""
    full, rest, steps = o.full_tokens, o.rest_tokens, list(range(len(texts)))
    while True:
        caps = [full if i in focus else rest for i in steps]
        used = sum(min(ntok[i], c) + HEADER_TOKENS for i, c in zip(steps, caps))
        if used <= room or (full <= 32 and len(steps) == len(focus)):
            break
        if full > 64:
            full //= 2
        elif rest > 4:
            rest //= 2
        elif len(steps) > len(focus):
            steps = sorted(focus)
        else:
            full //= 2
    shown = [cut(t, k, full if i in focus else rest) for i, (t, k) in enumerate(zip(texts, ntok))]
    return render(trace, names, shown, steps, task, cue_before=cue)


def merge(n: int, shown: list[Shown], responses: list[Response]) -> Signals:
    """Per-step signals over the run from the windows' answers: each step's NLL, and each pair's
    attention, from the first window that shows it (the one where it has the most context)."""
    nll: list[float | None] = [None] * n
    att: Matrix | None = None
    filled: set[tuple[int, int]] = set()
    for s, resp in zip(shown, responses):
        value = resp.value
        for local, x in enumerate(segment_nll(value, len(s.steps))):
            if nll[s.steps[local]] is None:
                nll[s.steps[local]] = x
        matrix = value.get("attention")
        if matrix is None:
            continue
        att = att if att is not None else [[0.0] * n for _ in range(n)]
        for a, i in enumerate(s.steps):
            for b, j in enumerate(s.steps):
                if (i, j) not in filled:
                    att[i][j] = float(matrix[a][b])
                    filled.add((i, j))
    return Signals(nll, att)


def evidence(ranked: Ranked, best: int, nll: list[float | None], failing: list[bool]) -> list[str]:
    """The symptoms that pointed back to the answer, strongest first, with their numbers."""
    links = sorted(ranked.links.get(best, []), key=lambda x: -x[1])[:5]
    out = []
    for m, s in links:
        words = ", failure words" if failing[m] else ""
        out.append(f"symptom step {m} (NLL {nll[m] or 0.0:.2f}{words}) attends to step {best}: s={s:.3f}")
    if not out:
        out.append(f"step {best}: pass-2 NLL {nll[best] or 0.0:.2f} (no later symptom attends to it)")
    return out


def _rounded(values: list[float | None]) -> list[float | None]:
    return [None if v is None or math.isnan(v) else round(v, 4) for v in values]
