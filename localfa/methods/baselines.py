"""The Who&When baselines (all-at-once, step-by-step, binary search) and two floors.

Every model answer is grammar-constrained per trace, so a wrong *form* is impossible:

- all-at-once: ONE call sees the whole trace and returns ``{"agent", "step", "reason"}``; the
  agent is one of the trace's speakers, the step an integer inside the trace.
- step-by-step: one call per step, in order, over the trace up to that step: "is this step the
  decisive error?" answered ``yes``/``no``; the first ``yes`` is the prediction. If no step is
  flagged, the last step is predicted (as the reference implementation does). Calls are
  sequential within a trace; the sweep runs many traces at once so the engine still batches.
- binary search: each round shows the current segment and asks ``upper`` (its first half) or
  ``lower`` (its second half); when at most `final_window` steps remain, a final call picks the
  step among them (``{"step", "reason"}``, step bounded to the segment). A halving that ends on a
  single step needs no final call.

Observation steps (tool results, environment output, harness nags: `Step.kind`) are shown but
never answered: every answer grammar admits only `Trace.action_steps()` and the agents acting at
them, step-by-step asks only about action steps, binary search halves the action steps, and the
floors draw among them. A trace with no observation step gets exactly the prompts and grammars
it always had.

Where the caller allows "no decisive error" (`localfa.methods.none_answer`, ``ctx.allow_none``),
all-at-once's and binary search's final grammars admit ``"none"`` (and their prompts say so; binary
search then asks its final call even when the halving ended on one step), and step-by-step answers
it when no step is judged decisive; the floors never do.

Option ``with_ground_truth=True`` puts the task's correct answer in the prompt (the paper's
"with G" setting). Floors, with no model call:

- random: a step drawn uniformly, seeded by ``derive_seed(run seed, trace id, "random")``; the
  agent is whoever acted at that step.
- heuristic: the first step of the most active non-human agent (most steps; ties go to the agent
  that spoke first; agents named "human"/"user" are skipped; if none is left, step 0).

Fitting the prompt: the trace text gets `max_chars` characters; by default (None) as much as the
engine's context window holds (DEFAULT_MAX_CHARS when the window is unknown). A sweep's context
budget (``ctx.budget``: tokens, characters or ``scale:F``) lowers that further; tokens are
converted with the engine's tokenizer, and the finished prompt is measured and shrunk until it
fits the window with room for the answer. When the steps do not fit,
every step keeps its header and the longest contents are cut to a common cap (shorter steps stay
whole), head and tail kept around a ``[... N chars cut ...]`` marker. The cap is computed once per
trace, so step-by-step prompts stay prefixes of each other (prefix caching); binary search
recomputes it per segment, so narrower segments show more of each step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import regex as re

from localfa.engine.grammar import Grammar
from localfa.engine.types import Sampling, derive_seed
from localfa.limits import Limits, LimitsHit, shorten  # noqa: F401 (shorten: used here and by other methods)
from localfa.methods.base import BaseMethod, MethodContext, Program
from localfa.methods.fencing import CLOSE, OPEN, fence_overhead
from localfa.methods.history_window import HistoryWindow
from localfa.methods.names import agent_names
from localfa.methods.none_answer import answer_or_none, is_none, none_diagnosis
from localfa.templates import render
from localfa.traces.importers.common import calls_text
from localfa.traces.model import Step, Trace, normalize_agent

HUMAN_NAMES = frozenset({"human", "user"})
TASK_MAX_CHARS = 1500
DEFAULT_MAX_CHARS = 12000
_BLANKS = re.compile(r"\n{3,}")


# ---- fitting the trace into the prompt ---------------------------------------------------------


def water_fill_cap(lengths: list[int], budget: int, min_cap: int = 24) -> int | None:
    """The largest per-item cap c with sum(min(len, c)) <= budget; None if nothing needs cutting.

    Shortest first: while the rest could all take the next item's length, the item fits whole;
    the first that cannot sets c = what is left, shared by the items still uncut."""
    if sum(lengths) <= budget:
        return None
    left = budget
    ordered = sorted(lengths)
    for i, n in enumerate(ordered):
        rest = len(ordered) - i
        if n * rest > left:
            return max(left // rest, min_cap)
        left -= n
    return max(ordered[-1], min_cap)  # not reached: the lengths fit the budget


def _clean(text: str) -> str:
    return _BLANKS.sub("\n\n", text.strip())


@dataclass
class TraceView:
    """The trace as the baselines show it: a ``[i] agent:`` line then the step's text, fenced
    (`localfa.methods.fencing`), each step first cut to the per-step limit (`localfa.limits`)."""

    trace: Trace
    char_budget: int
    limits: LimitsHit | None = None
    contents: list[str] = field(init=False)

    def __post_init__(self) -> None:
        hit = self.limits
        n = len(self.trace.steps) if hit is None else hit.steps(len(self.trace.steps))
        texts = [_clean(step_text(s)) for s in self.trace.steps[:n]]
        self.contents = texts if hit is None else [hit.step_text(i, t) for i, t in enumerate(texts)]

    def header(self, i: int) -> str:
        return f"[{i}] {self.trace.steps[i].agent}:"

    def cap_for(self, lo: int, hi: int) -> int | None:
        """The content cap that fits steps lo..hi (inclusive) into the char budget."""
        idx = range(lo, hi + 1)
        overhead = sum(len(self.header(i)) + 2 + fence_overhead(f"STEP {i}") for i in idx)
        return water_fill_cap([len(self.contents[i]) for i in idx], max(0, self.char_budget - overhead))

    def steps(self, lo: int, hi: int, cap: int | None) -> list[dict[str, Any]]:
        out = []
        for i in range(lo, hi + 1):
            text = self.contents[i] if cap is None else shorten(self.contents[i], cap)
            step = self.trace.steps[i]
            out.append({"index": i, "agent": step.agent, "content": text, "observation": step.kind == "observation"})
        return out


def step_text(step: Step) -> str:
    """What a step shows: its content (else its observation), and any tool call the content does
    not already spell out (a coding agent's command may live only in its tool calls)."""
    text = step.content or step.observation or ""
    calls = [c for c in (calls_text([c]) for c in step.tool_calls) if c and c not in text]
    return "\n".join([text, *calls]) if calls and text else (text or "\n".join(calls))


def answer_steps(trace: Trace, n: int) -> list[int]:
    """The steps an answer may name among the first `n`: the action steps (every step when the
    trace marks none as an observation)."""
    allowed = [i for i in trace.action_steps() if i < n]
    return allowed or trace.action_steps()[:1]


def agent_choices(trace: Trace) -> list[str]:
    """The agents acting at the trace's action steps, in its own spelling (``Orchestrator``,
    ``WebSurfer``), in order of first appearance."""
    acting = {normalize_agent(trace.steps[i].agent) for i in trace.action_steps()}
    out: dict[str, str] = {}
    for key in (k for k in trace.agent_names() if k in acting):
        spelled = (trace.resolve_agent(key) or key).strip() or key
        out.setdefault(normalize_agent(spelled), spelled)
    return list(out.values())


def shown_agents(trace: Trace) -> dict[str, str]:
    """{the agent's name as a prompt shows it (a safe identifier, or an alias whose original the
    prompt fences: `localfa.methods.names`): its spelling in the trace}, in order of first
    appearance: an answer grammar offers the names the model was shown, and the answer is mapped
    back to the trace's own spelling."""
    names = agent_names(trace)
    out: dict[str, str] = {}
    for name in agent_choices(trace):
        out.setdefault(names.show(name), name)
    return out


def _start_chars(ctx: MethodContext, max_chars: int | None) -> int:
    """The char budget before any context budget: the option, else what the window holds."""
    if max_chars is not None:
        return max_chars
    if ctx.max_model_len:
        return max(256, int(ctx.max_model_len * chars_per_token(ctx)))
    return DEFAULT_MAX_CHARS


def budget_chars(ctx: MethodContext, max_chars: int | None) -> tuple[int, str | None]:
    """The trace char budget under the sweep's context budget (ctx.budget), with a note."""
    max_chars = _start_chars(ctx, max_chars)
    if not ctx.budget or ctx.budget == "none":
        return max_chars, None
    from localfa.methods.budget import limit_in_chars, resolve_budget

    budget = resolve_budget(ctx.budget, ctx.trace, ctx.count_tokens)
    limit_chars = limit_in_chars(budget, chars_per_token(ctx))
    if limit_chars is None:
        return max_chars, None
    return max(256, min(max_chars, limit_chars)), f"budget {budget.label} -> {limit_chars} chars"


def chars_per_token(ctx: MethodContext) -> float:
    from localfa.methods.budget import measured_chars_per_token

    return measured_chars_per_token("\n".join(s.content for s in ctx.trace.steps), ctx.count_tokens)


def history_window(
    ctx: MethodContext, prompt_for: Callable[[int], list[dict[str, str]]], last: int, max_tokens: int
) -> HistoryWindow | None:
    """The steps a growing-history prompt can show (`localfa.methods.history_window`), or None
    without the engine's tokenizer and window (nothing to fit to). `prompt_for(first)` renders
    the prompt about step `last` showing steps `first`..`last`: rendered once with the whole log,
    it is cut into step blocks at their fences' end markers and each block counted once; rendered
    with only the last step, it gives the rest of the prompt, which every question carries."""
    if not ctx.count_tokens or not ctx.max_model_len:
        return None
    count = ctx.count_tokens_many or (lambda texts: [ctx.count_tokens(t) for t in texts])
    text = prompt_for(0)[-1]["content"]
    ends = [text.index(CLOSE.format(label=f"STEP {i}")) + len(CLOSE.format(label=f"STEP {i}")) for i in range(last + 1)]
    first_header = text.rindex("\n", 0, text.index(OPEN.format(label="STEP 0")) - 1) + 1
    blocks = [text[first_header : ends[0]]] + [text[a:b] for a, b in zip(ends, ends[1:])]
    step_tokens = [int(x) + 1 for x in count(blocks)]  # +1: a token may merge across two blocks
    rest = sum(int(x) + 8 for x in count([m["content"] for m in prompt_for(last)])) - step_tokens[-1]
    room = int(ctx.max_model_len * 0.97) - max_tokens - 64 - rest  # as `fit_char_budget` leaves room
    return HistoryWindow(step_tokens, max(room, 1))


def fit_char_budget(
    ctx: MethodContext, char_budget: int, prompt_for: Callable[[int], list[dict[str, str]]], max_tokens: int, margin: int = 64
) -> int:
    """Shrink `char_budget` until the largest prompt fits the engine's context window.

    `prompt_for(budget)` renders the method's largest prompt (the whole trace) as messages. Needs
    the engine's tokenizer (ctx.count_tokens) and window (ctx.max_model_len); without them the
    budget is returned as is.
    """
    if not ctx.count_tokens or not ctx.max_model_len:
        return char_budget
    room = int(ctx.max_model_len * 0.97) - max_tokens - margin  # 3%: chat template, tokenizer drift
    for _ in range(8):
        messages = prompt_for(char_budget)
        texts = [m["content"] for m in messages]  # one engine call for the prompt (a server counts them at once)
        counts = ctx.count_tokens_many(texts) if ctx.count_tokens_many else [ctx.count_tokens(t) for t in texts]
        used = sum(int(n) + 8 for n in counts)
        if used <= room or char_budget <= 256:
            return char_budget
        char_budget = max(256, int(char_budget * 0.95 * room / used))
    return char_budget


# ---- answer grammars ---------------------------------------------------------------------------


def _step_schema(steps: list[int]) -> dict[str, Any]:
    """A step answer: a range when `steps` is contiguous, else exactly the listed steps."""
    if steps == list(range(steps[0], steps[-1] + 1)):
        return {"type": "integer", "minimum": steps[0], "maximum": steps[-1]}
    return {"enum": list(steps)}


def _answer(props: dict[str, Any], title: str, name: str, allow_none: bool = False) -> Grammar:
    """A JSON object of exactly `props`, in order (a dict schema: microseconds, where a pydantic
    model per trace took milliseconds to create); where `allow_none`, or its "none" twin."""
    schema = {"title": title, "type": "object", "properties": props, "required": list(props)}
    return Grammar.json(answer_or_none(schema, allow_none), name=name)


def _agent_step_grammar(agents: list[str], steps: list[int], reason_chars: int, allow_none: bool = False) -> Grammar:
    """All-at-once's answer: one of the trace's agents, one of its answerable steps, a reason;
    where `allow_none`, or ``"none"`` for both (`localfa.methods.none_answer`)."""
    props = {"agent": {"enum": list(agents)}, "step": _step_schema(steps), "reason": {"type": "string", "maxLength": reason_chars}}
    return _answer(props, "AgentStepAnswer", "all_at_once", allow_none)


def _step_grammar(steps: list[int], reason_chars: int, allow_none: bool = False) -> Grammar:
    """Binary search's final answer: one of the steps left (or ``"none"`` where `allow_none`), and a reason."""
    props = {"step": _step_schema(steps), "reason": {"type": "string", "maxLength": reason_chars}}
    return _answer(props, "StepAnswer", "binary_search_final", allow_none)


def _json_max_tokens(reason_chars: int, agents: list[str] | None = None) -> int:
    """Room for the whole JSON answer: a token is at least one character of the string."""
    longest = max((len(a) for a in agents), default=0) if agents else 0
    return 48 + longest + reason_chars


# ---- the methods ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineOptions:
    """Options of the model baselines (``all-at-once:with_ground_truth=true``)."""

    with_ground_truth: bool = False
    max_chars: int | None = None
    reason_chars: int = 200
    temperature: float = 0.7
    top_p: float = 0.95

    def __post_init__(self) -> None:
        if self.max_chars is not None and self.max_chars < 256:
            raise ValueError("max_chars must be at least 256")
        if not 0 < self.reason_chars <= 2000:
            raise ValueError("reason_chars must be in 1..2000")


@dataclass(frozen=True)
class BinarySearchOptions(BaselineOptions):
    final_window: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.final_window < 1:
            raise ValueError("final_window must be at least 1")


class _ModelBaseline(BaseMethod):
    Options: ClassVar[type] = BaselineOptions
    options: BaselineOptions

    def _sampling(self, max_tokens: int) -> Sampling:
        return Sampling(temperature=self.options.temperature, top_p=self.options.top_p, max_tokens=max_tokens)

    def _vars(self, ctx: MethodContext, n_steps: int) -> dict[str, Any]:
        t = ctx.trace
        gt = (t.ground_truth or "").strip() if self.options.with_ground_truth else ""
        return {
            "task": shorten(_clean(t.task or "(not recorded)"), TASK_MAX_CHARS),
            "ground_truth": shorten(gt, 500) if gt else None,
            "n_steps": n_steps,
            "reason_chars": self.options.reason_chars,
            "has_observations": any(s.kind == "observation" for s in t.steps[:n_steps]),
            "first_shown": 0,  # the log from its first step (step-by-step moves it on a run past the window)
            "allow_none": bool(ctx.allow_none),
            "names": agent_names(t),  # agents as the prompt may show them outside a fence
        }

    @staticmethod
    def _limits(ctx: MethodContext) -> tuple[LimitsHit, int]:
        """The host limits for this run, and how many of the trace's steps it expands."""
        hit = LimitsHit(Limits.from_env())
        return hit, hit.steps(len(ctx.trace.steps))

    @staticmethod
    def _details(base: dict[str, Any], hit: LimitsHit, char_budget: int, note: str | None, **own: Any) -> dict[str, Any]:
        """What every model baseline's record says of its prompt, then its own `own` fields."""
        shared = {"char_budget": char_budget, "budget_note": note, "ground_truth_shown": base["ground_truth"] is not None}
        return {**own, **shared, "limits_hit": hit.as_details()}

    def _system(self) -> dict[str, str]:
        return {"role": "system", "content": render("baselines/system.j2")}


class AllAtOnce(_ModelBaseline):
    name = "all-at-once"
    oracle_policy = "localfa.methods.baselines_oracle:ALL_AT_ONCE"
    oracle_mutants = "localfa.methods.baselines_mutants:ALL_AT_ONCE"

    def run(self, ctx: MethodContext) -> Program:
        trace = ctx.trace
        hit, n = self._limits(ctx)
        shown = shown_agents(trace)
        agents = list(shown)
        base = self._vars(ctx, n)
        max_tokens = _json_max_tokens(self.options.reason_chars, agents)

        def messages(budget: int) -> list[dict[str, str]]:
            view = TraceView(trace, budget, hit)
            prompt = render("baselines/all_at_once.j2", **base, steps=view.steps(0, n - 1, view.cap_for(0, n - 1)), agents=agents)
            return [self._system(), {"role": "user", "content": prompt}]

        char_budget, note = budget_chars(ctx, self.options.max_chars)
        char_budget = fit_char_budget(ctx, char_budget, messages, max_tokens)
        cap = TraceView(trace, char_budget, hit).cap_for(0, n - 1)
        grammar = _agent_step_grammar(agents, answer_steps(trace, n), self.options.reason_chars, base["allow_none"])
        req = ctx.request("aao", messages(char_budget), grammar, self._sampling(max_tokens))
        (resp,) = yield [req]
        ans = resp.value
        details = self._details(base, hit, char_budget, note, content_cap=cap)
        if is_none(ans):
            return none_diagnosis(ctx, self.name, ans["reason"], details=details)
        return ctx.diagnosis(
            self.name, step=int(ans["step"]), agent=shown.get(ans["agent"], ans["agent"]), reasoning=ans["reason"], details=details
        )


STEP_FLOOR_CHARS = 2000  # step-by-step shows each step's first and last 1,000 characters at least


class StepByStep(_ModelBaseline):
    name = "step-by-step"
    oracle_policy = "localfa.methods.baselines_oracle:STEP_BY_STEP"
    oracle_mutants = "localfa.methods.baselines_mutants:STEP_BY_STEP"

    def run(self, ctx: MethodContext) -> Program:
        trace = ctx.trace
        hit, n = self._limits(ctx)
        base = self._vars(ctx, n)

        def messages(view: TraceView, cap: int | None, i: int, first: int = 0) -> list[dict[str, str]]:
            steps = view.steps(first, i, cap)
            prompt = render(
                "baselines/step_by_step.j2", **{**base, "first_shown": first}, steps=steps, current=i, current_agent=trace.steps[i].agent
            )
            return [self._system(), {"role": "user", "content": prompt}]

        def largest(budget: int) -> list[dict[str, str]]:
            v = TraceView(trace, budget, hit)
            return messages(v, v.cap_for(0, n - 1), n - 1)

        char_budget, note = budget_chars(ctx, self.options.max_chars)
        char_budget = fit_char_budget(ctx, char_budget, largest, 4)
        view = TraceView(trace, char_budget, hit)
        # One cap for the trace, so each prompt extends the previous; never below a floor that shows
        # a step's own words: past the window the latest steps are shown (history_window), not every
        # step cut to nothing (a 1,000-step run's water-filled cap left each step ~24 characters).
        cap = view.cap_for(0, n - 1)
        if cap is not None:
            cap = max(cap, STEP_FLOOR_CHARS)
        grammar = Grammar.choice(["yes", "no"], name="decisive_yes_no")
        flagged: int | None = None
        asked = answer_steps(trace, n)  # observation steps are shown, never asked about
        last = asked[-1]
        window = history_window(ctx, lambda first: messages(view, cap, last, first), last, 4)
        checked = 0
        for i in asked:
            first = window.first_shown(i) if window else 0
            req = ctx.request(f"sbs/step/{i}", messages(view, cap, i, first), grammar, self._sampling(4))
            (resp,) = yield [req]
            checked += 1
            if resp.value == "yes":
                flagged = i
                break
        details = self._details(base, hit, char_budget, note, content_cap=cap, checked_steps=checked)
        if window and window.bound():
            details["bounds_hit"] = {"history_window": window.bound()}
        if flagged is None and ctx.allow_none:
            return none_diagnosis(ctx, self.name, "no step was judged decisive: the run shows no decisive error", details=details)
        if flagged is None:
            return ctx.diagnosis(
                self.name,
                step=asked[-1],
                stop_reason="no_step_flagged",
                reasoning="no step was judged decisive; the last agent step is predicted",
                details=details,
            )
        return ctx.diagnosis(
            self.name, step=flagged, reasoning=f"step {flagged} is the first step judged the decisive error", details=details
        )


class BinarySearch(_ModelBaseline):
    name = "binary-search"
    oracle_policy = "localfa.methods.baselines_oracle:BINARY_SEARCH"
    oracle_mutants = "localfa.methods.baselines_mutants:BINARY_SEARCH"
    Options = BinarySearchOptions
    options: BinarySearchOptions

    def run(self, ctx: MethodContext) -> Program:
        trace = ctx.trace
        hit, n = self._limits(ctx)
        acts = answer_steps(trace, n)  # the halving runs over the agent steps (all steps when no observation)
        lo, hi = 0, len(acts) - 1  # positions in `acts`
        base = self._vars(ctx, n)

        def shown(a: int, b: int) -> tuple[int, int]:
            """Steps shown for the agent steps acts[a..b]: up to the next agent step (its results)."""
            return (0 if a == 0 else acts[a]), (acts[b + 1] - 1 if b + 1 < len(acts) else n - 1)

        def segment(a: int, b: int) -> tuple[int, int, int]:
            first, last = shown(a, b)
            return first, shown(a, a + (b - a) // 2)[1], last

        def first_round(budget: int) -> list[dict[str, str]]:
            v = TraceView(trace, budget, hit)
            first, mid, last = segment(lo, hi)
            prompt = render(
                "baselines/binary_search.j2", **base, steps=v.steps(first, last, v.cap_for(first, last)), lo=first, hi=last, mid=mid
            )
            return [self._system(), {"role": "user", "content": prompt}]

        char_budget, note = budget_chars(ctx, self.options.max_chars)
        char_budget = fit_char_budget(ctx, char_budget, first_round, _json_max_tokens(self.options.reason_chars))
        view = TraceView(trace, char_budget, hit)
        halves = Grammar.choice(["upper", "lower"], name="upper_or_lower")
        path: list[dict[str, Any]] = []
        rnd = 0
        while hi - lo + 1 > self.options.final_window:
            half = lo + (hi - lo) // 2
            first, mid, last = segment(lo, hi)
            steps = view.steps(first, last, view.cap_for(first, last))
            prompt = render("baselines/binary_search.j2", **base, steps=steps, lo=first, hi=last, mid=mid)
            req = ctx.request(f"bs/round/{rnd}", [self._system(), {"role": "user", "content": prompt}], halves, self._sampling(4))
            (resp,) = yield [req]
            path.append({"segment": [first, last], "answer": resp.value})
            if resp.value == "upper":
                hi = half
            else:
                lo = half + 1
            rnd += 1
        details = self._details(base, hit, char_budget, note, path=path)
        if lo == hi and not ctx.allow_none:  # the halving already ended on one step: nothing left to ask
            return ctx.diagnosis(
                self.name, step=acts[lo], details=details, reasoning=f"binary search narrowed the trace to step {acts[lo]}"
            )
        grammar = _step_grammar(acts[lo : hi + 1], self.options.reason_chars, base["allow_none"])
        first, last = shown(lo, hi)
        prompt = render(
            "baselines/binary_search_final.j2", **base, steps=view.steps(first, last, view.cap_for(first, last)), lo=first, hi=last
        )
        req = ctx.request(
            "bs/final",
            [self._system(), {"role": "user", "content": prompt}],
            grammar,
            self._sampling(_json_max_tokens(self.options.reason_chars)),
        )
        (resp,) = yield [req]
        ans = resp.value
        if is_none(ans):
            return none_diagnosis(ctx, self.name, ans["reason"], details=details)
        return ctx.diagnosis(self.name, step=int(ans["step"]), reasoning=ans["reason"], details=details)


def _no_calls(program_result: Any) -> Program:
    """Wrap a zero-call result as a (generator) program."""
    return program_result
    yield []  # pragma: no cover - makes this a generator


class RandomFloor(BaseMethod):
    name = "random"
    calls_model = False

    def run(self, ctx: MethodContext) -> Program:
        rng = random.Random(derive_seed(ctx.seed, ctx.trace.id, "random"))
        acts = ctx.trace.action_steps()
        step = acts[rng.randrange(len(acts))]
        return (
            yield from _no_calls(
                ctx.diagnosis(self.name, step=step, reasoning="uniformly random step (floor)", details={"rule": "uniform"})
            )
        )


def heuristic_step(trace: Trace) -> int:
    """First step of the most active non-human agent (ties: the one that spoke first), counting
    agent (action) steps only."""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for s in (trace.steps[i] for i in trace.action_steps()):
        key = normalize_agent(s.agent)
        if key in HUMAN_NAMES:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, s.index)
    if not counts:
        return trace.action_steps()[0]
    best = min(counts, key=lambda k: (-counts[k], first[k]))
    return first[best]


class HeuristicFloor(BaseMethod):
    name = "heuristic"
    calls_model = False

    def run(self, ctx: MethodContext) -> Program:
        step = heuristic_step(ctx.trace)
        return (
            yield from _no_calls(
                ctx.diagnosis(
                    self.name,
                    step=step,
                    reasoning="first step of the most active non-human agent (fixed rule, floor)",
                    details={"rule": "first step of the most active non-human agent"},
                )
            )
        )
