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
from typing import Any, Callable, ClassVar, Literal

import regex as re
from pydantic import BaseModel, Field, create_model

from localfa.engine.grammar import Grammar
from localfa.engine.types import Sampling, derive_seed
from localfa.limits import Limits, LimitsHit
from localfa.methods.base import BaseMethod, MethodContext, Program
from localfa.methods.fencing import fence_overhead
from localfa.templates import render
from localfa.traces.model import Trace, normalize_agent

HUMAN_NAMES = frozenset({"human", "user"})
TASK_MAX_CHARS = 1500
DEFAULT_MAX_CHARS = 12000
_BLANKS = re.compile(r"\n{3,}")


# ---- fitting the trace into the prompt ---------------------------------------------------------


def shorten(text: str, cap: int) -> str:
    """`text` cut to about `cap` characters, keeping its head and tail around a marker."""
    if len(text) <= cap:
        return text
    cut = len(text) - cap
    marker = f" [... {cut} chars cut ...] "
    keep = max(0, cap - len(marker))
    head = (keep * 2 + 2) // 3
    tail = keep - head
    return text[:head] + marker + (text[len(text) - tail :] if tail > 0 else "")


def water_fill_cap(lengths: list[int], budget: int, min_cap: int = 24) -> int | None:
    """The largest per-item cap c with sum(min(len, c)) <= budget; None if nothing needs cutting."""
    if sum(lengths) <= budget:
        return None
    lo, hi = 0, max(lengths)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return max(lo, min_cap)


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
        texts = [_clean(s.content or s.observation or "") for s in self.trace.steps[:n]]
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
            out.append({"index": i, "agent": self.trace.steps[i].agent, "content": text})
        return out


def agent_choices(trace: Trace) -> list[str]:
    """The trace's speakers in its own spelling (``Orchestrator``, ``WebSurfer``), in order."""
    out: dict[str, str] = {}
    for key in trace.agent_names():
        spelled = (trace.resolve_agent(key) or key).strip() or key
        out.setdefault(normalize_agent(spelled), spelled)
    return list(out.values())


def _start_chars(ctx: MethodContext, max_chars: int | None) -> int:
    """The char budget before any context budget: the option, else what the window holds."""
    if max_chars is not None:
        return max_chars
    if ctx.max_model_len:
        return max(256, int(ctx.max_model_len * _chars_per_token(ctx)))
    return DEFAULT_MAX_CHARS


def _budget_chars(ctx: MethodContext, max_chars: int | None) -> tuple[int, str | None]:
    """The trace char budget under the sweep's context budget (ctx.budget), with a note."""
    max_chars = _start_chars(ctx, max_chars)
    if not ctx.budget or ctx.budget == "none":
        return max_chars, None
    from localfa.methods.budget import limit_in_chars, resolve_budget

    budget = resolve_budget(ctx.budget, ctx.trace, ctx.count_tokens)
    limit_chars = limit_in_chars(budget, _chars_per_token(ctx))
    if limit_chars is None:
        return max_chars, None
    return max(256, min(max_chars, limit_chars)), f"budget {budget.label} -> {limit_chars} chars"


def _chars_per_token(ctx: MethodContext) -> float:
    from localfa.methods.budget import measured_chars_per_token

    return measured_chars_per_token("\n".join(s.content for s in ctx.trace.steps), ctx.count_tokens)


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
        used = sum(int(ctx.count_tokens(m["content"])) + 8 for m in messages)
        if used <= room or char_budget <= 256:
            return char_budget
        char_budget = max(256, int(char_budget * 0.95 * room / used))
    return char_budget


# ---- answer grammars ---------------------------------------------------------------------------


def _agent_step_model(agents: list[str], n_steps: int, reason_chars: int) -> type[BaseModel]:
    return create_model(
        "AgentStepAnswer",
        agent=(Literal[tuple(agents)], ...),  # type: ignore[valid-type,arg-type]
        step=(int, Field(ge=0, le=n_steps - 1)),
        reason=(str, Field(max_length=reason_chars)),
    )


