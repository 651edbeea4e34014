"""SAFARI's investigation loop (paper section 2, Appendix F), as a method program.

History = system prompt, user prompt and a bootstrap read of the trace's end, already answered.
Each turn the model emits one grammar-constrained object (sparse STM update, next action, one
tool call); the harness runs the tool and appends the result. `evaluate` fans the questions out
to evaluator calls that see only the reasoning, all in one batch. The loop ends on a valid submit
after at least one evaluate, or after K turns with a forced final answer.
"""

from __future__ import annotations

import json
import statistics

import regex as re
from dataclasses import dataclass, field
from typing import Any

from localfa.engine.types import Sampling
from localfa.grammars.safari import SafariLimits, evaluator_grammar, final_grammar, turn_grammar
from localfa.methods.base import MethodContext, Program
from localfa.methods.budget import Budget, parse_budget, resolve_scale
from localfa.methods.safari.history import History
from localfa.methods.safari.stm import ShortTermMemory
from localfa.templates import render
from localfa.tokens import approx_tokens
from localfa.traces.lineview import LineView

METHOD = "safari"
_QUOTED = re.compile(r"[\"'\u2018\u201c]([^\"'\u2019\u201d\n]{12,300})[\"'\u2019\u201d]")


@dataclass
class SafariOptions:
    """Knobs of the method; defaults follow the paper (K=30, E=3, theta=70)."""

    max_turns: int = 30
    threshold: float = 70.0
    max_questions: int = 3
    max_evaluations: int = 3
    use_stm: bool = True
    temperature: float = 0.7
    top_p: float = 0.95
    evaluator_temperature: float = 0.2
    line_width: int = 200
    max_read_lines: int = 200
    limits: SafariLimits = field(default_factory=SafariLimits)
    transcript: bool = False

    def sampling(self, max_tokens: int, temperature: float | None = None) -> Sampling:
        t = self.temperature if temperature is None else temperature
        return Sampling(temperature=t, top_p=self.top_p, max_tokens=max_tokens)


def _call_text(tool: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in tool.items() if k != "name")
    return f"{tool['name']}({args})"


def _short_call(tool: dict[str, Any]) -> str:
    if tool["name"] == "evaluate":
        return f"evaluate({len(tool['questions'])} questions)"
    if tool["name"] == "submit_step":
        return f"submit_step(step_id={tool['step_id']})"
    return _call_text(tool)


