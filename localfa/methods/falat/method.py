"""FALAT as a registered method: prior, windows, typed transitions, verification, re-search.

About five rounds per trace whatever its length: the prior (1 call), all windows (one batch),
all candidate pairs (one batch), the top-k verifications (one batch), the re-search (1 call).
Every prompt opens with the same system message and prior block, so siblings share a prefix.
Calls, tokens and batch sizes are recorded per stage in `details["cost"]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generator

import regex as re

from localfa.engine.types import Request, Response, Usage
from localfa.grammars.falat import TRANSITION_MAX_TOKENS, FalatLimits
from localfa.methods.base import BaseMethod, MethodContext, Program
from localfa.methods.evidence import verify_quotes
from localfa.methods.falat.candidates import select_candidates
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.options import FalatOptions
from localfa.methods.falat.prior import Prior, build_prior, prior_request
from localfa.methods.falat.ranking import rank, top_k
from localfa.methods.falat.research import Research, parse_research, research_request
from localfa.methods.falat.text import MESSAGE_OVERHEAD, TraceText, clip_tokens, prompt_room
from localfa.methods.falat.transitions import candidate_pairs, prune, transition_requests
from localfa.methods.falat.verify import Verdict, choose, parse_verdict, verify_requests
from localfa.methods.falat.windows import StageSummary, StepSummary, parse_window, split_windows, window_requests, window_step_cap
from localfa.templates import render

METHOD = "falat"
STAGES = ("prior", "windows", "transitions", "verify", "research")
_QUOTED = re.compile(r"[\"'\u2018\u201c]([^\"'\u2019\u201d\n]{12,300})[\"'\u2019\u201d]")


@dataclass
class StageLog:
    """Calls, tokens and the sizes of the batches yielded, per stage."""

    usage: dict[str, Usage] = field(default_factory=dict)
    batches: dict[str, list[int]] = field(default_factory=dict)

    def ask(self, stage: str, requests: list[Request]) -> Generator[list[Request], list[Response], list[Response]]:
        """Send `requests` as one batch and account for them under `stage`."""
        responses = yield requests
        total = self.usage.setdefault(stage, Usage())
        for r in responses:
            total.add(r.usage)
        self.batches.setdefault(stage, []).append(len(requests))
        return responses

    def as_dict(self) -> dict[str, Any]:
        return {s: {**self.usage[s].as_dict(), "batches": self.batches[s]} for s in STAGES if s in self.usage}


class Falat(BaseMethod):
    name = METHOD
    Options = FalatOptions
    view_path = "localfa.view.paths:falat_path"
    options: FalatOptions

    def run(self, ctx: MethodContext) -> Program:
        # A generator from the first line: a bad trace fails inside the runner (an error record
        # for that trace), never while the sweep is still building its jobs.
        return (yield from _Run(ctx, self.options).run())


class _Run:
    """One trace's FALAT search; `run()` is the program the runner drives."""

    def __init__(self, ctx: MethodContext, opts: FalatOptions) -> None:
        if not ctx.trace.steps:
            raise ValueError("falat: the trace has no steps")
        self.ctx, self.opts, self.limits = ctx, opts, FalatLimits()
        self.system = {"role": "system", "content": render("falat/system.j2")}
        self.log = StageLog()
        self.view = TraceText.of(ctx)

    def run(self) -> Program:
        ctx, opts, limits, system, view = self.ctx, self.opts, self.limits, self.system, self.view
        n = view.n

        # Stage 1: prior, then every window in one batch, then candidates.
        (resp,) = yield from self.log.ask("prior", [prior_request(ctx, opts, limits, system)])
        prior = build_prior(ctx, opts, resp.value)
        block = prior.block()
        windows = split_windows(n, opts.window)
        ground = Ground(ctx, view, opts, limits, system, block)
        cap = window_step_cap(ground)
        responses = yield from self.log.ask("windows", window_requests(ground, windows, cap))
        mids: dict[int, StepSummary] = {}
        stages: list[StageSummary] = []
        for steps, r in zip(windows, responses):
            step_mids, stage = parse_window(steps, r.value)
            mids.update((m.index, m) for m in step_mids)
            stages.append(stage)
        cands = select_candidates(list(mids.values()), stages)

        # Stage 2: typed transitions (one batch), pruning.
        pairs, cut = candidate_pairs(cands.steps, opts.pair_cap)
        labels: dict[tuple[int, int], str] = {}
        if pairs:
            shared = self._transition_shared(block, stages, mids, cands.steps, cands.regions)
            reqs = transition_requests(ctx, view, opts, system, shared, pairs)
            responses = yield from self.log.ask("transitions", reqs)
            labels = {p: r.value for p, r in zip(pairs, responses)}
        pruning = prune(cands.steps, labels, {i: mids[i].prior_inconsistency for i in cands.steps})

        # Stage 3: rank, verify the top k (one batch), pick t̂.
        ranked = rank(pruning.kept, mids, labels, pruning.sources)
        top = top_k(ranked, opts.top_k)
        reqs = verify_requests(ground, [r.step for r in top], labels)
        responses = yield from self.log.ask("verify", reqs)
        verdicts = [parse_verdict(r.step, resp.value) for r, resp in zip(top, responses)]
        t_hat, passed = choose(verdicts)

        # Stage 4: local re-search.
        (resp,) = yield from self.log.ask("research", [research_request(ground, t_hat, labels, mids)])
        research = parse_research(t_hat, n, resp.value)
        final = research.top

        details = {
            "window": opts.window,
            "windows": [[w.start, w[-1]] for w in windows],
            "step_token_cap": cap,
            "prior": prior.as_dict(),
            "expected_output_source": prior.expected_source,
            "mid_level": [_mid_dict(mids[i]) for i in sorted(mids)],
            "stages": [{"window": list(s.window), "summary": s.summary, "focus_step": s.focus_step} for s in stages],
            "candidates": list(cands.steps),
            "candidate_source": cands.source,
            "regions": [list(r) for r in cands.regions],
            "pairs": [{"i": i, "j": j, "label": lab} for (i, j), lab in labels.items()],
            "pairs_cut": [list(p) for p in cut],
            "pruned": {str(k): v for k, v in sorted(pruning.pruned.items())},
            "spared_by_deviation": {str(k): v for k, v in sorted(pruning.spared.items())},
            "follow_up_sources": {str(k): v for k, v in sorted(pruning.sources.items())},
            "refined": list(pruning.kept),
            "all_pruned_fallback": pruning.fallback,
            "ranking": [{"step": r.step, "suspicion": r.suspicion, "path": r.path} for r in ranked],
            "top": [v.as_dict() for v in verdicts],
            "t_hat": t_hat,
            "t_hat_verified": passed,
            "research": research.as_dict(),
            "final_step": final,
            "research_changed": final != t_hat,
            "cost": self.log.as_dict(),
            "limits_hit": view.hit.as_details(),
            "budget_applied": False if ctx.budget and ctx.budget != "none" else None,
        }
        return self._finish(prior, verdicts, research, final, passed, details)

    def _transition_shared(
        self,
        block: str,
        stages: list[StageSummary],
        mids: dict[int, StepSummary],
        candidates: tuple[int, ...],
        regions: list[tuple[int, int]],
    ) -> str:
        """Prior, stage summaries and candidate summaries: the part every pair prompt shares,
        cut (the prior kept whole) if it would not leave room for the pair."""
        rest = render("falat/transition.j2", stages=stages, summaries=[mids[i] for i in candidates], regions=regions)
        count = self.view.count
        pair_part = 2 * self.opts.pair_step_tokens + 120
        room = (
            prompt_room(self.ctx, [self.system, {"role": "user", "content": block}], TRANSITION_MAX_TOKENS) - pair_part - MESSAGE_OVERHEAD
        )
        if count(rest) > room:
            rest = clip_tokens(rest, max(64, room), count)
        return block + "\n\n" + rest

    def _finish(self, prior: Prior, verdicts: list[Verdict], research: Research, final: int, passed: bool, details: dict[str, Any]):
        role = research.roles[final]
        verdict = next((v for v in verdicts if v.step == final), None)
        reasoning = f"step {final} ({role['role']}): {role['for']}"
        if verdict is not None:
            reasoning += f" Verification: {verdict.reasons}"
        quotes: list[str] = []
        if verdict is not None:
            quotes.append(verdict.quote)
        quotes += [q for q in _QUOTED.findall(role["for"]) if q not in quotes]
        checks = verify_quotes(self.ctx.trace, quotes) if quotes else []
        details["evidence_checked"] = [{"quote": q, "verbatim": ok} for q, ok in zip(quotes, checks)]
        evidence = [q for q, ok in zip(quotes, checks) if ok]
        stop = "verified" if passed else "none_verified"
        return self.ctx.diagnosis(METHOD, step=final, reasoning=reasoning, evidence=evidence, stop_reason=stop, details=details)


def _mid_dict(m: StepSummary) -> dict[str, Any]:
    return {
        "index": m.index,
        "agent": m.agent,
        "action": m.action,
        "decision": m.decision,
        "significance": m.significance,
        "signals": m.signals(),
    }
