"""SAFARI's investigation loop (paper section 2, Appendix F), as a method program.

History = system prompt, user prompt and a bootstrap read, already answered: the whole run where
it fits beside the opening prompt and two turns (then RULE 5's minimum of read/search turns is
met), else the run's end. Each turn the model emits one grammar-constrained object (analysis
first, sparse STM update, next action, one tool call); the harness runs the tool and appends the
result. `evaluate` fans the questions out to evaluator calls that see only the reasoning, all in
one batch. The loop ends on a valid submit after at least one evaluate, or after K turns (or a
turn the engine could not produce, or a prompt that cannot be made to fit the budget) with a
forced final answer naming a step some prompt showed.

A budget is a hard limit: before every call the prompt is measured (`meter`: estimated per
message, counted in full near the cap); past the cap the oldest raw results are summarised, then
the oldest turns go, then the newest tool result is shortened (it says so), else the search ends.

Nothing is built until the program is first advanced: a sweep creates its programs up front,
and a trace that cannot be set up (a `scale:` budget without a labelled fault, a budget smaller
than the fixed head) fails inside its own program, which the runner records for that trace.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from localfa.engine.errors import ContextLengthError, InvalidOutputError, TruncatedOutputError
from localfa.engine.grammar import Grammar
from localfa.engine.types import Message, Response, Sampling
from localfa.grammars.safari import OUTPUT_CHARS_PER_TOKEN, SafariLimits, evaluator_grammar, final_grammar, turn_grammar
from localfa.methods.base import Calls, MethodContext, Program
from localfa.methods.baselines import agent_choices, shorten
from localfa.methods.budget import CHARS_PER_TOKEN, BudgetError
from localfa.methods.evidence import quoted_evidence, verify_quotes
from localfa.methods.names import agent_names
from localfa.methods.none_answer import is_none
from localfa.methods.safari.context import plan_context
from localfa.methods.safari.history import History, Summary
from localfa.methods.safari.meter import AIM_UNDER, BATCH_TO, FILL_BEFORE_SUMMARY, FILL_TRIES, token_unit
from localfa.methods.safari.stm import ShortTermMemory
from localfa.methods.safari.summary import summarise
from localfa.templates import render
from localfa.tokens import approx_tokens
from localfa.traces.lineview import LineView, Shown

METHOD = "safari"
TASK_MAX_CHARS = 4000
#: Engine failures of one turn that end the investigation (forced finalisation), not the trace.
TURN_FAILURES = (TruncatedOutputError, InvalidOutputError, ContextLengthError)
#: Said under every read/search result while evaluate is still closed (the minimum of read/search
#: turns not met); what a reader of the conversation recognises the closed state by.
EVALUATE_CLOSED = "evaluate opens after"
#: Past tool calls the STM lists (the latest ones; older ones are counted, not listed).
PAST_CALLS_SHOWN = 12
#: Matching lines one search shows (the latest ones, latest first: the strategy traces back from the end).
SEARCH_HITS = 50
#: The largest share by which the engine's count of a prompt may differ from the harness's and
#: still anchor the next one (the joins between messages; past it the counts are in other units).
MAX_DRIFT = 0.02
#: Model turns the room must keep beside a bootstrap read that shows the whole run.
WHOLE_RUN_RESERVE_TURNS = 2
#: A run with more than this many times its room in characters (tokens at `CHARS_PER_TOKEN`) is not tried
#: in wide lines: it cannot fit, and testing it in its own lines counts lines its reads reuse.
WIDE_TRY_CHARS = 2


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
    #: Characters a numbered line holds before it wraps, in a run the investigator navigates: the
    #: granularity its reads and searches page by.
    line_width: int = 200
    #: Characters a line holds when the whole run is shown at once (it fits the room; nothing to
    #: page through); 0 keeps `line_width`. Every line carries its label (``  12 (step 3)| ``, 7-10
    #: tokens): at 200 characters the labels make the view 1.19x the run's own tokens on the dev
    #: split, at 1000 1.05x. scripts/bench_cost.py --methods safari --lengths '' --cache sweep
    #: (2026-12-07), the runs shown whole: uncached prefill per trace token 1.468 at 200, 1.278 at
    #: 1000 (`line_width=1000` alone). A navigated run keeps `line_width`: with 400-character lines
    #: everywhere the oracle at p = 1 missed algorithm-generated/3 grown to 5x the window.
    whole_line_width: int = 1000
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
        if self.whole_line_width and self.whole_line_width < self.line_width:
            raise ValueError("whole_line_width must be 0 or at least line_width")
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


def _ranges(ids: list[int]) -> str:
    """``0-4, 7, 9-12``: step ids in a prompt without listing hundreds of numbers."""
    out: list[str] = []
    for i in ids:
        if out and int(out[-1].split("-")[-1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ", ".join(out)


def evaluator_messages(reasoning: str, question: str, limits: SafariLimits) -> list[Message]:
    """What one evaluator call sees: the investigator's reasoning and one claim, never the run."""
    system = {"role": "system", "content": render("safari/evaluator_system.j2", limits=limits)}
    return [system, {"role": "user", "content": render("safari/evaluator_user.j2", reasoning=reasoning, question=question)}]


