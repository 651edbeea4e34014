"""SAFARI's investigation loop (paper section 2, Appendix F), as a method program.

History = system prompt, user prompt and a bootstrap read of the trace's end, already answered.
Each turn the model emits one grammar-constrained object (sparse STM update, next action, one
tool call); the harness runs the tool and appends the result. `evaluate` fans the questions out
to evaluator calls that see only the reasoning, all in one batch. The loop ends on a valid submit
after at least one evaluate, or after K turns (or a turn the engine could not produce) with a
forced final answer.

Nothing is built until the program is first advanced: a sweep creates its programs up front,
and a trace that cannot be set up (a `scale:` budget without a labelled fault, a budget smaller
than the fixed head) fails inside its own program, which the runner records for that trace.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from localfa.engine.errors import InvalidOutputError, TruncatedOutputError
from localfa.engine.types import Response, Sampling
from localfa.grammars.safari import SafariLimits, evaluator_grammar, final_grammar, turn_grammar
from localfa.methods.base import Calls, MethodContext, Program
from localfa.methods.baselines import agent_choices, shorten
from localfa.methods.budget import (
    CHARS_PER_TOKEN,
    TEMPLATE_TOKENS_PER_MESSAGE,
    Budget,
    BudgetError,
    measured_chars_per_token,
    resolve_budget,
)
from localfa.methods.evidence import quoted_evidence, verify_quotes
from localfa.methods.safari.history import History
from localfa.methods.safari.stm import ShortTermMemory
from localfa.templates import render
from localfa.tokens import approx_tokens
from localfa.traces.lineview import LineView

METHOD = "safari"
TASK_MAX_CHARS = 4000
#: Engine failures of one turn that end the investigation (forced finalisation), not the trace.
TURN_FAILURES = (TruncatedOutputError, InvalidOutputError)


@dataclass
class SafariOptions:
    """Knobs of the method; defaults follow the paper (K=30, E=3, theta=70, 10 turns before evaluate)."""

    max_turns: int = 30
    threshold: float = 70.0
    max_evaluations: int = 3
    min_investigate_turns: int = 10
    use_stm: bool = True
    temperature: float = 0.7
    top_p: float = 0.95
    evaluator_temperature: float = 0.2
    line_width: int = 200
    max_read_lines: int = 200
    min_read_lines: int = 80
    limits: SafariLimits = field(default_factory=SafariLimits)
    transcript: bool = False

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if not 0 <= self.threshold <= 100:
            raise ValueError("threshold must be between 0 and 100")
        if self.max_evaluations < 1:
            raise ValueError("max_evaluations must be at least 1")
        if self.min_investigate_turns < 0:
            raise ValueError("min_investigate_turns must be 0 or more")
        if self.line_width < 20:
            raise ValueError("line_width must be at least 20")
        if not 1 <= self.min_read_lines <= self.max_read_lines:
            raise ValueError("need 1 <= min_read_lines <= max_read_lines")
        if isinstance(self.limits, dict):
            self.limits = SafariLimits(**self.limits)

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


@dataclass(frozen=True)
class ContextPlan:
    """What the prompt may hold: `mode` none (no cap), window (the model's own) or budget."""

    mode: str
    unit: str = "tokens"
    cap: int | None = None
    budget: Budget = field(default_factory=Budget)

    @property
    def label(self) -> str:
        return self.budget.label if self.mode == "budget" else self.mode

    def describe(self) -> str | None:
        if self.cap is None:
            return None
        return f"{self.cap} {'characters' if self.unit == 'chars' else 'tokens'}"


def investigate(ctx: MethodContext, opts: SafariOptions) -> Program:
    """The program for one trace; everything is built on the first advance, not before."""
    investigation = Investigation(ctx, opts)
    return (yield from investigation.run())


class Investigation:
    """State of one investigation; `run()` is the program the runner drives."""

    def __init__(self, ctx: MethodContext, opts: SafariOptions) -> None:
        self.ctx = ctx
        self.opts = opts
        self.count = ctx.count_tokens or approx_tokens
        self.view = LineView(ctx.trace, width=opts.line_width, count_tokens=self.count)
        self.turn_max_tokens = opts.limits.turn_max_tokens(opts.use_stm)
        self.plan = self._plan_context()
        # Sized with the shared constant, not this trace's ratio: in window mode every trace then
        # gets the same system prompt, which the prefix cache shares across traces.
        chars_per_unit = 1.0 if self.plan.unit == "chars" else CHARS_PER_TOKEN
        self.history = History(
            measure=len if self.plan.unit == "chars" else self.count,
            per_message=0 if self.plan.unit == "chars" else TEMPLATE_TOKENS_PER_MESSAGE,
        )
        # One observation may take at most a third of the room, so several turns stay visible.
        self.obs_chars = None if self.plan.cap is None else max(1200, int(self.plan.cap * chars_per_unit / 3))
        line_chars = opts.line_width + len(self.view.label(max(0, self.view.total_lines - 1))) + 3
        line_room = self.obs_chars // line_chars if self.obs_chars else opts.max_read_lines
        self.max_read = max(5, min(opts.max_read_lines, line_room))
        self.useful_read = min(opts.min_read_lines, self.max_read)
        self.min_investigate = min(opts.min_investigate_turns, max(0, opts.max_turns - 2))
        n = len(ctx.trace.steps)
        self.turn_grammar = turn_grammar(n, self.view.total_lines, self.max_read, opts.limits, opts.use_stm)
        self.eval_grammar = evaluator_grammar(opts.limits)
        self.final_grammar = final_grammar(n, opts.limits)
        self.stm = ShortTermMemory()
        self.seen_calls: dict[str, int] = {}  # call -> turn whose result holds it (0 = bootstrap)
        self.call_log: list[str] = []  # every read/search call, in order
        self.investigated = 0  # read/search turns that returned a result
        self.evaluations: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []
        self.failure: dict[str, Any] | None = None

    # ------------------------------------------------------------------ setup
    def _chars_per_token(self) -> float:
        """This trace's characters per token: a character budget must also respect the window."""
        return measured_chars_per_token(self.view.text(), self.ctx.count_tokens)

    def _plan_context(self) -> ContextPlan:
        """The cap in force: the user's budget (within the window), else the window, else none."""
        budget = resolve_budget(self.ctx.budget, self.ctx.trace, self.ctx.count_tokens, view=self.view)
        window = None
        if self.ctx.max_model_len:
            window = self.ctx.max_model_len - 2 * self.turn_max_tokens - 64
            if window < 1:
                raise BudgetError(
                    f"the model's window ({self.ctx.max_model_len} tokens) leaves no room for a "
                    f"prompt next to SAFARI's turn ({self.turn_max_tokens} tokens, twice for the retry)"
                )
        if budget.limit is not None:
            cap = budget.limit
            if window is not None:
                cap = min(cap, window if budget.unit == "tokens" else int(window * self._chars_per_token()))
            return ContextPlan("budget", budget.unit, cap, budget)
        if window is not None:
            return ContextPlan("window", "tokens", window, budget)
        return ContextPlan("none", "tokens", None, budget)

    def _trace_fits(self, room: int) -> bool:
        """Does the whole numbered view fit in `room` units? Tokenises only as far as needed."""
        if room <= 0:
            return False
        if self.plan.unit == "chars":
            label = len(self.view.label(0)) + 2
            return self.view.total_chars + self.view.total_lines * label <= room
        used = 0
        label = self.count(self.view.label(0) + "| ")
        for line in self.view.lines:
            used += self.count(line) + label
            if used > room:
                return False
        return True

    def _start(self) -> None:
        trace, opts, plan = self.ctx.trace, self.opts, self.plan
        limit_text = plan.describe()
        system = render(
            "safari/system.j2",
            max_read=self.max_read,
            useful_read=self.useful_read,
            context_limit=limit_text,
            cap_mode=plan.mode,
            threshold=int(opts.threshold),
            max_turns=opts.max_turns,
            max_evaluations=opts.max_evaluations,
            min_investigate=self.min_investigate,
            with_stm=opts.use_stm,
            limits=opts.limits,
        )

        def user(fits: bool) -> str:
            return render(
                "safari/user.j2",
                question=shorten(trace.task or "(not recorded)", TASK_MAX_CHARS),
                n_steps=len(trace.steps),
                total_lines=self.view.total_lines,
                total_chars=self.view.total_chars,
                agents=", ".join(agent_choices(trace)) or "unknown",
                context_limit=limit_text,
                fits=fits,
                max_read=self.max_read,
                with_stm=opts.use_stm,
                has_spans=any(s.span_id for s in trace.steps),
                has_tools=any(s.tool_calls or s.observation for s in trace.steps),
            )

        fits = True
        if plan.cap is not None:  # the paper's "read it all" advice only where nothing can be evicted
            fixed = self.history.measure(system) + self.history.measure(user(True)) + 2 * self.history.per_message
            fits = self._trace_fits(plan.cap - fixed - self.turn_max_tokens)
        self.history.add_head("system", system)
        self.history.add_head("user", user(fits))
        self.fits = fits
        boot_limit = min(self.max_read, self.view.total_lines)
        tool = {"name": "read", "offset": max(0, self.view.total_lines - boot_limit), "limit": boot_limit}
        boot: dict[str, Any] = {"next_action": "Read the final part of the run to see its final output.", "tool": tool}
        if opts.use_stm:
            boot = {"stm": {}, **boot}
        self.history.add_head("assistant", json.dumps(boot, ensure_ascii=False))
        self.history.add_head("user", self._observation(0, "result", tool_call=_call_text(tool), body=self._run_tool(tool)))
        self._log_call(tool, 0)
        self.call_log.append(_call_text(tool))
        if plan.cap is not None:
            head = self.history.head_size(self._tail(1))
            if head > plan.cap:
                what = (
                    f"budget {plan.budget.label} ({limit_text})"
                    if plan.mode == "budget"
                    else f"the model's window leaves {limit_text} for the prompt, which"
                )
                raise BudgetError(
                    f"{what} is smaller than SAFARI's fixed head: system prompt, user prompt and bootstrap read take {head} {plan.unit}"
                )

    # ------------------------------------------------------------------ tools
    def _cap(self, text: str) -> str:
        if self.obs_chars is not None and len(text) > self.obs_chars:
            return text[: self.obs_chars] + f"\n[... cut at {self.obs_chars} characters; read a smaller range]"
        return text

    def _run_tool(self, tool: dict[str, Any]) -> str:
        if tool["name"] == "read":
            return self._cap(self.view.read(int(tool["offset"]), int(tool["limit"])))
        return self._cap(self.view.search(str(tool["pattern"])))

    def _log_call(self, tool: dict[str, Any], turn: int) -> None:
        self.seen_calls[_call_text(tool)] = turn
        self.stm.past_tool_calls.append(_short_call(tool))

    def _loop(self, call: str) -> str | None:
        """The repeated calls when the model goes round in circles, else None."""
        recent = (self.call_log + [call])[-4:]
        if self.call_log.count(call) >= 2 or (len(recent) == 4 and len(set(recent)) <= 2):
            return "; ".join(dict.fromkeys(recent))
        return None

    def _observation(self, turn: int, kind: str, **kw: Any) -> str:
        kw.setdefault("loop", None)
        return render(
            "safari/observation.j2",
            turn=turn,
            max_turns=self.opts.max_turns,
            remaining=self.opts.max_turns - turn,
            kind=kind,
            evaluated=bool(self.evaluations),
            threshold=int(self.opts.threshold),
            max_evaluations=self.opts.max_evaluations,
            min_investigate=self.min_investigate,
            investigated=self.investigated,
            refetched=kw.pop("refetched", False),
            **kw,
        )

    def _tail(self, turn: int) -> str:
        if not self.opts.use_stm:
            return ""
        return render(
            "safari/stm.j2",
            stm=self.stm.render_json(),
            past_calls="; ".join(self.stm.past_tool_calls) or "none",
            turn=turn,
            max_turns=self.opts.max_turns,
        )

    def _evaluate(self, turn: int, tool: dict[str, Any]) -> Calls[str]:
        questions = list(tool["questions"])
        n = len(self.evaluations)
        system = {"role": "system", "content": render("safari/evaluator_system.j2", limits=self.opts.limits)}
        reqs = []
        for i, q in enumerate(questions):
            user = {"role": "user", "content": render("safari/evaluator_user.j2", reasoning=tool["reasoning"], question=q)}
            reqs.append(
                self.ctx.request(
                    f"eval/{n}/{i}",
                    [system, user],
                    self.eval_grammar,
                    self.opts.sampling(max_tokens=self.opts.limits.verdict_max_tokens(), temperature=self.opts.evaluator_temperature),
                )
            )
        responses = yield reqs
        verdicts = [{"question": q, "score": int(r.value["score"]), "feedback": r.value["feedback"]} for q, r in zip(questions, responses)]
        mean = statistics.fmean(v["score"] for v in verdicts)
        self.evaluations.append({"turn": turn, "mean": round(mean, 2), "verdicts": verdicts})
        passed = mean >= self.opts.threshold
        body = "\n".join(f"Question {i + 1} [{v['score']}/100]: {v['question']}\nFeedback: {v['feedback']}" for i, v in enumerate(verdicts))
        return self._observation(
            turn,
            "evaluate_pass" if passed else "evaluate_fail",
            mean=round(mean, 1),
            body=body,
            evaluations_left=self.opts.max_evaluations - len(self.evaluations),
        )

    # ------------------------------------------------------------------ loop
    def _turn(self, turn: int) -> Calls[dict[str, Any]]:
        """One investigator turn: ask, run the tool. Returns (observation or None on submit, entry)."""
        opts = self.opts
        tail = self._tail(turn)
        dropped = self.history.evict_to(self.plan.cap, tail)
        req = self.ctx.request(f"turn/{turn}", self.history.messages(tail), self.turn_grammar, opts.sampling(self.turn_max_tokens))
        (resp,) = yield [req]
        out = resp.value
        changed = self.stm.merge(out.get("stm")) if opts.use_stm else []
        tool = out["tool"]
        name, call = tool["name"], _call_text(tool)
        entry: dict[str, Any] = {
            "turn": turn,
            "output": out,
            "stm_changed": changed,
            "evicted": dropped,
            "prompt_tokens": resp.usage.prompt_tokens,
            "cached_tokens": resp.usage.cached_tokens,
        }
        obs: str | None = None
        if name in ("read", "search"):
            loop = self._loop(call)
            self.call_log.append(call)
            first = self.seen_calls.get(call)
            if first is not None and self.history.holds(first):
                obs = self._observation(turn, "reminder", tool_call=call, first_turn=first, loop=loop)
                entry["reminder"] = True
            else:
                obs = self._observation(turn, "result", tool_call=call, body=self._run_tool(tool), loop=loop, refetched=first is not None)
                self.investigated += 1
                entry["refetched"] = first is not None
                self._log_call(tool, turn)
            if loop:
                entry["loop_warning"] = True
        elif name == "evaluate":
            if len(self.evaluations) >= opts.max_evaluations:
                obs = self._observation(turn, "evaluate_exhausted")
            elif not self.evaluations and self.investigated < self.min_investigate and turn < opts.max_turns - 1:
                obs = self._observation(turn, "refused_evaluate")
                entry["refused"] = True
            else:
                obs = yield from self._evaluate(turn, tool)
                entry["evaluation"] = self.evaluations[-1]
            self.stm.past_tool_calls.append(_short_call(tool))
        elif not self.evaluations:
            obs = self._observation(turn, "refused_submit")
            entry["refused"] = True
            self.stm.past_tool_calls.append(_short_call(tool))
        entry["observation"] = obs
        self.transcript.append(entry)
        if obs is not None:
            self.history.add_turn(resp.text, obs, turn)
        return entry

    def run(self) -> Program:
        self._start()
        opts = self.opts
        for turn in range(1, opts.max_turns + 1):
            try:
                entry = yield from self._turn(turn)
            except TURN_FAILURES as exc:  # one bad turn ends the search, not the trace
                self.failure = {"turn": turn, "error": f"{type(exc).__name__}: {exc}"}
                break
            if entry["observation"] is None:
                tool = entry["output"]["tool"]
                return self._finish(int(tool["step_id"]), tool["reasoning"], "submitted", turn)
        return (yield from self._forced())

    def _forced(self) -> Program:
        """Forced finalisation: the model must name a step now, from what it has gathered."""
        opts = self.opts
        failure = self.failure
        final_text = render(
            "safari/finalize.j2",
            reason="failed_turn" if failure else "turns",
            failure=(failure or {}).get("error", "")[:200],
            max_turns=opts.max_turns,
            with_stm=opts.use_stm,
            stm=self.stm.render_json(),
            limits=opts.limits,
        )
        self.history.evict_to(self.plan.cap, final_text)
        req = self.ctx.request(
            "final", self.history.messages(final_text), self.final_grammar, opts.sampling(opts.limits.final_max_tokens())
        )
        responses: list[Response] = yield [req]
        value = responses[0].value
        self.transcript.append({"turn": "final", "output": value})
        turns = failure["turn"] if failure else opts.max_turns
        return self._finish(int(value["step_id"]), value["reasoning"], "forced", turns)

    def _finish(self, step: int, reasoning: str, stop: str, turns: int):
        trace = self.ctx.trace
        note = self.stm.fault(step)
        evidence = [note.evidence] if note and note.evidence else []
        # Quotes in the final reasoning that really occur in the trace are evidence too.
        evidence += [q for q in quoted_evidence(trace, reasoning) if q not in evidence]
        details = {
            "turns_used": turns,
            "forced_by": None if stop != "forced" else ("turn_failure" if self.failure else "max_turns"),
            "turn_failure": self.failure,
            "evaluate_scores": [[v["score"] for v in e["verdicts"]] for e in self.evaluations],
            "evaluate_means": [e["mean"] for e in self.evaluations],
            "evicted_turns": self.history.evicted,
            "budget": self.plan.label,
            "budget_limit": self.plan.cap,
            "budget_unit": self.plan.unit,
            "trace_fits": self.fits,
            "min_investigate_turns": self.min_investigate,
            "evidence_verbatim": verify_quotes(trace, evidence),
            "stm": self.stm.as_dict() if self.opts.use_stm else None,
            "max_read_lines": self.max_read,
        }
        diag = self.ctx.diagnosis(METHOD, step=step, reasoning=reasoning, evidence=evidence, stop_reason=stop, details=details)
        if self.opts.transcript:
            diag.transcript = self.transcript
        return diag
