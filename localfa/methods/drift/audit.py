"""One DRIFT audit of one trace, as a method program (a generator of request batches).

Stages, each one round of requests (the runner fills batches across traces):

1. segment (option): every chunk of steps in ONE batch; the answers become contiguous spans.
2. Claim Keeper: the spans in chunks sized by tokens alone (what the window holds next to the
   ledger so far, the instructions and the answer), one call per chunk, in order, the whole
   ledger carried forward compactly and merged (sequential by nature). An answer whose spans
   break introduced <= consequential <= use is asked again once, then repaired. The
   ledger shown takes at most a quarter of the window, so a chunk always holds run text.
3. Support Seeker: the committed claims (the riskiest first, at most `max_checked_claims`), one
   call over up to `claims_per_call` of them (the authors' shape), all calls in one batch; each
   claim comes with its evidence packet (`packets`: its own spans whole, then the passages that
   mention it, bounded in tokens), never the whole run.
4. Dependency Tracer: the joint tracer over every checked claim (`claims_per_call` a call), or
   one request per risky claim, or one over them all (``tracer=ledger``); it reads the whole run
   where it fits the window (the keeper's cached prefix), else the claims' packets.
5. Confirmation (option): one more call on the chosen first error.

So no prompt grows with the run beyond the window, and prompt tokens grow with the run, not with
claims times run; ``details["run_text"]`` says what each stage read. The prediction is
the set of marked spans (empty when nothing harmful was found: the paper's Ê = ∅, with a
fallback step still answered); see `verdict` for the first error, step and agent. Every bound
the audit hits is recorded in ``details["bounds_hit"]``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Generator, TypeVar

from localfa.engine.types import Request, Response, Sampling, Usage
from localfa.grammars.drift import (
    DriftLimits,
    confirm_grammar,
    confirm_max_tokens,
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
from localfa.methods.drift.ledger import Claim, Ledger, ledger_block
from localfa.methods.drift.options import DriftOptions, SamplingStage
from localfa.methods.drift.packets import WHOLE_WITHOUT_WINDOW, Packer, Packet, PacketBudget
from localfa.methods.drift.spans import Cut, Span, SpanView, cut_note, one_span_per_step, spans_from_ranges, step_text, take_chunk
from localfa.methods.drift.support import SupportCheck, check_from_answer
from localfa.methods.drift.tracer import Mark, consequences, error_spans, marks_for_claim, marks_for_ledger
from localfa.methods.drift.verdict import METHOD, diagnose
from localfa.methods.final_output import final_output
from localfa.templates import render
from localfa.tokens import approx_tokens

STAGES = ("segment", "ledger", "support", "tracer", "confirm")
TASK_CHARS = 1500
MARGIN_TOKENS = 64  # chat template and tokenizer drift on top of what is counted
DEFAULT_CHUNK_TOKENS = 3000  # when the engine does not say its window
TRACER_LEDGER_SHARE = 4  # a tracer answer may take at most 1/4 of the window
LEDGER_UPDATE_TOKENS = 120  # the ledger prompt's "updates" instruction, shown once there is a ledger
LEDGER_SHARE = 4  # the ledger a keeper chunk is shown takes at most 1/4 of the window
DEPENDENCY_LINES = 8  # ledger entries a per-claim tracer prompt shows as what its claim depends on
Messages = list[dict[str, str]]
T = TypeVar("T")
Stage = Generator[list[Request], list[Response], T]  # one stage of the program, returning T
__all__ = ["METHOD", "STAGES", "Audit"]


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
        self.final, self.final_from = final_output(trace, TASK_CHARS, step_text)  # beside every packet
        self._text_bound("final_chars", self.final, TASK_CHARS, self.final_from)
        self.system = {"role": "system", "content": render("drift/system.j2")}
        self.cost = {stage: Usage() for stage in STAGES}
        self.ledger_retries: list[dict[str, Any]] = []
        self.ledger_reasked: dict[str, Any] | None = None
        self.run_text: dict[str, dict[str, Any]] = {}
        self._ledger_base: int | None = None
        self._line_tokens: dict[str, int] = {}
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
        variables.setdefault("final", "")
        variables.setdefault("n_spans", len(self.spans) or self.n_steps)  # the keeper sizes its prompt with no run
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
        read whole and uncut in one chunk is shown exactly as the tracer shows it, so the tracer
        reuses the ledger call's cached prefix."""
        ledger = Ledger()
        chunks: list[dict[str, Any]] = []
        n, start, k = len(spans), 0, 0
        while start < n:
            shown = self._shown_ledger(ledger, k)
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

    def _shown_ledger(self, ledger: Ledger, k: int) -> list[Claim]:
        """The ledger entries chunk `k` is shown (and may update): all of them, or on a run so long
        that they would crowd out its spans, the newest that fit a `LEDGER_SHARE` of the window
        (recorded); so a chunk always holds run text, at any length."""
        window = self.ctx.max_model_len
        if not window or not ledger.claims:
            return list(ledger.claims)
        room, used, keep = window // LEDGER_SHARE, 0, 0
        for c in reversed(ledger.claims):
            line = c.line()
            cost = self._line_tokens.get(line)
            if cost is None:
                cost = self._line_tokens[line] = self._tokens([{"content": line}]) - 7  # one line, no message overhead
            if used + cost > room:
                break
            used, keep = used + cost, keep + 1
        if keep < len(ledger.claims):
            self._bound("ledger_shown", {"chunk": k, "left_out": len(ledger.claims) - keep})
        return ledger.claims[len(ledger.claims) - keep :]

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

    # ------------------------------------------------------------------ evidence packets
    def _packet_tokens(self, n_claims: int, fixed: int, answer: int, stage: str) -> PacketBudget:
        """The token budgets of each of `n_claims` packets in one prompt whose other text takes
        `fixed` tokens: `packet_tokens`, lowered where the window cannot hold them all (recorded),
        and, with `claim_spans_whole`, the rest of the window's share of each claim as room for its
        defining spans (no window: as much as they need)."""
        window = self.ctx.max_model_len
        budget = self.opts.packet_tokens
        whole = WHOLE_WITHOUT_WINDOW if self.opts.claim_spans_whole else 0
        if window:
            room = int(window * 0.97) - MARGIN_TOKENS - fixed - answer
            fits = max(100, room // max(1, n_claims))
            if fits < budget:
                self._bound("window:packet_tokens", {"stage": stage, "tokens": fits})
                budget = fits
            whole = fits - budget if self.opts.claim_spans_whole else 0
        return PacketBudget(budget, whole)

    def _packets(self, claims: list[Claim], budget: PacketBudget, stage: str) -> list[Packet]:
        """One packet per claim for one prompt (a step an earlier packet showed is named, not shown again)."""
        shown: set[int] = set()
        made = [self.packer.packet(c, budget.tokens, shown, budget.whole) for c in claims]
        left = {p.claim: p.left_out for p in made if p.left_out}
        if left:
            self._bound("packet_tokens", {"stage": stage, "passages_left_out": left})
        cut = {p.claim: p.own_cut for c, p in zip(claims, made) if set(p.own_cut) & self.packer.defining_steps(c)}
        if cut:
            self._bound("claim_spans_cut", {"stage": stage, "steps": cut})
        return made

    def _record_packets(self, stage: str, packets: list[Packet], budget: PacketBudget) -> None:
        # every call's packets (per-claim support and tracer pages make several calls a stage)
        shown = self.run_text.setdefault(
            stage, {"shown": "packets", "packet_tokens": budget.tokens, "claim_spans_tokens": budget.whole, "packets": []}
        )
        shown.setdefault("packets", []).extend(p.as_details() for p in packets)

    # ------------------------------------------------------------------ 3. Support Seeker
    def _support_prompt(self, items: list[dict[str, Any]], n: int) -> Messages:
        return self._user("drift/support.j2", "", run="", items=items, n_spans=n, limits=self.limits, **self._final())

    def _final(self) -> dict[str, str]:
        return {"final": self.final, "final_from": self.final_from}

    def _seek_support(self, spans: list[Span], checked: list[Claim]) -> Stage[list[SupportCheck]]:
        """The support checks over evidence packets: one call over every checked claim
        (`support=ledger`, the authors'), or one call per claim in one batch."""
        n = len(spans)
        page = self.opts.claims_per_call if self.opts.support == "ledger" else 1
        groups = [checked[k : k + page] for k in range(0, len(checked), page)]
        size = max(len(g) for g in groups)
        answer = support_max_tokens(n, self.limits, size)
        fixed = self._tokens(self._support_prompt([{"claim": c, "packet": ""} for c in max(groups, key=len)], n))
        budget = self._packet_tokens(size, fixed, answer, "support")
        sampling = self._sampling(answer, "check")
        requests, packets = [], []
        for group in groups:
            made = self._packets(group, budget, "support")
            packets += made
            messages = self._support_prompt([{"claim": c, "packet": p.text} for c, p in zip(group, made)], n)
            key = f"drift/support/ledger/{group[0].id}" if self.opts.support == "ledger" else f"drift/support/{group[0].id}"
            grammar = support_grammar([c.id for c in group], n, self.limits)
            requests.append(self.ctx.request(key, messages, grammar, sampling))
        self._record_packets("support", packets, budget)
        responses = yield from self._ask("support", requests)
        answers = {cid: a for r in responses for cid, a in r.value.items()}
        checks = [check_from_answer(c, answers[c.id], self.view, spans, self.opts.verify_evidence) for c in checked]
        for k in checks:
            self._text_bound("evidence_chars", k.evidence, self.limits.evidence_chars, k.claim)
            self._text_bound("reason_chars", k.reason, self.limits.reason_chars, k.claim)
        return checks

    # ------------------------------------------------------------------ 4. Dependency Tracer
    def _to_trace(self, checked: list[Claim], checks: list[SupportCheck]) -> list[tuple[Claim, SupportCheck]]:
        """The claims the tracer judges: the risky ones, or every checked one under the joint
        tracer (the authors')."""
        return [(c, k) for c, k in zip(checked, checks) if k.risky or self.opts.tracer == "joint"]

    def _whole_run(self, spans: list[Span]) -> str | None:
        """The run uncut, where its text could fit the window at all (else None, never rendered)."""
        window = self.ctx.max_model_len
        if window and self.view.size(spans) > window * self.cpt * 1.1:
            return None
        return self.view.view(spans, None)[0]

    def _tracer_view(
        self, spans: list[Span], claims: list[Claim], prompt_for: Callable[[str, list[str]], Messages], answer: int
    ) -> tuple[str, list[str]]:
        """(run, packets) for the tracer's prompt: the whole run where it fits the window beside
        the claims (every claim's spans and mentions are in it: no packets), else each claim's
        packet alone."""
        window = self.ctx.max_model_len
        run = self._whole_run(spans)
        if run is not None:
            messages = prompt_for(run, [""] * len(claims))
            used = self._tokens(messages)
            if not window or used + answer <= int(window * 0.97) - MARGIN_TOKENS:
                self.run_text["tracer"] = {"shown": "whole run", "tokens": used}
                self._prompt_tokens = used
                return run, [""] * len(claims)
        fixed = self._tokens(prompt_for("", [""] * len(claims)))
        budget = self._packet_tokens(len(claims), fixed, answer, "tracer")
        packets = self._packets(claims, budget, "tracer")
        self._record_packets("tracer", packets, budget)
        return "", [p.text for p in packets]

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

    def _mark_floor(self, claim: Claim) -> int:
        """The earliest span the tracer may mark for `claim`: any span with `early_marks` (it may
        mend a keeper that placed the claim late), else the span the ledger says introduced it."""
        return 0 if self.opts.early_marks else claim.introduced

    def _tracer_claim_prompt(self, run: str, n: int, claim: Claim, check: SupportCheck, deps: str, packet: str) -> Messages:
        return self._user(
            "drift/tracer_claim.j2",
            "",
            run=run,
            claim=claim,
            check=check,
            dependencies=deps,
            n_spans=n,
            limits=self.limits,
            packet=packet,
            early=self.opts.early_marks,
            **self._final(),
        )

    def _tracer_ledger_prompt(self, run: str, n: int, items: list[dict[str, Any]], max_marks: int) -> Messages:
        joint = self.opts.tracer == "joint"
        return self._user(
            "drift/tracer_ledger.j2",
            "",
            run=run,
            n_spans=n,
            limits=self.limits,
            items=items,
            max_marks=max_marks,
            joint=joint,
            early=self.opts.early_marks,
            **self._final(),
        )

    def _tracer_ledger_room(self, n: int, ids: dict[str, int], record: bool = True) -> tuple[int, int]:
        """(marks allowed in all, answer tokens) for the one-call tracer: `marks_per_claim` per
        claim, capped so the answer takes at most a quarter of the window, and so it fits beside
        the prompt with the whole run where that was shown (`_prompt_tokens`: a whole run is worth
        more than room for marks on every claim)."""
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
        self, spans: list[Span], ledger: Ledger, risky: list[tuple[Claim, SupportCheck]]
    ) -> Stage[tuple[list[str], list[Mark], dict[str, str]]]:
        """(harmful claim ids, marks, the tracer's reasons) by the configured tracer mode."""
        if self.opts.tracer != "per-claim":
            return (yield from self._trace_over_ledger(spans, risky))
        return (yield from self._trace_per_claim(spans, ledger, risky))

    def _trace_over_ledger(
        self, spans: list[Span], risky: list[tuple[Claim, SupportCheck]]
    ) -> Stage[tuple[list[str], list[Mark], dict[str, str]]]:
        """The one-call tracer over the claims, `claims_per_call` a call (the authors' at most 8),
        every call in one batch; a run read in many chunks records more claims than one call
        judges, and none is left untraced."""
        per = self.opts.claims_per_call
        pages = [risky[k : k + per] for k in range(0, len(risky), per)]
        made = [self._ledger_page(spans, page, k if len(pages) > 1 else None) for k, page in enumerate(pages)]
        responses = yield from self._ask("tracer", [r for r, _ in made])
        harmful: set[str] = set()
        marks: list[Mark] = []
        reasons: dict[str, str] = {}
        for page, (req, max_marks), resp in zip(pages, made, responses):
            if len(resp.value["marks"]) >= max_marks:
                self._bound("tracer_ledger_marks", "reached")
            self._text_bound("reason_chars", resp.value["reason"], self.limits.reason_chars, "tracer")
            found, page_marks = marks_for_ledger([c for c, _ in page], resp.value)
            harmful |= found
            marks += page_marks
            reasons["all" if len(pages) == 1 else req.key.rsplit("/", 1)[1]] = resp.value["reason"]
        return sorted(harmful, key=lambda i: int(i[1:])), marks, reasons

    def _ledger_page(self, spans: list[Span], page: list[tuple[Claim, SupportCheck]], k: int | None) -> tuple[Request, int]:
        """One one-call tracer request over `page` (the k-th of several, None when alone), and the
        marks it allows."""
        n = len(spans)
        ids = {c.id: self._mark_floor(c) for c, _ in page}
        self._prompt_tokens = None
        max_marks, max_tokens = self._tracer_ledger_room(n, ids, record=False)

        def prompt_for(run: str, packets: list[str]) -> Messages:
            items = [{"claim": c, "check": ck, "packet": p} for (c, ck), p in zip(page, packets)]
            return self._tracer_ledger_prompt(run, n, items, max_marks)

        run, packets = self._tracer_view(spans, [c for c, _ in page], prompt_for, max_tokens)
        max_marks, max_tokens = self._tracer_ledger_room(n, ids)  # beside the whole run, where shown
        grammar = tracer_ledger_grammar(ids, n, max_marks, self.limits)
        key = f"drift/tracer/{self.opts.tracer}" + (f"/{page[0][0].id}" if k is not None else "")
        return self.ctx.request(key, prompt_for(run, packets), grammar, self._sampling(max_tokens, "tracer")), max_marks

    def _trace_per_claim(
        self, spans: list[Span], ledger: Ledger, risky: list[tuple[Claim, SupportCheck]]
    ) -> Stage[tuple[list[str], list[Mark], dict[str, str]]]:
        n = len(spans)
        max_tokens = tracer_max_tokens(n, self.limits.marks_per_claim, self.limits.reason_chars)
        sampling = self._sampling(max_tokens, "tracer")
        requests = []
        for c, k in risky:
            deps = self._dependencies(ledger, c)

            def prompt_for(run: str, packets: list[str], c: Claim = c, k: SupportCheck = k, deps: str = deps) -> Messages:
                return self._tracer_claim_prompt(run, n, c, k, deps, packets[0])

            messages = prompt_for(*self._tracer_view(spans, [c], prompt_for, max_tokens))
            requests.append(
                self.ctx.request(f"drift/tracer/{c.id}", messages, tracer_claim_grammar(self._mark_floor(c), n, self.limits), sampling)
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

    # ------------------------------------------------------------------ 5. the confirming call
    def _before(self, spans: list[Span], first: int, tokens: int) -> int:
        """The first span of those just before (and at) `first` whose text fits `tokens` uncut."""
        chars, lo = int(tokens * self.cpt), first
        used = self.view.size([spans[first]])
        while lo > 0 and used + self.view.size([spans[lo - 1]]) <= chars:
            lo -= 1
            used += self.view.size([spans[lo]])
        return lo

    def _confirm(self, spans: list[Span], first: int, at_first: list[tuple[Claim, SupportCheck]]) -> Stage[dict[str, Any]]:
        """Issue 51's second look at the chosen first error: is span `first` the earliest harmful
        span of the run? Shown the claims made there with their packets, and the spans just
        before it (within twice `packet_tokens`); the answer may name an earlier span."""
        lo = self._before(spans, first, 2 * self.opts.packet_tokens)
        run, cuts = self.view.view(spans[lo : first + 1], int(2 * self.opts.packet_tokens * self.cpt))
        if cuts:
            self._bound("run_text_cut", {"stage": "confirm", "steps": len(cuts)})
        note = " ".join(
            x
            for x in (
                cut_note(cuts),
                f"Shown: spans {lo} to {first}; the spans after {first} are left out"
                + (f", and spans 0 to {lo - 1} appear only in the packets' passages." if lo else "."),
            )
            if x
        )
        answer = confirm_max_tokens(first, self.limits)

        def prompt_for(packets: list[str]) -> Messages:
            items = [{"claim": c, "check": k, "packet": p} for (c, k), p in zip(at_first, packets)]
            return self._user("drift/confirm.j2", note, run=run, first=first, items=items, limits=self.limits, **self._final())

        fixed = self._tokens(prompt_for([""] * len(at_first)))
        budget = self._packet_tokens(len(at_first), fixed, answer, "confirm")
        made = self._packets([c for c, _ in at_first], budget, "confirm")
        messages = prompt_for([p.text for p in made])
        grammar = confirm_grammar(first, self.limits)
        (resp,) = yield from self._ask("confirm", [self.ctx.request("drift/confirm", messages, grammar, self._sampling(answer, "tracer"))])
        self._text_bound("reason_chars", resp.value["reason"], self.limits.reason_chars, "confirm")
        return {"first": first, "earliest": int(resp.value["earliest"]), "reason": resp.value["reason"], "shown_from": lo}

    def _confirmed(
        self, spans: list[Span], checked: list[Claim], checks: list[SupportCheck], marks: list[Mark]
    ) -> Stage[tuple[list[Mark], dict[str, Any] | None]]:
        """The marks with the confirming call's earlier first error added (the claims made at the
        chosen span, introduced there), and what it said; unchanged without marks or `confirm`."""
        err = error_spans(marks)
        if not self.opts.confirm or not err:
            return marks, None
        first = err[0]
        ids = {m.claim for m in marks if m.span == first}
        at_first = [(c, k) for c, k in zip(checked, checks) if c.id in ids]
        if not at_first or (self.opts.confirm_when == "disagree" and all(c.introduced == first for c, _ in at_first)):
            return marks, None
        said = yield from self._confirm(spans, first, at_first)
        if said["earliest"] < first:
            marks = [*marks, *(Mark(c.id, said["earliest"], "introduce") for c, _ in at_first)]
        return marks, said

    # ------------------------------------------------------------------ the program
    def run(self) -> Program:
        spans, segment_chunks = yield from self._segment()
        self.spans = spans
        self.packer = Packer(self.view, spans, self.ctx.count_tokens or approx_tokens, self.cpt)
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
        confirmed: dict[str, Any] | None = None
        if checked:
            checks = yield from self._seek_support(spans, checked)
            # the joint tracer (the authors') sees every checked claim and traces even with none risky
            risky = self._to_trace(checked, checks)
            if risky:
                harmful, marks, reasons = yield from self._trace_dependencies(spans, ledger, risky)
                marks, confirmed = yield from self._confirmed(spans, checked, checks, marks)
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
            "confirm": confirmed,
            "run_text": self.run_text,
            "budget_note": self.budget_note,
            "bounds_hit": self.bounds,
            "limits_hit": self.hit.as_details(),
            "cost": {s: u.as_dict() for s, u in self.cost.items()},
        }
        return diagnose(self.ctx, self.view, spans, ledger, checked, checks, marks, details, late=self.opts.late_endpoints)
