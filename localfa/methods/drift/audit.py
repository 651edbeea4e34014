"""One DRIFT audit of one trace, as a method program (a generator of request batches).

Stages, each one round of requests (the runner fills batches across traces):

1. segment (option): every chunk of steps in ONE batch; the answers become contiguous spans.
2. Claim Keeper: the spans in chunks that fit the window, one call per chunk, in order, the
   ledger carried forward and merged (sequential by nature).
3. Support Seeker: one request per committed claim, ALL in one batch; every prompt is the same
   system prompt + task + fitted run text + instructions, the claim last, so the batch shares
   one cached prefix.
4. Dependency Tracer: for risky (not DIRECT) claims, one request per claim in one batch, or one
   request over all of them (``tracer=ledger``), with the same prefix as stage 3.

The prediction is the set of marked spans; see `tracer` for the first error, step and agent.
"""

from __future__ import annotations

from typing import Any, Callable, Generator, TypeVar

from localfa.diagnosis import Diagnosis
from localfa.engine.types import Request, Response, Usage
from localfa.grammars.drift import (
    ledger_grammar,
    ledger_max_tokens,
    segment_grammar,
    segment_max_tokens,
    spans_from_starts,
    support_grammar,
    support_max_tokens,
    tracer_claim_grammar,
    tracer_ledger_grammar,
    tracer_max_tokens,
)
from localfa.limits import Limits, LimitsHit
from localfa.methods.base import MethodContext, Program
from localfa.methods.baselines import _budget_chars, _chars_per_token, fit_char_budget, shorten
from localfa.methods.drift.ledger import Claim, Ledger
from localfa.methods.drift.options import DriftOptions
from localfa.methods.drift.spans import Span, SpanView, one_span_per_step, pack_chunks, spans_from_ranges
from localfa.methods.drift.support import SupportCheck, check_from_answer
from localfa.methods.drift.tracer import Mark, error_spans, final_answer_span, marks_for_claim, marks_for_ledger, pick_step
from localfa.templates import render

METHOD = "drift"
STAGES = ("segment", "ledger", "support", "tracer")
TASK_CHARS = 1500
PROMPT_RESERVE_TOKENS = 1536  # system, task, the ledger shown and the instructions of a ledger call
DEFAULT_CHUNK_TOKENS = 3000  # when the engine does not say its window
Messages = list[dict[str, str]]
T = TypeVar("T")
Stage = Generator[list[Request], list[Response], T]  # one stage of the program, returning T