def _step_model(lo: int, hi: int, reason_chars: int) -> type[BaseModel]:
    return create_model("StepAnswer", step=(int, Field(ge=lo, le=hi)), reason=(str, Field(max_length=reason_chars)))


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
        }

    @staticmethod
    def _limits(ctx: MethodContext) -> tuple[LimitsHit, int]:
        """The host limits for this run, and how many of the trace's steps it expands."""
        hit = LimitsHit(Limits.from_env())
        return hit, hit.steps(len(ctx.trace.steps))

    def _system(self) -> dict[str, str]:
        return {"role": "system", "content": render("baselines/system.j2")}


class AllAtOnce(_ModelBaseline):
    name = "all-at-once"

    def run(self, ctx: MethodContext) -> Program:
        trace = ctx.trace
        hit, n = self._limits(ctx)
        agents = agent_choices(trace)
        base = self._vars(ctx, n)
        max_tokens = _json_max_tokens(self.options.reason_chars, agents)

        def messages(budget: int) -> list[dict[str, str]]:
            view = TraceView(trace, budget, hit)
            prompt = render("baselines/all_at_once.j2", **base, steps=view.steps(0, n - 1, view.cap_for(0, n - 1)), agents=agents)
            return [self._system(), {"role": "user", "content": prompt}]

        char_budget, note = _budget_chars(ctx, self.options.max_chars)
        char_budget = fit_char_budget(ctx, char_budget, messages, max_tokens)
        cap = TraceView(trace, char_budget, hit).cap_for(0, n - 1)
        grammar = Grammar.json(_agent_step_model(agents, n, self.options.reason_chars), name="all_at_once")
        req = ctx.request("aao", messages(char_budget), grammar, self._sampling(max_tokens))
        (resp,) = yield [req]
        ans = resp.value
        return ctx.diagnosis(
            self.name,
            step=ans.step,
            agent=ans.agent,
            reasoning=ans.reason,
            details={
                "content_cap": cap,
                "char_budget": char_budget,
                "budget_note": note,
                "ground_truth_shown": base["ground_truth"] is not None,
                "limits_hit": hit.as_details(),
            },
        )


class StepByStep(_ModelBaseline):
    name = "step-by-step"

    def run(self, ctx: MethodContext) -> Program:
        trace = ctx.trace
        hit, n = self._limits(ctx)
        base = self._vars(ctx, n)

        def messages(view: TraceView, cap: int | None, i: int) -> list[dict[str, str]]:
            prompt = render("baselines/step_by_step.j2", **base, steps=view.steps(0, i, cap), current=i, current_agent=trace.steps[i].agent)
            return [self._system(), {"role": "user", "content": prompt}]

        def largest(budget: int) -> list[dict[str, str]]:
            v = TraceView(trace, budget, hit)
            return messages(v, v.cap_for(0, n - 1), n - 1)

        char_budget, note = _budget_chars(ctx, self.options.max_chars)
        char_budget = fit_char_budget(ctx, char_budget, largest, 4)
        view = TraceView(trace, char_budget, hit)
        cap = view.cap_for(0, n - 1)  # one cap for the trace: each prompt extends the previous
        grammar = Grammar.choice(["yes", "no"], name="decisive_yes_no")
        flagged: int | None = None
        for i in range(n):
            req = ctx.request(f"sbs/step/{i}", messages(view, cap, i), grammar, self._sampling(4))
            (resp,) = yield [req]
            if resp.value == "yes":
                flagged = i
                break
        details = {
            "content_cap": cap,
            "char_budget": char_budget,
            "budget_note": note,
            "ground_truth_shown": base["ground_truth"] is not None,
            "checked_steps": (flagged + 1) if flagged is not None else n,
            "limits_hit": hit.as_details(),
        }
        if flagged is None:
            return ctx.diagnosis(
                self.name,
                step=n - 1,
                stop_reason="no_step_flagged",
                reasoning="no step was judged decisive; the last step is predicted",
                details=details,
            )
        return ctx.diagnosis(
            self.name, step=flagged, reasoning=f"step {flagged} is the first step judged the decisive error", details=details
        )