class Investigation:
    """State of one investigation; `run()` is the program the runner drives."""

    def __init__(self, ctx: MethodContext, opts: SafariOptions) -> None:
        self.ctx = ctx
        self.opts = opts
        trace = ctx.trace
        self.view = LineView(trace, width=opts.line_width, count_tokens=ctx.count_tokens)
        self.budget = self._resolve_budget(parse_budget(ctx.budget))
        count = ctx.count_tokens or approx_tokens
        self.turn_max_tokens = opts.limits.turn_max_tokens(opts.use_stm)
        # What the prompt may hold: the user's budget and, always, the model's own window.
        window = None
        if ctx.max_model_len:
            window = ctx.max_model_len - 2 * self.turn_max_tokens - 64
        if self.budget.limit is not None and self.budget.unit == "chars":
            self.history = History(measure=len)
            self.prompt_cap = self.budget.limit
            window_chars = window * 3 if window else None
            if window_chars is not None:
                self.prompt_cap = min(self.prompt_cap, window_chars)
        else:
            self.history = History(measure=count)
            caps = [c for c in (self.budget.limit, window) if c is not None]
            self.prompt_cap = min(caps) if caps else None
        # One observation may take at most a third of the room, so several turns stay visible.
        obs_chars = None
        if self.prompt_cap is not None:
            per_unit = 1 if self.history.measure is len else 3
            obs_chars = max(1200, self.prompt_cap * per_unit // 3)
        self.obs_chars = obs_chars
        line_room = (obs_chars // (opts.line_width + 8)) if obs_chars else opts.max_read_lines
        self.max_read = max(5, min(opts.max_read_lines, line_room))
        n = len(trace.steps)
        self.turn_grammar = turn_grammar(n, self.view.total_lines, self.max_read, opts.limits, opts.use_stm)
        self.eval_grammar = evaluator_grammar(opts.limits)
        self.final_grammar = final_grammar(n, opts.limits)
        self.stm = ShortTermMemory(evidence_max_chars=opts.limits.evidence_chars)
        self.seen_calls: dict[str, int] = {}
        self.evaluations: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ setup
    def _resolve_budget(self, budget: Budget) -> Budget:
        if budget.scale is None:
            return budget
        labels = self.ctx.trace.labels
        step = labels.mistake_step if labels else None
        if step is None and labels and labels.fault_steps:
            step = min(labels.fault_steps)
        pos = self.view.token_position_of_step(step) if step is not None else None
        return resolve_scale(budget, pos)

    def _budget_text(self) -> str | None:
        if self.budget.limit is None:
            return None
        return f"{self.budget.limit} {'characters' if self.budget.unit == 'chars' else 'tokens'}"

    def _start(self) -> None:
        trace, opts = self.ctx.trace, self.opts
        limit_text = self._budget_text()
        fits = False
        if self.budget.limit is not None:  # tokenising a huge trace costs seconds: only when asked
            total = self.view.total_chars if self.budget.unit == "chars" else self.view.tokens()
            fits = total <= self.budget.limit
        self.history.add_head("system", render(
            "safari/system.j2", max_read=self.max_read, context_limit=limit_text, threshold=int(opts.threshold),
            max_turns=opts.max_turns, with_stm=opts.use_stm))
        self.history.add_head("user", render(
            "safari/user.j2", question=trace.task[:2000], n_steps=len(trace.steps), total_lines=self.view.total_lines,
            total_chars=self.view.total_chars, agents=", ".join(trace.agent_names()) or "unknown",
            context_limit=limit_text, fits=fits,
            has_spans=any(s.span_id for s in trace.steps),
            has_tools=any(s.tool_calls or s.observation for s in trace.steps)))
        boot_limit = min(self.max_read, self.view.total_lines)
        offset = max(0, self.view.total_lines - boot_limit)
        tool = {"name": "read", "offset": offset, "limit": boot_limit}
        boot: dict[str, Any] = {"next_action": "Read the final part of the run to see its final output.", "tool": tool}
        if opts.use_stm:
            boot = {"stm": {}, **boot}
        self.history.add_head("assistant", json.dumps(boot, ensure_ascii=False))
        self.history.add_head("user", self._observation(0, "result", tool_call=_call_text(tool), body=self._run_read(tool)))
        self.seen_calls[_call_text(tool)] = 0
        self.stm.past_tool_calls.append(_short_call(tool))

    # ------------------------------------------------------------------ tools
    def _cap(self, text: str) -> str:
        if self.obs_chars is not None and len(text) > self.obs_chars:
            return text[: self.obs_chars] + f"\n[... cut at {self.obs_chars} characters; read a smaller range]"
        return text

    def _run_read(self, tool: dict[str, Any]) -> str:
        return self._cap(self.view.read(int(tool["offset"]), int(tool["limit"])))

    def _run_search(self, tool: dict[str, Any]) -> str:
        return self._cap(self.view.search(str(tool["pattern"])))

    def _observation(self, turn: int, kind: str, **kw: Any) -> str:
        remaining = self.opts.max_turns - turn
        return render("safari/observation.j2", turn=turn, max_turns=self.opts.max_turns, remaining=remaining,
                      kind=kind, evaluated=bool(self.evaluations), threshold=int(self.opts.threshold),
                      max_evaluations=self.opts.max_evaluations, **kw)

    def _tail(self, turn: int) -> str:
        return render("safari/stm.j2", with_stm=self.opts.use_stm, stm=self.stm.render_json(),
                      past_calls="; ".join(self.stm.past_tool_calls) or "none", turn=turn, max_turns=self.opts.max_turns)

    def _evaluate(self, turn: int, tool: dict[str, Any]) -> Program:
        questions = [q for q in tool["questions"]][: self.opts.max_questions]
        n = len(self.evaluations)
        reqs = []
        for i, q in enumerate(questions):
            msgs = [
                {"role": "system", "content": render("safari/evaluator_system.j2")},
                {"role": "user", "content": render("safari/evaluator_user.j2", reasoning=tool["reasoning"], question=q)},
            ]
            reqs.append(self.ctx.request(f"eval/{n}/{i}", msgs, self.eval_grammar, self.opts.sampling(
                max_tokens=self.opts.limits.feedback_chars // 2 + 32, temperature=self.opts.evaluator_temperature)))
        responses = yield reqs
        verdicts = [{"question": q, "score": int(r.value["score"]), "feedback": r.value["feedback"]}
                    for q, r in zip(questions, responses)]
        mean = statistics.fmean(v["score"] for v in verdicts)
        self.evaluations.append({"turn": turn, "mean": round(mean, 2), "verdicts": verdicts})
        passed = mean >= self.opts.threshold
        shown = verdicts if passed else [v for v in verdicts if v["score"] < self.opts.threshold]
        body = "\n".join(f"Question {i + 1} [{v['score']}/100]: {v['question']}\nFeedback: {v['feedback']}"
                         for i, v in enumerate(shown))
        left = self.opts.max_evaluations - len(self.evaluations)
        return self._observation(turn, "evaluate_pass" if passed else "evaluate_fail", mean=round(mean, 1),
                                 body=body, evaluations_left=left)

    # ------------------------------------------------------------------ loop
    def run(self) -> Program:
        self._start()
        opts = self.opts
        submitted: dict[str, Any] | None = None
        for turn in range(1, opts.max_turns + 1):
            tail = self._tail(turn)
            dropped = self.history.evict_to(self.prompt_cap, tail)
            req = self.ctx.request(f"turn/{turn}", self.history.messages(tail), self.turn_grammar,
                                   opts.sampling(self.turn_max_tokens))
            (resp,) = yield [req]
            out = resp.value
            changed = self.stm.merge(out.get("stm")) if opts.use_stm else []
            tool = out["tool"]
            call = _call_text(tool)
            entry: dict[str, Any] = {"turn": turn, "output": out, "stm_changed": changed, "evicted": dropped,
                                     "prompt_tokens": resp.usage.prompt_tokens, "cached_tokens": resp.usage.cached_tokens}
            name = tool["name"]
            if name in ("read", "search") and call in self.seen_calls:
                obs = self._observation(turn, "reminder", tool_call=call, first_turn=self.seen_calls[call])
                entry["reminder"] = True
            elif name == "read":
                obs = self._observation(turn, "result", tool_call=call, body=self._run_read(tool))
            elif name == "search":
                obs = self._observation(turn, "result", tool_call=call, body=self._run_search(tool))
            elif name == "evaluate":
                if len(self.evaluations) >= opts.max_evaluations:
                    obs = self._observation(turn, "evaluate_exhausted")
                else:
                    obs = yield from self._evaluate(turn, tool)
                    entry["evaluation"] = self.evaluations[-1]
            elif not self.evaluations:
                obs = self._observation(turn, "refused_submit")
                entry["refused"] = True
            else:
                submitted = tool
            self.seen_calls.setdefault(call, turn)
            self.stm.past_tool_calls.append(_short_call(tool))
            if submitted is not None:
                entry["observation"] = None
                self.transcript.append(entry)
                return self._finish(int(submitted["step_id"]), submitted["reasoning"], "submitted", turn)
            entry["observation"] = obs
            self.transcript.append(entry)
            self.history.add_turn(resp.text, obs)
        # Forced finalisation: the model must name a step now.
        final_text = render("safari/finalize.j2", max_turns=opts.max_turns, with_stm=opts.use_stm, stm=self.stm.render_json())
        self.history.evict_to(self.prompt_cap, final_text)
        req = self.ctx.request("final", self.history.messages(final_text), self.final_grammar,
                               opts.sampling(self.opts.limits.submit_reasoning_chars // 2 + 32))
        (resp,) = yield [req]
        self.transcript.append({"turn": "final", "output": resp.value})
        return self._finish(int(resp.value["step_id"]), resp.value["reasoning"], "forced", opts.max_turns)

    def _finish(self, step: int, reasoning: str, stop: str, turns: int):
        note = self.stm.fault(step)
        evidence = [note.evidence] if note and note.evidence else []
        haystack = self.view.text()
        # Quotes in the final reasoning that really occur in the trace are evidence too.
        for quote in _QUOTED.findall(reasoning):
            if quote not in evidence and quote in haystack:
                evidence.append(quote)
        verified = [e.strip() in haystack for e in evidence]
        details = {
            "turns_used": turns,
            "evaluate_scores": [[v["score"] for v in e["verdicts"]] for e in self.evaluations],
            "evaluate_means": [e["mean"] for e in self.evaluations],
            "evicted_turns": self.history.evicted,
            "budget": self.budget.label,
            "budget_limit": self.budget.limit,
            "budget_unit": self.budget.unit,
            "evidence_verbatim": verified,
            "stm": self.stm.as_dict() if self.opts.use_stm else None,
            "max_read_lines": self.max_read,
        }
        diag = self.ctx.diagnosis(METHOD, step=step, reasoning=reasoning, evidence=evidence,
                                  stop_reason=stop, details=details)
        if self.opts.transcript:
            diag.transcript = self.transcript
        return diag