class Audit:
    """State of one audit; `run()` is the program the runner drives."""

    def __init__(self, ctx: MethodContext, opts: DriftOptions) -> None:
        self.ctx = ctx
        self.opts = opts
        self.limits = opts.limits
        trace = ctx.trace
        if not trace.steps:
            raise ValueError("drift: the trace has no steps")
        self.hit = LimitsHit(Limits.from_env())
        self.view = SpanView(trace, self.hit)
        self.n_steps = self.view.n_steps  # at most the host's max_steps
        self.cpt = _chars_per_token(ctx)
        self.char_budget, self.budget_note = _budget_chars(ctx, None)
        self.task = shorten((trace.task or "(not recorded)").strip(), TASK_CHARS)
        self.system = {"role": "system", "content": render("drift/system.j2")}
        self.cost = {stage: Usage() for stage in STAGES}
        self.chunk_tokens = self._chunk_tokens()
        self.chunk_chars = max(256, min(self.char_budget, int(self.chunk_tokens * self.cpt)))

    # ------------------------------------------------------------------ plumbing
    def _chunk_tokens(self) -> int:
        if self.opts.chunk_tokens is not None:
            return self.opts.chunk_tokens
        window = self.ctx.max_model_len
        if not window:
            return DEFAULT_CHUNK_TOKENS
        worst = ledger_max_tokens(self.n_steps, ["C99"] * max(1, self.opts.ledger_shown), self.limits)
        return max(256, window - worst - PROMPT_RESERVE_TOKENS)

    def _user(self, template: str, **variables: Any) -> Messages:
        return [self.system, {"role": "user", "content": render(template, task=self.task, **variables)}]

    def _fitted(self, prompt_for: Callable[[int], Messages], budget: int, max_tokens: int) -> Messages:
        return prompt_for(fit_char_budget(self.ctx, budget, prompt_for, max_tokens))

    def _ask(self, stage: str, requests: list[Request]) -> Stage[list[Response]]:
        responses: list[Response] = yield requests
        for r in responses:
            self.cost[stage].add(r.usage)
        return responses

    # ------------------------------------------------------------------ 1. spans
    def _segment(self) -> Stage[tuple[list[Span], list[list[int]]]]:
        unit = one_span_per_step(self.n_steps)
        if not self.opts.segment or self.n_steps == 1:
            return unit, []
        chunks = pack_chunks(self.view, unit, self.chunk_chars, self.opts.segment_max_steps)
        requests = []
        for k, chunk in enumerate(chunks):
            lo, hi = chunk[0].first, chunk[-1].last
            max_tokens = segment_max_tokens(lo, hi)

            def prompt_for(budget: int, chunk: list[Span] = chunk, lo: int = lo, hi: int = hi) -> Messages:
                return self._user("drift/segment.j2", run=self.view.render(chunk, budget, tags=False), lo=lo, hi=hi)

            requests.append(
                self.ctx.request(
                    f"drift/segment/{k}",
                    self._fitted(prompt_for, self.chunk_chars, max_tokens),
                    segment_grammar(lo, hi),
                    self.opts.sampling(max_tokens, check=True),
                )
            )
        responses = yield from self._ask("segment", requests)
        ranges = [r for resp, chunk in zip(responses, chunks) for r in spans_from_starts(resp.value, chunk[0].first, chunk[-1].last)]
        return spans_from_ranges(ranges, self.n_steps), [[c[0].first, c[-1].last] for c in chunks]

    # ------------------------------------------------------------------ 2. Claim Keeper
    def _ledger_prompt(self, run: str, lo: int, hi: int, shown: list[Claim]) -> Messages:
        return self._user("drift/ledger.j2", claims=shown, run=run, lo=lo, hi=hi, limits=self.limits)

    def _keep_claims(self, spans: list[Span], shared_run: str) -> Stage[tuple[Ledger, list[list[int]]]]:
        """The ledger, chunk by chunk. A trace read in one chunk is shown exactly as the support
        checks will show it, so they reuse the ledger call's cached prefix."""
        ledger = Ledger()
        chunks = pack_chunks(self.view, spans, self.chunk_chars, self.opts.chunk_max_spans)
        for k, chunk in enumerate(chunks):
            lo, hi = chunk[0].id, chunk[-1].id
            shown = ledger.claims[-self.opts.ledger_shown :] if self.opts.ledger_shown else []
            ids = [c.id for c in shown]
            max_tokens = ledger_max_tokens(len(spans) - 1, ids, self.limits)

            def prompt_for(budget: int, chunk: list[Span] = chunk, lo: int = lo, hi: int = hi, shown: list[Claim] = shown) -> Messages:
                return self._ledger_prompt(self.view.render(chunk, budget), lo, hi, shown)

            if len(chunks) == 1:
                messages = self._ledger_prompt(shared_run, lo, hi, shown)
            else:
                messages = self._fitted(prompt_for, self.chunk_chars, max_tokens)
            req = self.ctx.request(f"drift/ledger/{k}", messages, ledger_grammar(lo, hi, ids, self.limits), self.opts.sampling(max_tokens))
            (resp,) = yield from self._ask("ledger", [req])
            ledger.merge(resp.value, chunk=k)
        return ledger, [[c[0].id, c[-1].id] for c in chunks]

    # ------------------------------------------------------------------ shared run text
    def _shared_run(self, spans: list[Span]) -> tuple[str, int]:
        """The whole run as every support and tracer prompt (and a one-chunk ledger) starts with it,
        fitted for the longest prompt any of them can be (claims and answers at their bounds)."""
        n = len(spans)
        lim = self.limits
        checked = [
            Claim(
                f"C{k + 1:02d}",
                "x" * lim.claim_chars,
                "computation",
                "consequential",
                n - 1,
                n - 1,
                list(range(max(0, n - lim.uses_per_claim), n)),
            )
            for k in range(self.opts.max_checked_claims)
        ]
        worst = [
            SupportCheck(c.id, "CONFLICTING", "CONFLICTING", "x" * lim.evidence_chars, n - 1, False, None, "x" * lim.reason_chars)
            for c in checked
        ]
        longest = checked[0]

        def ledger(budget: int) -> Messages:
            return self._ledger_prompt(self.view.render(spans, budget), 0, n - 1, [])

        def support(budget: int) -> Messages:
            return self._user("drift/support.j2", run=self.view.render(spans, budget), claim=longest, n_spans=n, limits=self.limits)

        def tracer(budget: int) -> Messages:
            run = self.view.render(spans, budget)
            if self.opts.tracer == "ledger":
                return self._user(
                    "drift/tracer_ledger.j2",
                    run=run,
                    n_spans=n,
                    limits=self.limits,
                    items=[{"claim": c, "check": w} for c, w in zip(checked, worst)],
                )
            return self._user("drift/tracer_claim.j2", run=run, claim=longest, check=worst[0], n_spans=n, limits=self.limits)

        tracer_tokens = (
            tracer_max_tokens(n, self.limits, len(checked), max(len(c.id) for c in checked) + 2)
            if self.opts.tracer == "ledger"
            else tracer_max_tokens(n, self.limits)
        )
        budget = min(
            fit_char_budget(self.ctx, self.char_budget, support, support_max_tokens(n, self.limits)),
            fit_char_budget(self.ctx, self.char_budget, tracer, tracer_tokens),
            fit_char_budget(self.ctx, self.char_budget, ledger, ledger_max_tokens(n - 1, [], self.limits)),
        )
        return self.view.render(spans, budget), budget

    # ------------------------------------------------------------------ 3. Support Seeker
    def _seek_support(self, spans: list[Span], checked: list[Claim], run: str) -> Stage[list[SupportCheck]]:
        n = len(spans)
        grammar = support_grammar(n, self.limits)
        sampling = self.opts.sampling(support_max_tokens(n, self.limits), check=True)
        requests = [
            self.ctx.request(
                f"drift/support/{c.id}", self._user("drift/support.j2", run=run, claim=c, n_spans=n, limits=self.limits), grammar, sampling
            )
            for c in checked
        ]
        responses = yield from self._ask("support", requests)
        return [check_from_answer(c.id, r.value, self.view, spans, self.opts.verify_evidence) for c, r in zip(checked, responses)]

    # ------------------------------------------------------------------ 4. Dependency Tracer
    def _trace_dependencies(
        self, spans: list[Span], risky: list[tuple[Claim, SupportCheck]], run: str
    ) -> Stage[tuple[list[str], list[Mark]]]:
        """(harmful claim ids, marks) by the configured tracer mode."""
        if self.opts.tracer == "ledger":
            return (yield from self._trace_over_ledger(len(spans), risky, run))
        return (yield from self._trace_per_claim(len(spans), risky, run))

    def _trace_over_ledger(self, n: int, risky: list[tuple[Claim, SupportCheck]], run: str) -> Stage[tuple[list[str], list[Mark]]]:
        ids = {c.id: c.introduced for c, _ in risky}
        max_tokens = tracer_max_tokens(n, self.limits, len(ids), max(len(i) for i in ids) + 2)
        req = self.ctx.request(
            "drift/tracer/ledger",
            self._user(
                "drift/tracer_ledger.j2", run=run, n_spans=n, limits=self.limits, items=[{"claim": c, "check": k} for c, k in risky]
            ),
            tracer_ledger_grammar(ids, n, self.limits),
            self.opts.sampling(max_tokens),
        )
        (resp,) = yield from self._ask("tracer", [req])
        harmful, marks = marks_for_ledger([c for c, _ in risky], resp.value)
        return sorted(harmful, key=lambda i: int(i[1:])), marks

    def _trace_per_claim(self, n: int, risky: list[tuple[Claim, SupportCheck]], run: str) -> Stage[tuple[list[str], list[Mark]]]:
        sampling = self.opts.sampling(tracer_max_tokens(n, self.limits))
        requests = [
            self.ctx.request(
                f"drift/tracer/{c.id}",
                self._user("drift/tracer_claim.j2", run=run, claim=c, check=k, n_spans=n, limits=self.limits),
                tracer_claim_grammar(c.introduced, n, self.limits),
                sampling,
            )
            for c, k in risky
        ]
        responses = yield from self._ask("tracer", requests)
        harmful_ids: list[str] = []
        marks: list[Mark] = []
        for (c, _), r in zip(risky, responses):
            harmful, found = marks_for_claim(c, r.value)
            if harmful:
                harmful_ids.append(c.id)
            marks += found
        return harmful_ids, marks

    # ------------------------------------------------------------------ the program
    def run(self) -> Program:
        spans, segment_chunks = yield from self._segment()
        run, run_budget = self._shared_run(spans)
        ledger, ledger_chunks = yield from self._keep_claims(spans, run)
        committed = ledger.committed()
        checked = committed[: self.opts.max_checked_claims]
        checks: list[SupportCheck] = []
        harmful: list[str] = []
        marks: list[Mark] = []
        if checked:
            checks = yield from self._seek_support(spans, checked, run)
            risky = [(c, k) for c, k in zip(checked, checks) if k.risky]
            if risky:
                harmful, marks = yield from self._trace_dependencies(spans, risky, run)
        details: dict[str, Any] = {
            "spans": [list(s.as_range()) for s in spans],
            "segmented": self.opts.segment,
            "segment_chunks": segment_chunks,
            "chunk_tokens": self.chunk_tokens,
            "ledger_chunks": ledger_chunks,
            "ledger": ledger.as_list(),
            "support": [k.as_dict() for k in checks],
            "unchecked_claims": [c.id for c in committed[self.opts.max_checked_claims :]],
            "tracer": {"mode": self.opts.tracer, "harmful": harmful, "marks": [m.as_dict() for m in marks]},
            "run_char_budget": run_budget,
            "budget_note": self.budget_note,
            "limits_hit": self.hit.as_details(),
            "cost": {s: u.as_dict() for s, u in self.cost.items()},
        }
        return self._diagnose(spans, ledger, checks, marks, details)

    def _diagnose(
        self, spans: list[Span], ledger: Ledger, checks: list[SupportCheck], marks: list[Mark], details: dict[str, Any]
    ) -> Diagnosis:
        by_claim = {k.claim: k for k in checks}
        err = error_spans(marks)
        details["error_spans"] = err
        if err:
            first = spans[err[0]]
            there = [ledger.get(m.claim) for m in marks if m.span == first.id]
            claims = [c for c in there if c is not None]
            step = pick_step(self.view, first, [c.text for c in claims])
            details["first_error_span"] = first.id
            details["no_error_span"] = None
            predicted = [spans[i].as_range() for i in err]
            why = "; ".join(f"{c.id} ({by_claim[c.id].status}): {c.text}" for c in claims if c.id in by_claim)
            reasoning = (
                f"First error in span {first.id} (steps {first.first}-{first.last}), which carries "
                f"unsupported claim(s) {why}. Error spans: {', '.join(map(str, err))}."
            )
            ordered = sorted({m.claim for m in marks}, key=lambda cid: min(m.span for m in marks if m.claim == cid))
        else:
            span, final = final_answer_span(spans, ledger.claims)
            texts = [final.text] if final else ([self.ctx.trace.final_output] if self.ctx.trace.final_output else [])
            step = pick_step(self.view, span, texts)
            risky = [k.claim for k in checks if k.risky]
            reason = (
                "risky claims were judged harmless"
                if risky
                else "no committed claim lacks support"
                if checks
                else "no committed claim was recorded"
            )
            details["first_error_span"] = None
            details["no_error_span"] = f"{reason}: the step where the final answer is committed is predicted"
            predicted = [span.as_range()]
            reasoning = f"No error span found ({reason}); predicting span {span.id}, where the final answer is committed."
            ordered = risky
        evidence = list(dict.fromkeys(by_claim[c].evidence for c in ordered if c in by_claim and by_claim[c].evidence_verbatim))
        return self.ctx.diagnosis(METHOD, step=step, reasoning=reasoning, evidence=evidence, spans=predicted, details=details)