class BinarySearch(_ModelBaseline):
    name = "binary-search"
    Options = BinarySearchOptions
    options: BinarySearchOptions

    def run(self, ctx: MethodContext) -> Program:
        trace = ctx.trace
        hit, n = self._limits(ctx)
        lo, hi = 0, n - 1
        base = self._vars(ctx, n)

        def first_round(budget: int) -> list[dict[str, str]]:
            v = TraceView(trace, budget, hit)
            prompt = render(
                "baselines/binary_search.j2", **base, steps=v.steps(lo, hi, v.cap_for(lo, hi)), lo=lo, hi=hi, mid=lo + (hi - lo) // 2
            )
            return [self._system(), {"role": "user", "content": prompt}]

        char_budget, note = _budget_chars(ctx, self.options.max_chars)
        char_budget = fit_char_budget(ctx, char_budget, first_round, _json_max_tokens(self.options.reason_chars))
        view = TraceView(trace, char_budget, hit)
        halves = Grammar.choice(["upper", "lower"], name="upper_or_lower")
        path: list[dict[str, Any]] = []
        rnd = 0
        while hi - lo + 1 > self.options.final_window:
            mid = lo + (hi - lo) // 2
            prompt = render("baselines/binary_search.j2", **base, steps=view.steps(lo, hi, view.cap_for(lo, hi)), lo=lo, hi=hi, mid=mid)
            req = ctx.request(f"bs/round/{rnd}", [self._system(), {"role": "user", "content": prompt}], halves, self._sampling(4))
            (resp,) = yield [req]
            path.append({"segment": [lo, hi], "answer": resp.value})
            if resp.value == "upper":
                hi = mid
            else:
                lo = mid + 1
            rnd += 1
        details = {
            "path": path,
            "char_budget": char_budget,
            "budget_note": note,
            "ground_truth_shown": base["ground_truth"] is not None,
            "limits_hit": hit.as_details(),
        }
        if lo == hi:  # the halving already ended on one step: nothing left to ask
            return ctx.diagnosis(self.name, step=lo, details=details, reasoning=f"binary search narrowed the trace to step {lo}")
        grammar = Grammar.json(_step_model(lo, hi, self.options.reason_chars), name="binary_search_final")
        prompt = render("baselines/binary_search_final.j2", **base, steps=view.steps(lo, hi, view.cap_for(lo, hi)), lo=lo, hi=hi)
        req = ctx.request(
            "bs/final",
            [self._system(), {"role": "user", "content": prompt}],
            grammar,
            self._sampling(_json_max_tokens(self.options.reason_chars)),
        )
        (resp,) = yield [req]
        ans = resp.value
        return ctx.diagnosis(self.name, step=ans.step, reasoning=ans.reason, details=details)


def _no_calls(program_result: Any) -> Program:
    """Wrap a zero-call result as a (generator) program."""
    return program_result
    yield []  # pragma: no cover - makes this a generator


class RandomFloor(BaseMethod):
    name = "random"

    def run(self, ctx: MethodContext) -> Program:
        rng = random.Random(derive_seed(ctx.seed, ctx.trace.id, "random"))
        step = rng.randrange(len(ctx.trace.steps))
        return (
            yield from _no_calls(
                ctx.diagnosis(self.name, step=step, reasoning="uniformly random step (floor)", details={"rule": "uniform"})
            )
        )


def heuristic_step(trace: Trace) -> int:
    """First step of the most active non-human agent (ties: the one that spoke first)."""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for s in trace.steps:
        key = normalize_agent(s.agent)
        if key in HUMAN_NAMES:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, s.index)
    if not counts:
        return 0
    best = min(counts, key=lambda k: (-counts[k], first[k]))
    return first[best]


class HeuristicFloor(BaseMethod):
    name = "heuristic"

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