def _prose(output: dict[str, Any]) -> str:
    """What a turn's output says in words (analysis, action, reasoning, questions, STM), without
    the tool's arguments (offsets and patterns name no fact of the run)."""
    tool = output.get("tool") or {}
    parts = [output.get("analysis"), output.get("next_action"), tool.get("reasoning"), *(tool.get("questions") or [])]
    stm = output.get("stm")
    return "\n".join([str(p) for p in parts if p] + ([json.dumps(stm, ensure_ascii=False)] if stm else []))


def _step_of(step_id: Any) -> int | None:
    """A submitted step id, or None for the "none" answer (no decisive error)."""
    return None if is_none(step_id) else int(step_id)


class _OutOfBudget(Exception):
    """The next prompt cannot be made to fit the cap: the search ends (forced finalisation)."""


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
        self.view = LineView(ctx.trace, width=opts.line_width, count_tokens=self.count, count_many=ctx.count_tokens_many)
        self.turn_max_tokens = opts.limits.turn_max_tokens(opts.use_stm)
        self.plan, self.meter = plan_context(ctx, self.view, self.turn_max_tokens)
        self.meter.calibrate()
        self.history = History(measure=self.meter.text, per_message=self.meter.per_message)
        # Sized with the shared constant, not this trace's ratio: in window mode every trace then
        # gets the same system prompt, which the prefix cache shares across traces.
        chars_per_unit = 1.0 if self.plan.unit == "chars" else CHARS_PER_TOKEN
        # One observation may take at most a third of the room, so several turns stay visible.
        self.obs_room = None if self.plan.cap is None else max(int(1200 / chars_per_unit), self.plan.cap // 3)
        self.obs_chars = None if self.obs_room is None else int(self.obs_room * chars_per_unit)
        self._size_reads()
        self.min_investigate = min(opts.min_investigate_turns, max(0, opts.max_turns - 2))
        self.actions = ctx.trace.action_steps()
        self.allow_none = bool(ctx.allow_none)  # submit_step may name "none" (localfa.methods.none_answer)
        self.turn_grammar = self._turn_grammar()
        self.eval_grammar = evaluator_grammar(opts.limits)
        self.stm = ShortTermMemory(max_faults=opts.limits.max_faults)
        self.seen_calls: dict[str, int] = {}  # call -> turn whose result holds it (0 = bootstrap)
        self.call_log: list[str] = []  # every read/search call, in order
        self.reminded: list[str] = []  # calls repeated while their result was still in context
        self.seen_steps: set[int] = set()  # steps whose lines appeared in a prompt sent
        self.whole_run_shown = False  # the bootstrap read showed every line: the minimum is met
        self.investigated = 0  # read/search turns that returned a result
        self.evaluations: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []
        self.failure: dict[str, Any] | None = None
        self.budget_stop: dict[str, Any] | None = None
        self.final_failure: str | None = None  # why the forced final could not be produced
        self.last_shown: list[int] = []  # steps of the newest result's lines, in order
        self.largest_prompt = 0  # measured: the engine's own count of the prompts it ran
        self.largest_counted = 0  # what the harness counted before sending
        self.last_counted = 0  # the size the harness counted for the prompt sent last
        self.last_sum = 0  # its messages' own counts and the template's overhead, before any drift
        self.drift: int | None = None  # the engine's count of that prompt less the harness's (tokens)
        self.shrunk = 0
        self.final_stm_trimmed = 0
        self._newest: tuple[int, str, dict[str, Any], dict[str, Any], Shown] | None = None  # turn, kind, kw, entry, result

    # ------------------------------------------------------------------ setup
    def _output_room(self) -> int:
        """A turn's output in the plan's unit: it joins the history once answered."""
        return self.turn_max_tokens * (OUTPUT_CHARS_PER_TOKEN if self.plan.unit == "chars" else 1)

    def _size_reads(self) -> None:
        """The most lines one read may show (a third of the room, in this view's lines) and the
        least a useful read shows."""
        opts, view = self.opts, self.view
        line_chars = view.width + len(view.label(max(0, view.total_lines - 1))) + 3
        line_room = self.obs_chars // line_chars if self.obs_chars else opts.max_read_lines
        self.max_read = max(5, min(opts.max_read_lines, line_room))
        self.useful_read = min(opts.min_read_lines, self.max_read)

    def _turn_grammar(self) -> Grammar:
        opts = self.opts
        return turn_grammar(self.actions, self.view.total_lines, self.max_read, opts.limits, opts.use_stm, self.allow_none)

    def _whole_run(self, room: int | None) -> tuple[LineView, Shown] | None:
        """The whole numbered view and the view it is in, if it fits in `room` units (no cap: if
        one read may show it). With a cap it is tried in `whole_line_width` lines: a run that fits
        is shown, and then read and searched, in those; one that does not keeps `line_width` lines
        (with the same text in more, shorter lines it would not fit either, so it is not counted
        twice). A run with more than `WIDE_TRY_CHARS` times the room's characters at the usual
        characters a token is tested in its own lines instead: it will not fit, and the lines
        counted for that test are ones its later reads show again (each line is tokenised once)."""
        if room is None:
            return (self.view, self.view.read_shown(0, self.view.total_lines)) if self.view.total_lines <= self.max_read else None
        if room <= 0 or self.view.total_chars > room * 16:  # no tokenizer packs 16 characters a token
            return None
        wide = self.opts.whole_line_width
        chars_per_unit = 1.0 if self.plan.unit == "chars" else CHARS_PER_TOKEN
        hopeless = self.view.total_chars > WIDE_TRY_CHARS * room * chars_per_unit
        view = self.view if wide in (0, self.view.width) or hopeless else self.view.rewrapped(wide)
        whole = view.read_shown(0, view.total_lines)
        return (view, whole) if self.meter.fits(whole.text, room) else None

    def _use_view(self, view: LineView) -> None:
        """Read and search `view` from now on: the reads' sizes and the turn grammar's offsets are
        in its lines."""
        self.view = view
        self._size_reads()
        self.turn_grammar = self._turn_grammar()

    def _bootstrap_read(self) -> dict[str, Any]:
        """The read of the run's end: as many final lines as fit in a tool result's room (a cut
        would keep the head of the range and lose the final output it is there to show)."""
        total = self.view.total_lines
        limit = min(self.max_read, total)
        while self.obs_room is not None and limit > 1:
            size = self.meter.text(self.view.read(total - limit, limit))
            if size <= self.obs_room:
                break
            limit = max(1, min(limit - 1, int(limit * self.obs_room / size)))
        return {"name": "read", "offset": total - limit, "limit": limit}

    def _on_top_of_opening(self, system: str, user: str) -> None:
        """A `scale:` budget caps the investigation, on top of the fixed opening prompt (the paper
        capped the conversation; on Who&When the fault's position / K is below any opening prompt)."""
        plan = self.plan
        if plan.mode != "budget" or plan.budget.scale is None or plan.cap is None:
            return
        opening = self.meter.prompt([{"role": "system", "content": system}, {"role": "user", "content": user}])
        cap = opening + (plan.budget.limit or 0)
        self.plan = replace(plan, cap=min(cap, plan.window) if plan.window is not None else cap)
        if self.obs_room is not None and self.plan.cap is not None:
            self.obs_room = max(self.obs_room, self.plan.cap // 3)

    def _start(self) -> None:
        trace, opts, plan = self.ctx.trace, self.opts, self.plan
        limit_text = plan.describe()
        if plan.mode == "budget" and plan.budget.scale is not None and plan.cap is not None:
            unit = "characters" if plan.unit == "chars" else "tokens"
            limit_text = f"these opening instructions plus {plan.budget.limit} {unit} of investigation"

        def system_prompt() -> str:
            return render(
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
                allow_none=self.allow_none,
                search_hits=SEARCH_HITS,
            )

        system = system_prompt()
        observation_steps = len(self.actions) < len(trace.steps)

        def user(fits: bool) -> str:
            return render(
                "safari/user.j2",
                question=shorten(trace.task or "(not recorded)", TASK_MAX_CHARS),
                n_steps=len(trace.steps),
                total_lines=self.view.total_lines,
                total_chars=self.view.total_chars,
                agents=", ".join(agent_names(trace).show(a) for a in agent_choices(trace)) or "unknown",
                names_legend=agent_names(trace).legend,
                context_limit=limit_text,
                fits=fits,
                max_read=self.max_read,
                with_stm=opts.use_stm,
                has_spans=any(s.span_id for s in trace.steps),
                has_tools=any(s.tool_calls or s.observation for s in trace.steps),
                observation_steps=observation_steps,
            )

        self._on_top_of_opening(system, user(True))
        plan = self.plan
        room = None
        if plan.cap is not None:  # the whole run, if it leaves room for the investigation beside it
            fixed = self.meter.prompt([{"role": "system", "content": system}, {"role": "user", "content": user(True)}])
            room = plan.cap - fixed - WHOLE_RUN_RESERVE_TURNS * self._output_room()
        found = self._whole_run(room)
        whole = None if found is None else found[1]
        if found is not None and found[0] is not self.view:  # shown whole in wider lines
            self._use_view(found[0])
            system = system_prompt()  # it states the reads' sizes, now in those lines
        if whole is not None:
            tool: dict[str, Any] = {"name": "read", "offset": 0, "limit": self.view.total_lines}
            action = "Read the whole run: it fits in the context."
            shown = whole
        else:
            tool = self._bootstrap_read()
            action = "Read the final part of the run to see its final output."
            shown = self._run_tool(tool)
            if len(shown.line_steps) == self.view.total_lines:  # the end was all of it
                whole = shown
        self.fits = self.whole_run_shown = whole is not None
        self.history.add_head("system", system)
        self.history.add_head("user", user(self.fits))
        boot: dict[str, Any] = {"next_action": action, "tool": tool}
        if opts.use_stm:
            boot = {"stm": {}, **boot}
        call = _call_text(tool)
        self.history.add_head("assistant", json.dumps(boot, ensure_ascii=False))
        # A partial bootstrap read is summarised like any result once the room is needed.
        summary = None if whole is not None else self._summary(call, shown)
        self.history.add_head("user", self._observation(0, "result", tool_call=call, body=shown.text), shown.steps, summary)
        self.last_shown = list(shown.line_steps)
        self._log_call(tool, 0)
        self.call_log.append(call)
        if whole is not None and self.obs_room is not None and plan.cap is not None:
            # The whole run stays: a later result gets only what is left beside it and a turn.
            left = int(plan.cap * (1 - AIM_UNDER)) - self.history.size() - self.meter.fixed - 2 * self._output_room()
            self.obs_room = max(self.obs_room // 4, min(self.obs_room, left))
        if plan.cap is not None:
            tails = (self._tail(1), self._final_text(self.stm.render_json()))
            head = max(self.meter.prompt(self.history.messages(t), plan.cap) for t in tails)
            if head > plan.cap:  # an estimate far over the cap is counted before the trace is refused
                head = max(self.meter.exact(self.history.messages(t)) for t in tails)
            if head > plan.cap:
                what = (
                    f"budget {plan.budget.label} ({limit_text})"
                    if plan.mode == "budget"
                    else f"the model's window leaves {limit_text} for the prompt, which"
                )
                raise BudgetError(
                    f"{what} is smaller than SAFARI's fixed head: system prompt, user prompt and bootstrap read take {head} {plan.unit}"
                )

    def _summary(self, call: str, shown: Shown) -> Summary:
        """What replaces a result once the room is needed, written then (`localfa.methods.safari.
        summary`): the lines the model quoted or noted and the values it named, else a stub."""
        steps = _ranges(sorted(shown.steps)) or "none"

        def write() -> tuple[str, frozenset[int]]:
            said = [_prose(e["output"]) for e in self.transcript if isinstance(e.get("output"), dict)]
            said.append(self.stm.render_json())
            text, kept = summarise(call, steps, shown.text, said, [f.evidence for f in self.stm.faults])
            return text, frozenset(shown.line_steps[i] for i in kept if i < len(shown.line_steps))

        return write

    # ------------------------------------------------------------------ tools
    def _cut(self, text: str, keep: int, note: str) -> str:
        """`text` cut near `keep` characters, at a line end where there is one, then `note`."""
        head = text[: max(0, keep)]
        nl = head.rfind("\n")
        if nl > keep // 2:
            head = head[:nl]
        return (head + "\n" if head else "") + note

    @staticmethod
    def _kept(shown: Shown, head: str) -> Shown:
        """`shown` cut to `head` (a prefix of its text): the steps of the lines still there."""
        lines = head.count("\n") + (1 if head and not head.endswith("\n") else 0)
        return Shown(head, shown.line_steps[:lines])

    def _cap(self, shown: Shown) -> Shown:
        """A tool result of at most a third of the room, measured in the budget's unit."""
        if self.obs_room is None:
            return shown
        size = self.meter.text(shown.text)
        if size <= self.obs_room:
            return shown
        keep = int(len(shown.text) * self.obs_room / size * 0.95)
        note = f"[... cut: longer than a third of your context ({self.obs_room} {self.plan.unit}); read a smaller range]"
        cut = self._cut(shown.text, keep, note)
        return Shown(cut, self._kept(shown, cut[: len(cut) - len(note)]).line_steps)

    def _run_tool(self, tool: dict[str, Any]) -> Shown:
        if tool["name"] == "read":
            return self._cap(self.view.read_shown(int(tool["offset"]), int(tool["limit"])))
        return self._cap(self.view.search_shown(str(tool["pattern"]), SEARCH_HITS, from_end=True))

    def _log_call(self, tool: dict[str, Any], turn: int) -> None:
        self.seen_calls[_call_text(tool)] = turn
        self.stm.past_tool_calls.append(_short_call(tool))

    @property
    def evaluate_open(self) -> bool:
        """The paper's RULE 5 minimum of read/search turns is met (a run shown whole meets it)."""
        return self.whole_run_shown or self.investigated >= self.min_investigate

    def _loop(self, call: str) -> str | None:
        """The repeated calls when the model goes round in circles, else None. Only repeats whose
        result is still in context count: fetching an evicted result again is what the prompt
        recommends, not a loop."""
        first = self.seen_calls.get(call)
        if first is None or not self.history.holds(first):
            return None
        recent = (self.call_log + [call])[-4:]
        if self.reminded.count(call) >= 1 or (len(recent) == 4 and len(set(recent)) <= 2):
            return "; ".join(dict.fromkeys(recent))
        return None

    def _observation(self, turn: int, kind: str, **kw: Any) -> str:
        kw.setdefault("loop", None)
        kw.pop("full_body", None), kw.pop("kept_chars", None)  # bookkeeping of a shortened result
        closed = kind == "result" and not self.evaluate_open
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
            closed=EVALUATE_CLOSED if closed else None,
            **kw,
        )

    def _tail(self, turn: int) -> str:
        if not self.opts.use_stm:
            return ""
        calls = self.stm.past_tool_calls
        shown = "; ".join(calls[-PAST_CALLS_SHOWN:]) or "none"
        if len(calls) > PAST_CALLS_SHOWN:
            shown = f"({len(calls) - PAST_CALLS_SHOWN} earlier calls not listed) " + shown
        return render("safari/stm.j2", stm=self.stm.render_json(), past_calls=shown, turn=turn, max_turns=self.opts.max_turns)

    # ------------------------------------------------------------------ the budget
    def _shrink_newest(self, over: int) -> bool:
        """Shorten the newest tool result by about `over` units (at least a tenth each time, so
        this ends), saying so in it; False when nothing is left to shorten."""
        if self._newest is None:
            return False
        turn, kind, kw, entry, result = self._newest
        shown = str(kw.get("body") or "")
        full = str(kw.get("full_body", shown))  # always cut from the original result
        kept = int(kw.get("kept_chars", len(full)))
        if not shown or kept <= 0:
            return False
        size = max(1, self.meter.text(shown))
        keep = min(int(kept * 0.9), int(kept * max(0, size - over - 40) / size))
        head = self._cut(full, keep, "") if keep > 0 else ""
        lines = full.count("\n") + 1
        note = f"[... shortened to fit the context budget: {head.count(chr(10))} of {lines} lines shown; read a smaller range for the rest]"
        new_kw = dict(kw, body=head + note, full_body=full, kept_chars=len(head.rstrip(chr(10))) if keep > 0 else 0)
        if not self.history.replace_newest_observation(self._observation(turn, kind, **new_kw), self._kept(result, head).steps):
            return False  # already sent: never rewritten
        self._newest = (turn, kind, new_kw, entry, result)
        entry["shrunk"] = entry.get("shrunk", 0) + 1
        self.shrunk += 1
        return True

    def _fill_room(self, cap: int, limit: int, tail: str) -> None:
        """Use the budget before summarising what was already read: while the last prompt sent
        is under FILL_BEFORE_SUMMARY of the cap, a newest result that overflows is shortened to
        the room left (its note says how many lines are shown), so every prompt before a summary
        is at least that full."""
        if not self.history.turns or self.last_counted >= FILL_BEFORE_SUMMARY * cap:
            return
        for _ in range(FILL_TRIES):
            over = self.history.size(tail) - limit
            if over <= 0 or not self._shrink_newest(over):
                return

    def _fit(self, tail: str, drop_newest: bool = False) -> tuple[list[Message], int]:
        """The prompt (history + `tail`) within the cap, measured as sent: the oldest turns go
        first, then the newest tool result is shortened (or, for the final answer, dropped).
        Returns (messages, turns evicted); raises _OutOfBudget when nothing more can go."""
        cap = self.plan.cap
        # The budget is used up to the cap; past it older results go in one batch (BATCH_TO).
        limit = None if cap is None else cap - self.meter.fixed - max(0, self.drift or 0)
        if cap is not None and limit is not None:
            self._fill_room(cap, limit, tail)
        dropped = self.history.evict_to(limit, tail, None if cap is None else int(cap * BATCH_TO) - self.meter.fixed)
        while True:
            msgs = self.history.messages(tail)
            counted = self.history.size(tail) + self.meter.fixed
            size = self.meter.prompt(msgs, cap, counted, self.drift)
            if cap is None or size <= cap:
                self.last_counted, self.last_sum = size, counted
                self.largest_counted = max(self.largest_counted, size)
                self.seen_steps |= self.history.shown_steps()  # what this prompt shows, the newest result included
                return msgs, dropped
            if self.history.summarise_oldest():
                continue
            if len(self.history.turns) > 1 or (drop_newest and self.history.turns):
                dropped += self.history.evict_oldest()
            elif not (self.history.turns and self._shrink_newest(size - cap)):
                raise _OutOfBudget(f"the prompt takes {size} {self.plan.unit} with every turn evicted that can be (cap {cap})")

    def _evaluate(self, turn: int, tool: dict[str, Any]) -> Calls[tuple[str, dict[str, Any]]]:
        """Ask the evaluator about each question in one batch; the observation's kind and fields."""
        questions = list(tool["questions"])
        n = len(self.evaluations)
        reqs = []
        for i, q in enumerate(questions):
            reqs.append(
                self.ctx.request(
                    f"eval/{n}/{i}",
                    evaluator_messages(tool["reasoning"], q, self.opts.limits),
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
        return "evaluate_pass" if passed else "evaluate_fail", {
            "mean": round(mean, 1),
            "body": body,
            "evaluations_left": self.opts.max_evaluations - len(self.evaluations),
        }

    # ------------------------------------------------------------------ loop
    def _turn(self, turn: int) -> Calls[dict[str, Any]]:
        """One investigator turn: fit the prompt, ask, run the tool. The entry's observation is
        None on an accepted submit."""
        opts = self.opts
        tail = self._tail(turn)
        before = dict(self.meter.measured)
        msgs, dropped = self._fit(tail)
        self.history.seal(tail)  # sent as it is: the next prompt repeats it, it gets its own tail
        measured = sorted(k for k, v in self.meter.measured.items() if v != before.get(k, 0))
        req = self.ctx.request(f"turn/{turn}", msgs, self.turn_grammar, opts.sampling(self.turn_max_tokens))
        (resp,) = yield [req]
        self._measured(resp)
        self.meter.check_unit(f"turn {turn}")
        out = resp.value
        changed = self.stm.merge(out.get("stm")) if opts.use_stm else []
        tool = out["tool"]
        name, call = tool["name"], _call_text(tool)
        entry: dict[str, Any] = {
            "turn": turn,
            "output": out,
            "stm_changed": changed,
            "evicted": dropped,
            "prompt_measure": measured[-1] if measured else None,
            "prompt_tokens": resp.usage.prompt_tokens,
            "prompt_counted": self.last_counted,  # the harness's count, beside the engine's
            "summarised_before": self.history.summarised,  # results summarised before this prompt
            "cached_tokens": resp.usage.cached_tokens,
        }
        kind: str | None = None
        kw: dict[str, Any] = {}
        result = Shown("")
        summary: Summary | None = None
        if name in ("read", "search"):
            loop = self._loop(call)
            first = self.seen_calls.get(call)
            self.call_log.append(call)
            if first is not None and self.history.holds(first):
                kind, kw = "reminder", {"tool_call": call, "first_turn": first, "loop": loop}
                self.reminded.append(call)
                entry["reminder"] = True
            else:
                kind = "result"
                result = self._run_tool(tool)
                summary = self._summary(call, result)
                self.investigated += 1
                kw = {"tool_call": call, "body": result.text, "loop": loop, "refetched": first is not None}
                entry["refetched"] = first is not None
                self._log_call(tool, turn)
            if loop:
                entry["loop_warning"] = True
        elif name == "evaluate":
            if len(self.evaluations) >= opts.max_evaluations:
                kind = "evaluate_exhausted"
            elif not self.evaluations and not self.evaluate_open and turn < opts.max_turns - 1:
                kind = "refused_evaluate"
                entry["refused"] = True
            else:
                kind, kw = yield from self._evaluate(turn, tool)
                entry["evaluation"] = self.evaluations[-1]
            self.stm.past_tool_calls.append(_short_call(tool))
        elif not self.evaluations:
            kind = "refused_submit"
            entry["refused"] = True
            self.stm.past_tool_calls.append(_short_call(tool))
        elif not is_none(tool["step_id"]) and int(tool["step_id"]) not in self.seen_steps:  # the paper: submit only a step you have seen
            kind, kw = "refused_unseen", {"step": int(tool["step_id"])}
            entry["refused"] = True
            self.stm.past_tool_calls.append(_short_call(tool))
        obs = None if kind is None else self._observation(turn, kind, **kw)
        entry["observation"] = obs
        self.transcript.append(entry)
        if obs is not None:
            self.history.add_turn(resp.text, obs, turn, result.steps, summary)
            if result.line_steps:
                self.last_shown = list(result.line_steps)
            self._newest = (turn, kind or "", dict(kw), entry, result)
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
            except _OutOfBudget as exc:
                self.budget_stop = {"turn": turn, "reason": str(exc)}
                break
            if entry["observation"] is None:
                tool = entry["output"]["tool"]
                return self._finish(_step_of(tool["step_id"]), tool["reasoning"], "submitted", turn)
        return (yield from self._forced())

    def _final_text(self, stm_json: str) -> str:
        failure = self.failure
        reason = "failed_turn" if failure else ("budget" if self.budget_stop else "turns")
        return render(
            "safari/finalize.j2",
            reason=reason,
            failure=(failure or {}).get("error", "")[:200],
            max_turns=self.opts.max_turns,
            with_stm=self.opts.use_stm,
            stm=stm_json,
            limits=self.opts.limits,
            steps=_ranges(self._answerable(self.history.shown_steps())),
            allow_none=self.allow_none,
        )

    def _answerable(self, showing: set[int] | None = None) -> list[int]:
        """What a forced answer may name: an action step whose lines a prompt has shown, or the
        prompt being built shows (`showing`: the last result included). A step the model only
        wrote into its STM is not one it has seen."""
        seen = self.seen_steps | (showing or set())
        return [s for s in self.actions if s in seen]

    def _forced(self) -> Program:
        """Forced finalisation: the model must name a step it has seen, from what it has gathered."""
        opts = self.opts
        turns = (self.failure or self.budget_stop or {}).get("turn", opts.max_turns)
        msgs = None
        for stm in self.stm.shrinking_json():  # the full STM first; trimmed only if it cannot fit
            try:
                msgs, _ = self._fit(self._final_text(stm), drop_newest=True)  # what it shows counts as seen
                break
            except _OutOfBudget:
                self.final_stm_trimmed += 1
        steps = self._answerable()
        if not steps:
            if msgs is None:
                raise BudgetError(f"SAFARI's forced final prompt does not fit {self.plan.describe()} even with an empty STM")
            return self._finish(None, "No step appeared in a tool result: nothing to answer.", "no_seen_step", turns)
        if msgs is None:
            self.final_failure = f"the final prompt does not fit {self.plan.describe()} even with an empty STM"
            return self._from_memory(steps, turns)
        grammar = final_grammar(steps, opts.limits, self.allow_none)
        req = self.ctx.request("final", msgs, grammar, opts.sampling(opts.limits.final_max_tokens()))
        try:
            responses: list[Response] = yield [req]
        except TURN_FAILURES as exc:  # the forced final itself could not be produced (issue 53.6)
            self.final_failure = f"{type(exc).__name__}: {exc}"
            return self._from_memory(steps, turns)
        self._measured(responses[0])
        self.meter.check_unit("final")
        value = responses[0].value
        usage = responses[0].usage
        self.transcript.append(
            {"turn": "final", "output": value, "prompt_tokens": usage.prompt_tokens, "prompt_counted": self.last_counted}
        )
        return self._finish(_step_of(value["step_id"]), value["reasoning"], "forced", turns)

    def _from_memory(self, steps: list[int], turns: int) -> Any:
        """The answer when the forced final cannot be produced, with no call: the newest fault the
        STM notes at a step the model was shown, else the last such step a result showed."""
        noted = [f.step_id for f in self.stm.faults if f.step_id in steps]
        if noted:
            step, why = noted[-1], "the fault its memory notes last"
        else:
            shown = [s for s in self.last_shown if s in steps]
            step, why = (shown[-1] if shown else steps[-1]), "the last step it was shown"
        return self._finish(
            step, f"The forced final answer could not be produced ({self.final_failure}); answered from memory: {why}.", "memory", turns
        )

    def _measured(self, resp: Response) -> None:
        """`largest_prompt` is what the engine counted (in characters for a character budget); the
        next prompt's size is anchored on that count (`drift`: what the joins between messages add
        beyond their own counts). A difference larger than joins can make (another unit: an engine
        reporting estimates) anchors nothing."""
        real = resp.usage.prompt_tokens
        # drift is measured against the messages' own sum, not the last size (which held the old drift)
        if self.plan.unit == "tokens" and real and self.last_sum and abs(real - self.last_sum) <= MAX_DRIFT * self.last_sum:
            self.drift = real - self.last_sum
        size = resp.usage.prompt_tokens if self.plan.unit == "tokens" else self.largest_counted
        self.largest_prompt = max(self.largest_prompt, size or self.largest_counted)

    def _forced_by(self, stop: str) -> str | None:
        if stop not in ("forced", "no_seen_step", "memory"):
            return None
        return "turn_failure" if self.failure else ("budget" if self.budget_stop else "max_turns")

    def _finish(self, step: int | None, reasoning: str, stop: str, turns: int) -> Any:
        trace = self.ctx.trace
        note = self.stm.fault(step) if step is not None else None
        evidence = [note.evidence] if note and note.evidence else []
        # Quotes in the final reasoning that really occur in the trace are evidence too.
        evidence += [q for q in quoted_evidence(trace, reasoning) if q not in evidence]
        details = {
            "turns_used": turns,
            "forced_by": self._forced_by(stop),
            "turn_failure": self.failure,
            "final_failure": self.final_failure,
            "budget_stop": self.budget_stop,
            "evaluate_scores": [[v["score"] for v in e["verdicts"]] for e in self.evaluations],
            "evaluate_means": [e["mean"] for e in self.evaluations],
            "evicted_turns": self.history.evicted,
            "budget": self.plan.label,
            "budget_limit": self.plan.cap,
            "investigation_budget": self.plan.budget.limit if self.plan.budget.scale is not None else None,
            "budget_unit": self.plan.unit,
            "token_unit": token_unit(self.ctx),
            "largest_prompt": self.largest_prompt,
            "largest_prompt_counted": self.largest_counted,
            "prompt_measure": dict(self.meter.measured),
            "summarised_results": self.history.summarised,
            "whole_run_shown": self.whole_run_shown,
            "line_width": self.view.width,
            "shrunk_observations": self.shrunk,
            "final_stm_trimmed": self.final_stm_trimmed,
            "warnings": list(self.meter.warnings),
            "trace_fits": self.fits,
            "min_investigate_turns": self.min_investigate,
            "steps_seen": len(self.seen_steps),
            "evidence_verbatim": verify_quotes(trace, evidence),
            "stm": self.stm.as_dict() if self.opts.use_stm else None,
            "stm_faults_dropped": list(self.stm.dropped_faults),  # the fault list's bound (limits.max_faults) hit
            "max_read_lines": self.max_read,
        }
        no_error = step is None and stop in ("submitted", "forced")  # it answered "none" (allowed: none_answer)
        diag = self.ctx.diagnosis(
            METHOD, step=step, no_error=no_error, reasoning=reasoning, evidence=evidence, stop_reason=stop, details=details
        )
        if self.opts.transcript:
            diag.transcript = self.transcript
        return diag
