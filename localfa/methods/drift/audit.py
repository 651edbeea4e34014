"""One DRIFT audit of one trace, as a method program (a generator of request batches).

Stages, each one round of requests (the runner fills batches across traces):

1. segment (option): every chunk of steps in ONE batch; the answers become contiguous spans.
2. Claim Keeper: the spans in chunks sized by tokens alone (what the window holds next to the
   ledger so far, the instructions and the answer), one call per chunk, in order, the whole
   ledger carried forward compactly and merged (sequential by nature). An answer whose spans
   break introduced <= consequential <= use is asked again once, then repaired.
3. Support Seeker: one request per committed claim (the riskiest first when there are more than
   `max_checked_claims`), ALL in one batch; every prompt is the same system prompt + task +
   run text + instructions, the claim and its passages last, so the batch shares one cached
   prefix.
4. Dependency Tracer: for risky (not DIRECT) claims, one request per claim in one batch (each
   with the ledger entries its claim depends on), or one request over all of them
   (``tracer=ledger``), with the same run text as stage 3 where its prompts fit beside it.

Each stage's run text is sized for the prompt that stage really sends (its real claims, passages
within `excerpt_chars`, its answer reserved in tokens), so a run that fits the window is shown
uncut to every stage; ``details["run_text"]`` says what each stage was shown. The prediction is
the set of marked spans (empty when nothing harmful was found: the paper's Ê = ∅, with a
fallback step still answered); see `verdict` for the first error, step and agent. Every bound
the audit hits is recorded in ``details["bounds_hit"]``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Generator, TypeVar

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
from localfa.methods.baselines import budget_chars, chars_per_token, fit_char_budget, shorten
from localfa.methods.drift.excerpts import Passage, own_steps, relevant_passages, render_passages
from localfa.methods.drift.ledger import Claim, Ledger, ledger_block
from localfa.methods.drift.options import DriftOptions, SamplingStage
from localfa.methods.drift.spans import Cut, Span, SpanView, cut_note, one_span_per_step, spans_from_ranges, take_chunk
from localfa.methods.drift.support import SupportCheck, check_from_answer
from localfa.methods.drift.tracer import Mark, consequences, marks_for_claim, marks_for_ledger
from localfa.methods.drift.verdict import METHOD, diagnose
from localfa.templates import render

STAGES = ("segment", "ledger", "support", "tracer")
TASK_CHARS = 1500
MARGIN_TOKENS = 64  # chat template and tokenizer drift on top of what is counted
DEFAULT_CHUNK_TOKENS = 3000  # when the engine does not say its window
TRACER_LEDGER_SHARE = 4  # a tracer answer may take at most 1/4 of the window
LEDGER_UPDATE_TOKENS = 120  # the ledger prompt's "updates" instruction, shown once there is a ledger
DEPENDENCY_LINES = 8  # ledger entries a per-claim tracer prompt shows as what its claim depends on
Messages = list[dict[str, str]]
T = TypeVar("T")
Stage = Generator[list[Request], list[Response], T]  # one stage of the program, returning T
__all__ = ["METHOD", "STAGES", "Audit", "RunText"]


def room_text(chars: int) -> str:
    """A stand-in for `chars` characters of passages when a prompt is sized: short words, so it
    counts as many tokens as the densest real text would (a run of one letter counts far fewer)."""
    return "x " * (chars // 2)


@dataclass(frozen=True)
class RunText:
    """The run as one stage's prompts show it: the text, the character budget it was fitted to,
    and the steps it shortened."""

    text: str
    budget: int
    cuts: list[Cut]

    @property
    def note(self) -> str:
        return cut_note(self.cuts)

    def as_details(self) -> dict[str, Any]:
        return {"chars": len(self.text), "budget": self.budget, "cut_steps": [c.step for c in self.cuts]}


def _commits(answer: dict[str, Any]) -> bool:
    """Whether a keeper answer commits to a claim (a new one consequential or finalized, or an update)."""
    return any(c.get("status") in ("consequential", "finalized") for c in answer.get("new_claims") or []) or bool(answer.get("updates"))


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
        self.cpt = chars_per_token(ctx)
        self.char_budget, self.budget_note = budget_chars(ctx, None)
        self.bounds: dict[str, list[Any]] = {}
        task = (trace.task or "(not recorded)").strip()
        self.task = shorten(task, TASK_CHARS)
        if len(self.task) < len(task):
            self._bound("task_chars", len(task))
        self.system = {"role": "system", "content": render("drift/system.j2")}
        self.cost = {stage: Usage() for stage in STAGES}
        self.ledger_retries: list[dict[str, Any]] = []
        self.ledger_reasked: dict[str, Any] | None = None
        self.run_text: dict[str, dict[str, Any]] = {}
        self._ledger_base: int | None = None
        self._prompt_tokens: int | None = None  # the one-call tracer's prompt with the support run, when uncut
        self.limits = self._fit_limits(opts.limits)
        self.spans: list[Span] = []

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
        while marks > 1 and tracer_max_tokens(self.n_steps, marks, limits.reason_chars) > window // TRACER_LEDGER_SHARE:
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
        content = render(template, task=self.task, cut_note=cut_note, names_legend=self.view.names.legend, **variables)
        return [self.system, {"role": "user", "content": content}]

    def _fit(self, prompt_for: Callable[[int], Messages], budget: int, max_tokens: int) -> int:
        return fit_char_budget(self.ctx, budget, prompt_for, max_tokens, margin=MARGIN_TOKENS)

    def _sampling(self, max_tokens: int, stage: SamplingStage) -> Sampling:
        return self.opts.sampling(max_tokens, stage)

    def _ask(self, stage: str, requests: list[Request]) -> Stage[list[Response]]:
        responses: list[Response] = yield requests
        for r in responses:
            self.cost[stage].add(r.usage)
            if r.retried:  # its answer ran into max_tokens and was asked again with more room: two calls
                self._bound("max_tokens_retry", {"stage": stage, "key": r.key})
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
        chunks: list[list[Span]] = []
        capped: list[int] = []
        start = 0
        while start < len(unit):
            end, ended = take_chunk(self.view, unit, start, chars, self.opts.segment_max_steps)
            if ended == "chunk_max_spans":
                capped.append(len(chunks))
            chunks.append(unit[start:end])
            start = end
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
        return self._user(
            "drift/ledger.j2",
            note,
            claims=shown,
            ledger=block,
            run=run,
            lo=lo,
            hi=hi,
            limits=self.limits,
            guidance=self.opts.keeper_guidance,
        )

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

    def _keep_claims(self, spans: list[Span]) -> Stage[tuple[Ledger, list[dict[str, Any]]]]:
        """The ledger, chunk by chunk, each chunk as many spans as its token budget holds. A trace
        read whole and uncut in one chunk is shown exactly as the support checks show it, so they
        reuse the ledger call's cached prefix."""
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
            messages, cuts = self._fitted_ledger(chunk, shown, chars, max_tokens)
            grammar = ledger_grammar(lo, hi, ids, self.limits)
            answer = yield from self._ledger_call(k, messages, grammar, max_tokens)
            if end == n and self.opts.keeper_reask and not ledger.committed() and not _commits(answer):
                answer = yield from self._reask_keeper(k, messages, grammar, max_tokens, answer)
            self._ledger_bounds(k, answer)
            ledger.merge(answer, chunk=k)
            chunks.append({"spans": [lo, hi], "ended": ended, "chunk_tokens": tokens, "cut_steps": [c.step for c in cuts]})
            if ended == "chunk_max_spans":
                self._bound("chunk_max_spans", k)
            start, k = end, k + 1
        cut = [step for c in chunks for step in c["cut_steps"]]
        self.run_text["ledger"] = {"chunks": len(chunks), "cut_steps": cut}
        if cut:
            self._bound("run_text_cut", {"stage": "ledger", "steps": len(cut)})
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

    def _reask_keeper(self, k: int, messages: Messages, grammar: Any, max_tokens: int, first: dict[str, Any]) -> Stage[dict[str, Any]]:
        """The last chunk asked once more when the whole ledger holds no committed claim (issue 51's
        second look: a run that failed rests on some claim), before any fallback; the first answer
        stands when the second commits to nothing either."""
        note = render("drift/ledger_again.j2")
        again = [messages[0], {"role": "user", "content": messages[1]["content"] + "\n\n" + note}]
        sampling = self._sampling(max_tokens, "keeper")
        (resp,) = yield from self._ask("ledger", [self.ctx.request(f"drift/ledger/{k}/again", again, grammar, sampling)])
        answer = dict(resp.value)
        self.ledger_reasked = {"chunk": k, "committed_after": _commits(answer)}
        if ledger_order_errors(answer):
            self._bound("order_retries", {"chunk": k, "reask": True})
        return answer if _commits(answer) else first

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

    # ------------------------------------------------------------------ run text per stage
    def _fit_run(self, stage: str, spans: list[Span], prompt_with: Callable[[RunText], Messages], max_tokens: int, start: int) -> RunText:
        """The run text for `stage`: the largest budget (from `start`) at which the stage's largest
        real prompt, `prompt_with(run)`, fits the window beside its answer; recorded per stage."""

        def at(budget: int) -> RunText:
            text, cuts = self.view.view(spans, budget)
            return RunText(text, budget, cuts)

        run = at(self._fit(lambda budget: prompt_with(at(budget)), start, max_tokens))
        self.run_text[stage] = run.as_details()
        if run.cuts:
            self._bound(
                "run_text_cut", {"stage": stage, "steps": len(run.cuts), "chars_left_out": sum(c.total - c.shown for c in run.cuts)}
            )
        return run

    def _support_run(self, spans: list[Span], checked: list[Claim]) -> RunText:
        """Run text for the support checks, sized for the longest claim they check with passages
        at their bound."""
        longest = max(checked, key=lambda c: len(c.text) + 4 * len(c.uses))
        passages = room_text(self.opts.excerpt_chars)
        n = len(spans)

        def prompt_with(run: RunText) -> Messages:
            return self._support_prompt(run, longest, n, passages)

        return self._fit_run("support", spans, prompt_with, support_max_tokens(n, self.limits), self.char_budget)

    def _tracer_run(self, spans: list[Span], ledger: Ledger, risky: list[tuple[Claim, SupportCheck]], support: RunText) -> RunText:
        """Run text for the tracer: the support checks' own (their cached prefix) where the
        tracer's largest real prompt fits beside it, else cut further."""
        n = len(spans)
        if self.opts.tracer != "per-claim":
            ids = {c.id: c.introduced for c, _ in risky}
            room = room_text(self._item_room(len(risky)))

            def prompt_with(run: RunText) -> Messages:
                items = [{"claim": c, "check": k, "passages": room} for c, k in risky]
                return self._tracer_ledger_prompt(run, n, items, self.limits.marks_per_claim * len(ids))

            if not support.cuts and self.ctx.max_model_len:
                self._prompt_tokens = self._tokens(prompt_with(support))
            max_marks, max_tokens = self._tracer_ledger_room(n, ids, record=False)

        else:
            sized = [(c, k, self._dependencies(ledger, c, record=False)) for c, k in risky]
            claim, check, deps = max(
                sized, key=lambda x: len(x[0].text) + len(x[1].evidence) + len(x[1].reason) + len(x[2]) + 4 * len(x[0].uses)
            )
            passages = room_text(self.opts.excerpt_chars)
            max_tokens = tracer_max_tokens(n, self.limits.marks_per_claim, self.limits.reason_chars)

            def prompt_with(run: RunText) -> Messages:
                return self._tracer_claim_prompt(run, n, claim, check, deps, passages)

        return self._fit_run("tracer", spans, prompt_with, max_tokens, support.budget)

    def _item_room(self, n_claims: int) -> int:
        """Packet room per claim in the one-call tracer: a whole packet each with `own_spans`
        (the claim's own spans are its evidence), else the room shared among the claims."""
        return self.opts.excerpt_chars if self.opts.own_spans else self.opts.excerpt_chars // n_claims

    def _passages(self, claim: Claim, cuts: list[Cut], room: int) -> str:
        """The claim's evidence packet within `room` characters: its own cut steps whole (with
        `own_spans`), then the cut steps' hidden parts that mention its terms."""
        own: list[Passage] = []
        used = 0
        if self.opts.own_spans and cuts:
            at = [claim.introduced, claim.consequential, *claim.uses]
            steps = [i for sid in dict.fromkeys(s for s in at if s is not None) if sid < len(self.spans) for i in self.spans[sid].steps]
            own, used = own_steps(self.view, cuts, steps, room)
        found = relevant_passages(self.view, cuts, claim.text, room - used, frozenset(p.step for p in own))
        if found.left_out:
            self._bound("excerpt_chars", {"claim": claim.id, "passages_left_out": found.left_out})
        return render_passages(self.view, sorted([*own, *found.passages], key=lambda p: (p.step, p.start)))

    # ------------------------------------------------------------------ 3. Support Seeker
    def _support_prompt(self, run: RunText, claim: Claim, n: int, passages: str) -> Messages:
        return self._user("drift/support.j2", run.note, run=run.text, claim=claim, n_spans=n, limits=self.limits, passages=passages)

    def _seek_support(self, spans: list[Span], checked: list[Claim], run: RunText) -> Stage[list[SupportCheck]]:
        n = len(spans)
        grammar = support_grammar(n, self.limits)
        sampling = self._sampling(support_max_tokens(n, self.limits), "check")
        requests = []
        for c in checked:
            messages = self._support_prompt(run, c, n, self._passages(c, run.cuts, self.opts.excerpt_chars))
            requests.append(self.ctx.request(f"drift/support/{c.id}", messages, grammar, sampling))
        responses = yield from self._ask("support", requests)
        checks = [check_from_answer(c, r.value, self.view, spans, self.opts.verify_evidence) for c, r in zip(checked, responses)]
        for k in checks:
            self._text_bound("evidence_chars", k.evidence, self.limits.evidence_chars, k.claim)
            self._text_bound("reason_chars", k.reason, self.limits.reason_chars, k.claim)
        return checks

    # ------------------------------------------------------------------ 4. Dependency Tracer
    def _dependencies(self, ledger: Ledger, claim: Claim, record: bool = True) -> str:
        """The ledger entries `claim` depends on (the paper's dependency view): earlier entries
        used, relied on or made in the span where it was made, the nearest `DEPENDENCY_LINES`."""
        at = claim.introduced
        found = [
            c
            for c in ledger.claims
            if c.id != claim.id
            and c.introduced <= at
            and (at in c.uses or c.consequential == at or (c.introduced == at and c.id < claim.id))
        ]
        if record and len(found) > DEPENDENCY_LINES:
            self._bound("dependency_lines", {"claim": claim.id, "left_out": len(found) - DEPENDENCY_LINES})
        return ledger_block(found[-DEPENDENCY_LINES:]) if found else ""

    def _tracer_claim_prompt(self, run: RunText, n: int, claim: Claim, check: SupportCheck, deps: str, passages: str) -> Messages:
        return self._user(
            "drift/tracer_claim.j2",
            run.note,
            run=run.text,
            claim=claim,
            check=check,
            dependencies=deps,
            n_spans=n,
            limits=self.limits,
            passages=passages,
        )

    def _tracer_ledger_prompt(self, run: RunText, n: int, items: list[dict[str, Any]], max_marks: int) -> Messages:
        joint = self.opts.tracer == "joint"
        return self._user(
            "drift/tracer_ledger.j2", run.note, run=run.text, n_spans=n, limits=self.limits, items=items, max_marks=max_marks, joint=joint
        )

    def _tracer_ledger_room(self, n: int, ids: dict[str, int], record: bool = True) -> tuple[int, int]:
        """(marks allowed in all, answer tokens) for the one-call tracer: `marks_per_claim` per
        claim, capped so the answer takes at most a quarter of the window, and so it fits beside
        the prompt with the run uncut where the support checks showed it uncut (`_prompt_tokens`:
        a whole run is worth more than room for marks on every claim)."""
        id_chars = max(len(i) for i in ids) + 2
        reason = self.limits.reason_chars
        marks = self.limits.marks_per_claim * len(ids)
        window = self.ctx.max_model_len or 0

        def too_big(marks: int) -> bool:
            answer = tracer_max_tokens(n, marks, reason, len(ids), id_chars)
            beside = self._prompt_tokens is not None and self._prompt_tokens + answer > int(window * 0.97) - MARGIN_TOKENS
            return answer > window // TRACER_LEDGER_SHARE or beside

        while window and marks > len(ids) and too_big(marks):
            marks = max(len(ids), marks * 3 // 4)
        if record and marks < self.limits.marks_per_claim * len(ids):
            self._bound("tracer_ledger_marks", marks)
        return marks, tracer_max_tokens(n, marks, reason, len(ids), id_chars)

    def _trace_dependencies(
        self, spans: list[Span], ledger: Ledger, risky: list[tuple[Claim, SupportCheck]], run: RunText
    ) -> Stage[tuple[list[str], list[Mark], dict[str, str]]]:
        """(harmful claim ids, marks, the tracer's reasons) by the configured tracer mode."""
        if self.opts.tracer != "per-claim":
            return (yield from self._trace_over_ledger(len(spans), risky, run))
        return (yield from self._trace_per_claim(len(spans), ledger, risky, run))

    def _trace_over_ledger(
        self, n: int, risky: list[tuple[Claim, SupportCheck]], run: RunText
    ) -> Stage[tuple[list[str], list[Mark], dict[str, str]]]:
        ids = {c.id: c.introduced for c, _ in risky}
        max_marks, max_tokens = self._tracer_ledger_room(n, ids)
        room = self._item_room(len(risky))
        items = [{"claim": c, "check": k, "passages": self._passages(c, run.cuts, room)} for c, k in risky]
        messages = self._tracer_ledger_prompt(run, n, items, max_marks)
        grammar = tracer_ledger_grammar(ids, n, max_marks, self.limits)
        (resp,) = yield from self._ask(
            "tracer", [self.ctx.request(f"drift/tracer/{self.opts.tracer}", messages, grammar, self._sampling(max_tokens, "tracer"))]
        )
        if len(resp.value["marks"]) >= max_marks:
            self._bound("tracer_ledger_marks", "reached")
        self._text_bound("reason_chars", resp.value["reason"], self.limits.reason_chars, "tracer")
        harmful, marks = marks_for_ledger([c for c, _ in risky], resp.value)
        return sorted(harmful, key=lambda i: int(i[1:])), marks, {"all": resp.value["reason"]}

    def _trace_per_claim(
        self, n: int, ledger: Ledger, risky: list[tuple[Claim, SupportCheck]], run: RunText
    ) -> Stage[tuple[list[str], list[Mark], dict[str, str]]]:
        sampling = self._sampling(tracer_max_tokens(n, self.limits.marks_per_claim, self.limits.reason_chars), "tracer")
        requests = []
        for c, k in risky:
            passages = self._passages(c, run.cuts, self.opts.excerpt_chars)
            messages = self._tracer_claim_prompt(run, n, c, k, self._dependencies(ledger, c), passages)
            requests.append(
                self.ctx.request(f"drift/tracer/{c.id}", messages, tracer_claim_grammar(c.introduced, n, self.limits), sampling)
            )
        responses = yield from self._ask("tracer", requests)
        harmful_ids: list[str] = []
        marks: list[Mark] = []
        reasons: dict[str, str] = {}
        for (c, _), r in zip(risky, responses):
            if len(r.value["marks"]) >= self.limits.marks_per_claim:
                self._bound("marks_per_claim", c.id)
            self._text_bound("reason_chars", r.value["reason"], self.limits.reason_chars, c.id)
            reasons[c.id] = r.value["reason"]
            harmful, found = marks_for_claim(c, r.value)
            if harmful:
                harmful_ids.append(c.id)
            marks += found
        return harmful_ids, marks, reasons

    # ------------------------------------------------------------------ the program
    def run(self) -> Program:
        spans, segment_chunks = yield from self._segment()
        self.spans = spans
        ledger, ledger_chunks = yield from self._keep_claims(spans)
        committed = ledger.committed()  # the riskiest first
        checked = committed[: self.opts.max_checked_claims]
        unchecked = [c.id for c in committed[self.opts.max_checked_claims :]]
        if unchecked:
            self._bound("max_checked_claims", {"unchecked": unchecked})
        checks: list[SupportCheck] = []
        harmful: list[str] = []
        marks: list[Mark] = []
        reasons: dict[str, str] = {}
        if checked:
            support_run = self._support_run(spans, checked)
            checks = yield from self._seek_support(spans, checked, support_run)
            # the joint tracer (the authors') sees every checked claim and traces even with none risky
            risky = [(c, k) for c, k in zip(checked, checks) if k.risky or self.opts.tracer == "joint"]
            if risky:
                tracer_run = self._tracer_run(spans, ledger, risky, support_run)
                harmful, marks, reasons = yield from self._trace_dependencies(spans, ledger, risky, tracer_run)
        details: dict[str, Any] = {
            "spans": [list(s.as_range()) for s in spans],
            "segmented": self.opts.segment,
            "segment_chunks": segment_chunks,
            "ledger_chunks": ledger_chunks,
            "ledger_retries": self.ledger_retries,
            "ledger_reasked": self.ledger_reasked,
            "ledger": ledger.as_list(),
            "support": [k.as_dict() for k in checks],
            "unchecked_claims": unchecked,
            "tracer": {
                "mode": self.opts.tracer,
                "harmful": harmful,
                "marks": [m.as_dict() for m in marks],
                "consequences": consequences(marks),
                "reasons": reasons,
            },
            "run_text": self.run_text,
            "budget_note": self.budget_note,
            "bounds_hit": self.bounds,
            "limits_hit": self.hit.as_details(),
            "cost": {s: u.as_dict() for s, u in self.cost.items()},
        }
        return diagnose(self.ctx, self.view, spans, ledger, checked, checks, marks, details, late=self.opts.late_endpoints)
