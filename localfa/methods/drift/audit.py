"""One DRIFT audit of one trace, as a method program (a generator of request batches).

Stages, each one round of requests (the runner fills batches across traces):

1. segment (option): every chunk of steps in ONE batch; the answers become contiguous spans.
2. Claim Keeper: the spans in chunks sized by tokens alone (what the window holds next to the
   ledger so far, the instructions and the answer), one call per chunk, in order, the whole
   ledger carried forward compactly and merged (sequential by nature). An answer whose spans
   break introduced <= consequential <= use is asked again once, then repaired.
3. Support Seeker: one request per committed claim (the riskiest first when there are more than
   `max_checked_claims`), ALL in one batch; every prompt is the same system prompt + task +
   fitted run text + instructions, the claim and its passages last, so the batch shares one
   cached prefix.
4. Dependency Tracer: for risky (not DIRECT) claims, one request per claim in one batch, or one
   request over all of them (``tracer=ledger``), with the same prefix as stage 3.

The prediction is the set of marked spans (empty when nothing harmful was found: the paper's
Ê = ∅, with a fallback step still answered); see `tracer` for the first error, step and agent.
Every bound the audit hits is recorded in ``details["bounds_hit"]``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Generator, TypeVar

from localfa.diagnosis import Diagnosis
from localfa.engine.types import Request, Response, Sampling, Usage
from localfa.grammars.drift import (
    DriftLimits,
    ledger_grammar,
    ledger_max_tokens,
    ledger_order_errors,
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
from localfa.methods.drift.excerpts import relevant_passages, render_passages
from localfa.methods.drift.ledger import Claim, Ledger, ledger_block
from localfa.methods.drift.options import DriftOptions, SamplingStage
from localfa.methods.drift.spans import Cut, Span, SpanView, cut_note, one_span_per_step, pack_chunks, spans_from_ranges, take_chunk
from localfa.methods.drift.support import SupportCheck, check_from_answer
from localfa.methods.drift.tracer import Mark, error_spans, final_answer_span, marks_for_claim, marks_for_ledger, pick_step
from localfa.templates import render

METHOD = "drift"
STAGES = ("segment", "ledger", "support", "tracer")
TASK_CHARS = 1500
MARGIN_TOKENS = 64  # chat template and tokenizer drift on top of what is counted
DEFAULT_CHUNK_TOKENS = 3000  # when the engine does not say its window
TRACER_LEDGER_SHARE = 4  # a tracer answer may take at most 1/4 of the window
LEDGER_UPDATE_TOKENS = 120  # the ledger prompt's "updates" instruction, shown once there is a ledger
Messages = list[dict[str, str]]
T = TypeVar("T")
Stage = Generator[list[Request], list[Response], T]  # one stage of the program, returning T


class Audit:
    """State of one audit; `run()` is the program the runner drives."""

    def __init__(self, ctx: MethodContext, opts: DriftOptions) -> None:
        self.ctx = ctx
        self.opts = opts
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
        self.bounds: dict[str, list[Any]] = {}
        self.ledger_retries: list[dict[str, Any]] = []
        self._ledger_base: int | None = None
        self.limits = self._fit_limits(opts.limits)

    def _fit_limits(self, limits: DriftLimits) -> DriftLimits:
        """The output bounds, lowered where the window could not hold an answer at its bound (a
        ledger answer at most a third of the window, a tracer answer a quarter); each lowered
        bound is recorded."""
        window = self.ctx.max_model_len
        if not window:
            return limits
        hi, ids = self.n_steps - 1, ["C" + "9" * len(str(self.n_steps * 4))]
        claims, updates, marks = limits.claims_per_chunk, limits.updates_per_chunk, limits.marks_per_claim
        while (claims > 1 or updates > 0) and ledger_max_tokens(
            hi, ids, replace(limits, claims_per_chunk=claims, updates_per_chunk=updates)
        ) > window // 3:
            claims, updates = max(1, claims * 3 // 4), updates * 3 // 4
        while marks > 1 and tracer_max_tokens(self.n_steps, marks) > window // TRACER_LEDGER_SHARE:
            marks = max(1, marks * 3 // 4)
        fitted = replace(limits, claims_per_chunk=claims, updates_per_chunk=updates, marks_per_claim=marks)
        for name in ("claims_per_chunk", "updates_per_chunk", "marks_per_claim"):
            if getattr(fitted, name) < getattr(limits, name):
                self._bound(f"window:{name}", getattr(fitted, name))
        return fitted

    # ------------------------------------------------------------------ plumbing
    def _bound(self, name: str, where: Any) -> None:
        """Record that a bound was reached (`where`: the chunk, claim or count it was reached at)."""
        self.bounds.setdefault(name, []).append(where)

    def _user(self, template: str, cut_note: str = "", **variables: Any) -> Messages:
        content = render(template, task=self.task, cut_note=cut_note, **variables)
        return [self.system, {"role": "user", "content": content}]

    def _fit(self, prompt_for: Callable[[int], Messages], budget: int, max_tokens: int) -> int:
        return fit_char_budget(self.ctx, budget, prompt_for, max_tokens, margin=MARGIN_TOKENS)

    def _sampling(self, max_tokens: int, stage: SamplingStage) -> Sampling:
        return self.opts.sampling(max_tokens, stage)

    def _ask(self, stage: str, requests: list[Request]) -> Stage[list[Response]]:
        responses: list[Response] = yield requests
        for r in responses:
            self.cost[stage].add(r.usage)
        return responses

    def _tokens(self, messages: Messages) -> int:
        count = self.ctx.count_tokens
        return sum(int(count(m["content"])) + 8 for m in messages) if count else sum(len(m["content"]) for m in messages) // 4

    def _text_bound(self, name: str, text: str, cap: int, where: Any) -> None:
        if len(text) >= cap:
            self._bound(name, where)

    # ------------------------------------------------------------------ 1. spans
    def _segment(self) -> Stage[tuple[list[Span], list[list[int]]]]:
        unit = one_span_per_step(self.n_steps)
        if not self.opts.segment or self.n_steps == 1:
            return unit, []
        chars = self._chunk_chars(self.opts.chunk_tokens or self._window_tokens(0))
        chunks = pack_chunks(self.view, unit, chars, self.opts.segment_max_steps)
        capped = [k for k, c in enumerate(chunks[:-1]) if len(c) >= self.opts.segment_max_steps]
        if capped:
            self._bound("segment_max_steps", capped)  # a span cannot cross these chunk ends
        requests = []
        for k, chunk in enumerate(chunks):
            lo, hi = chunk[0].first, chunk[-1].last
            max_tokens = segment_max_tokens(lo, hi)

            def prompt_for(budget: int, chunk: list[Span] = chunk, lo: int = lo, hi: int = hi) -> Messages:
                run, cuts = self.view.view(chunk, budget, tags=False)
                return self._user("drift/segment.j2", cut_note(cuts), run=run, lo=lo, hi=hi)

            messages = prompt_for(self._fit(prompt_for, chars, max_tokens))
            requests.append(self.ctx.request(f"drift/segment/{k}", messages, segment_grammar(lo, hi), self._sampling(max_tokens, "check")))
        responses = yield from self._ask("segment", requests)
        ranges = [r for resp, chunk in zip(responses, chunks) for r in spans_from_starts(resp.value, chunk[0].first, chunk[-1].last)]
        return spans_from_ranges(ranges, self.n_steps), [[c[0].first, c[-1].last] for c in chunks]

    # ------------------------------------------------------------------ 2. Claim Keeper
    def _ledger_prompt(self, run: str, note: str, lo: int, hi: int, shown: list[Claim]) -> Messages:
        block = ledger_block(shown) if shown else ""
        return self._user("drift/ledger.j2", note, claims=shown, ledger=block, run=run, lo=lo, hi=hi, limits=self.limits)

    def _window_tokens(self, fixed: int) -> int:
        """Tokens of run text a prompt may hold next to `fixed` tokens of everything else."""
        window = self.ctx.max_model_len
        if not window:
            return DEFAULT_CHUNK_TOKENS
        return max(256, int(window * 0.97) - fixed - MARGIN_TOKENS)

    def _chunk_chars(self, tokens: int) -> int:
        return max(256, min(self.char_budget, int(tokens * self.cpt)))

    def _chunk_tokens(self, n_spans: int, shown: list[Claim]) -> int:
        """Run-text tokens for the next ledger chunk, next to the ledger so far (`shown`)."""
        if self.opts.chunk_tokens is not None:
            return self.opts.chunk_tokens
        if self._ledger_base is None:  # the prompt without run text or ledger, counted once
            self._ledger_base = self._tokens(self._ledger_prompt("", "", n_spans - 1, n_spans - 1, []))
        ids = [c.id for c in shown]
        ledger = self._tokens([{"content": ledger_block(shown)}]) + LEDGER_UPDATE_TOKENS if shown else 0
        return self._window_tokens(self._ledger_base + ledger + ledger_max_tokens(n_spans - 1, ids, self.limits))

    def _keep_claims(self, spans: list[Span], shared: tuple[str, int, list[Cut]]) -> Stage[tuple[Ledger, list[dict[str, Any]]]]:
        """The ledger, chunk by chunk, each chunk as many spans as its token budget holds. A trace
        read in one chunk is shown exactly as the support checks will show it (same cut, same
        note), so they reuse the ledger call's cached prefix."""
        ledger = Ledger()
        chunks: list[dict[str, Any]] = []
        n, start, k = len(spans), 0, 0
        while start < n:
            shown = list(ledger.claims)
            ids = [c.id for c in shown]
            tokens = self._chunk_tokens(n, shown)
            chars = self._chunk_chars(tokens)
            end, ended = take_chunk(self.view, spans, start, chars, self.opts.chunk_max_spans)
            chunk = spans[start:end]
            lo, hi = chunk[0].id, chunk[-1].id
            max_tokens = ledger_max_tokens(hi, ids, self.limits)
            if start == 0 and end == n:
                run, _, cuts = shared
                messages = self._ledger_prompt(run, cut_note(cuts), lo, hi, shown)
            else:
                messages, cuts = self._fitted_ledger(chunk, shown, chars, max_tokens)
            answer = yield from self._ledger_call(k, messages, ledger_grammar(lo, hi, ids, self.limits), max_tokens)
            self._ledger_bounds(k, answer)
            ledger.merge(answer, chunk=k)
            chunks.append({"spans": [lo, hi], "ended": ended, "chunk_tokens": tokens, "cut_steps": [c.step for c in cuts]})
            if ended == "chunk_max_spans":
                self._bound("chunk_max_spans", k)
            start, k = end, k + 1
        return ledger, chunks

    def _fitted_ledger(self, chunk: list[Span], shown: list[Claim], chars: int, max_tokens: int) -> tuple[Messages, list[Cut]]:
        """A chunk's ledger prompt with its run text fitted to the window (each budget tried is
        rendered once), and the steps it cuts."""
        made: dict[int, Messages] = {}
        lo, hi = chunk[0].id, chunk[-1].id

        def prompt_for(budget: int) -> Messages:
            if budget not in made:
                run, cuts = self.view.view(chunk, budget)
                made[budget] = self._ledger_prompt(run, cut_note(cuts), lo, hi, shown)
            return made[budget]

        budget = self._fit(prompt_for, chars, max_tokens)
        return prompt_for(budget), self.view.cuts(chunk, budget)

    def _ledger_call(self, k: int, messages: Messages, grammar: Any, max_tokens: int) -> Stage[dict[str, Any]]:
        """One ledger chunk; an answer that breaks the span order is asked again (`order_retries`)
        with what was wrong appended to the same prompt (its prefix stays cached)."""
        sampling = self._sampling(max_tokens, "keeper")
        (resp,) = yield from self._ask("ledger", [self.ctx.request(f"drift/ledger/{k}", messages, grammar, sampling)])
        errors = ledger_order_errors(resp.value)
        for attempt in range(self.opts.order_retries):
            if not errors:
                break
            note = render("drift/ledger_retry.j2", errors=errors)
            again = [messages[0], {"role": "user", "content": messages[1]["content"] + "\n\n" + note}]
            key = f"drift/ledger/{k}/retry" + (f"{attempt + 1}" if attempt else "")
            (resp,) = yield from self._ask("ledger", [self.ctx.request(key, again, grammar, sampling)])
            left = ledger_order_errors(resp.value)
            self.ledger_retries.append({"chunk": k, "errors": errors, "repaired_after_retry": left})
            errors = left
        if errors:
            self._bound("order_retries", {"chunk": k, "repaired": errors})
        return dict(resp.value)  # anything still out of order is repaired by the ledger's merge

    def _ledger_bounds(self, k: int, answer: dict[str, Any]) -> None:
        lim = self.limits
        new, updates = answer.get("new_claims") or [], answer.get("updates") or []
        if len(new) >= lim.claims_per_chunk:
            self._bound("claims_per_chunk", k)
        if updates and len(updates) >= lim.updates_per_chunk:
            self._bound("updates_per_chunk", k)
        for c in new:
            self._text_bound("claim_chars", c["text"], lim.claim_chars, k)
        if any(len(x["uses"]) >= lim.uses_per_claim for x in [*new, *updates]):
            self._bound("uses_per_claim", k)

    # ------------------------------------------------------------------ shared run text
    def _shared_run(self, spans: list[Span]) -> tuple[str, int, list[Cut]]:
        """The whole run as every support and tracer prompt (and a one-chunk ledger) starts with it,
        fitted for the longest prompt any of them can be (claims, passages and answers at their
        bounds); with the steps it cuts."""
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
            SupportCheck(c.id, "CONFLICTING", "DIRECT", "x" * lim.evidence_chars, n - 1, False, None, "x" * lim.reason_chars, "x" * 90)
            for c in checked
        ]
        longest = checked[0]
        passages = "x" * self.opts.excerpt_chars

        def view(budget: int) -> tuple[str, str]:
            run, cuts = self.view.view(spans, budget)
            return run, cut_note(cuts)

        def ledger(budget: int) -> Messages:
            return self._ledger_prompt(*view(budget), 0, n - 1, [])

        def support(budget: int) -> Messages:
            run, note = view(budget)
            return self._user("drift/support.j2", note, run=run, claim=longest, n_spans=n, limits=lim, passages=passages)

        max_marks, ledger_tokens = self._tracer_ledger_room(n, {c.id: c.introduced for c in checked}, record=False)

        def tracer(budget: int) -> Messages:
            run, note = view(budget)
            if self.opts.tracer == "ledger":
                items = [{"claim": c, "check": w, "passages": passages} for c, w in zip(checked, worst)]
                return self._user("drift/tracer_ledger.j2", note, run=run, n_spans=n, limits=lim, items=items, max_marks=max_marks)
            return self._user(
                "drift/tracer_claim.j2", note, run=run, claim=longest, check=worst[0], n_spans=n, limits=lim, passages=passages
            )

        tracer_tokens = ledger_tokens if self.opts.tracer == "ledger" else tracer_max_tokens(n, lim.marks_per_claim)
        budget = min(
            self._fit(support, self.char_budget, support_max_tokens(n, lim)),
            self._fit(tracer, self.char_budget, tracer_tokens),
            self._fit(ledger, self.char_budget, ledger_max_tokens(n - 1, [], lim)),
        )
        run, cuts = self.view.view(spans, budget)
        if cuts:
            self._bound("run_text_cut", {"steps": len(cuts), "chars_left_out": sum(c.total - c.shown for c in cuts)})
        return run, budget, cuts

    def _passages(self, claim: Claim, cuts: list[Cut], room: int) -> str:
        found = relevant_passages(self.view, cuts, claim.text, room)
        if found.left_out:
            self._bound("excerpt_chars", {"claim": claim.id, "passages_left_out": found.left_out})
        return render_passages(self.view, found.passages)

    # ------------------------------------------------------------------ 3. Support Seeker
    def _seek_support(self, spans: list[Span], checked: list[Claim], shared: tuple[str, int, list[Cut]]) -> Stage[list[SupportCheck]]:
        n = len(spans)
        run, _, cuts = shared
        note = cut_note(cuts)
        grammar = support_grammar(n, self.limits)
        sampling = self._sampling(support_max_tokens(n, self.limits), "check")
        requests = []
        for c in checked:
            passages = self._passages(c, cuts, self.opts.excerpt_chars)
            messages = self._user("drift/support.j2", note, run=run, claim=c, n_spans=n, limits=self.limits, passages=passages)
            requests.append(self.ctx.request(f"drift/support/{c.id}", messages, grammar, sampling))
        responses = yield from self._ask("support", requests)
        checks = [check_from_answer(c, r.value, self.view, spans, self.opts.verify_evidence) for c, r in zip(checked, responses)]
        for k in checks:
            self._text_bound("evidence_chars", k.evidence, self.limits.evidence_chars, k.claim)
            self._text_bound("reason_chars", k.reason, self.limits.reason_chars, k.claim)
        return checks

    # ------------------------------------------------------------------ 4. Dependency Tracer
    def _tracer_ledger_room(self, n: int, ids: dict[str, int], record: bool = True) -> tuple[int, int]:
        """(marks allowed in all, answer tokens) for the one-call tracer: `marks_per_claim` per
        claim, capped so the answer takes at most a quarter of the window."""
        id_chars = max(len(i) for i in ids) + 2
        marks = self.limits.marks_per_claim * len(ids)
        window = self.ctx.max_model_len
        while window and marks > len(ids) and tracer_max_tokens(n, marks, len(ids), id_chars) > window // TRACER_LEDGER_SHARE:
            marks = max(len(ids), marks * 3 // 4)
        if record and marks < self.limits.marks_per_claim * len(ids):
            self._bound("tracer_ledger_marks", marks)
        return marks, tracer_max_tokens(n, marks, len(ids), id_chars)

    def _trace_dependencies(
        self, spans: list[Span], risky: list[tuple[Claim, SupportCheck]], shared: tuple[str, int, list[Cut]]
    ) -> Stage[tuple[list[str], list[Mark]]]:
        """(harmful claim ids, marks) by the configured tracer mode."""
        if self.opts.tracer == "ledger":
            return (yield from self._trace_over_ledger(len(spans), risky, shared))
        return (yield from self._trace_per_claim(len(spans), risky, shared))

    def _trace_over_ledger(
        self, n: int, risky: list[tuple[Claim, SupportCheck]], shared: tuple[str, int, list[Cut]]
    ) -> Stage[tuple[list[str], list[Mark]]]:
        run, _, cuts = shared
        ids = {c.id: c.introduced for c, _ in risky}
        max_marks, max_tokens = self._tracer_ledger_room(n, ids)
        room = self.opts.excerpt_chars // len(risky)
        items = [{"claim": c, "check": k, "passages": self._passages(c, cuts, room)} for c, k in risky]
        messages = self._user(
            "drift/tracer_ledger.j2", cut_note(cuts), run=run, n_spans=n, limits=self.limits, items=items, max_marks=max_marks
        )
        req = self.ctx.request(
            "drift/tracer/ledger", messages, tracer_ledger_grammar(ids, n, max_marks), self._sampling(max_tokens, "tracer")
        )
        (resp,) = yield from self._ask("tracer", [req])
        if len(resp.value["marks"]) >= max_marks:
            self._bound("tracer_ledger_marks", "reached")
        harmful, marks = marks_for_ledger([c for c, _ in risky], resp.value)
        return sorted(harmful, key=lambda i: int(i[1:])), marks

    def _trace_per_claim(
        self, n: int, risky: list[tuple[Claim, SupportCheck]], shared: tuple[str, int, list[Cut]]
    ) -> Stage[tuple[list[str], list[Mark]]]:
        run, _, cuts = shared
        note = cut_note(cuts)
        sampling = self._sampling(tracer_max_tokens(n, self.limits.marks_per_claim), "tracer")
        requests = []
        for c, k in risky:
            passages = self._passages(c, cuts, self.opts.excerpt_chars)
            messages = self._user(
                "drift/tracer_claim.j2", note, run=run, claim=c, check=k, n_spans=n, limits=self.limits, passages=passages
            )
            requests.append(
                self.ctx.request(f"drift/tracer/{c.id}", messages, tracer_claim_grammar(c.introduced, n, self.limits), sampling)
            )
        responses = yield from self._ask("tracer", requests)
        harmful_ids: list[str] = []
        marks: list[Mark] = []
        for (c, _), r in zip(risky, responses):
            if len(r.value["marks"]) >= self.limits.marks_per_claim:
                self._bound("marks_per_claim", c.id)
            harmful, found = marks_for_claim(c, r.value)
            if harmful:
                harmful_ids.append(c.id)
            marks += found
        return harmful_ids, marks

    # ------------------------------------------------------------------ the program
    def run(self) -> Program:
        spans, segment_chunks = yield from self._segment()
        shared = self._shared_run(spans)
        ledger, ledger_chunks = yield from self._keep_claims(spans, shared)
        committed = ledger.committed()  # the riskiest first
        checked = committed[: self.opts.max_checked_claims]
        unchecked = [c.id for c in committed[self.opts.max_checked_claims :]]
        if unchecked:
            self._bound("max_checked_claims", {"unchecked": unchecked})
        checks: list[SupportCheck] = []
        harmful: list[str] = []
        marks: list[Mark] = []
        if checked:
            checks = yield from self._seek_support(spans, checked, shared)
            risky = [(c, k) for c, k in zip(checked, checks) if k.risky]
            if risky:
                harmful, marks = yield from self._trace_dependencies(spans, risky, shared)
        details: dict[str, Any] = {
            "spans": [list(s.as_range()) for s in spans],
            "segmented": self.opts.segment,
            "segment_chunks": segment_chunks,
            "ledger_chunks": ledger_chunks,
            "ledger_retries": self.ledger_retries,
            "ledger": ledger.as_list(),
            "support": [k.as_dict() for k in checks],
            "unchecked_claims": unchecked,
            "tracer": {"mode": self.opts.tracer, "harmful": harmful, "marks": [m.as_dict() for m in marks]},
            "run_char_budget": shared[1],
            "run_cut_steps": [{"step": c.step, "shown": c.shown, "total": c.total} for c in shared[2]],
            "budget_note": self.budget_note,
            "bounds_hit": self.bounds,
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
            claims = list({c.id: c for c in there if c is not None}.values())
            step = pick_step(self.view, first, [c.text for c in claims])
            details["first_error_span"] = first.id
            details["no_error_span"] = None
            details["step_is_fallback"] = False
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
            details["no_error_span"] = (
                f"{reason}: no error span (the prediction is empty); the step where the final answer is committed is answered as a fallback"
            )
            details["step_is_fallback"] = True
            details["fallback_span"] = span.id
            predicted = []
            reasoning = f"No error span found ({reason}); answering step {step} in span {span.id}, where the final answer is committed, as a fallback."
            ordered = risky
        evidence = list(dict.fromkeys(by_claim[c].evidence for c in ordered if c in by_claim and by_claim[c].evidence_verbatim))
        return self.ctx.diagnosis(METHOD, step=step, reasoning=reasoning, evidence=evidence, spans=predicted, details=details)
