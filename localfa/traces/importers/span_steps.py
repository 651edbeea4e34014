"""From spans to steps: the loop the OpenInference and OTel GenAI importers share.

Each importer is a `Dialect`: how to read one span (`SpanRead`: what it said, did, received),
which spans name an agent, and the fallback name. `build` then applies the same rules to both:
- a step's agent is the nearest span, itself or above, that names an agent; the dialect's
  fallback (service name, "agent") only where none is above it;
- one model call, one step: an LLM span nested in another LLM span with the same output (or
  with none) is the same call recorded by another layer (framework, client, provider), merged
  into the outer step;
- LLM inputs keep only what is new since the agent's previous call (`InputTracker`);
- a CHAIN span holding conversation state (LangGraph ``{messages}``) keeps only the messages no
  model call or tool carries, so it never repeats the history; a span left with nothing (a
  grouping span) is not a step, and labels that point at it land on its first step below.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from localfa.traces.errors import TraceError
from localfa.traces.importers.chat_values import Call, calls_text
from localfa.traces.importers.common import dumps, file_stem
from localfa.traces.importers.llm_inputs import InputTracker, Msg, render
from localfa.traces.importers.spans import Span, ancestors, error_notes, ordered, split_traces, unflatten
from localfa.traces.model import AgentInfo, Labels, Step, Trace, normalize_agent
from localfa.traces.quality import step_is_empty

GENERIC_AGENT = "agent"  # the dialects' name for a step no agent span and no service names
_INDEX = re.compile(r"\.\d+(?=\.|$)")


class Attrs:
    """A span's attributes and events, remembering what the importer read (to name the rest)."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self._keys: set[str] = set()
        self._events: set[str] = set()

    def get(self, key: str) -> Any:
        """The attribute `key` (rebuilt from dotted sub-keys if flattened), marked as read."""
        self._keys.add(key)
        return unflatten(self.span.attributes, key)

    def first(self, *keys: str) -> Any:
        """The first of `keys` that is present."""
        return next((v for v in map(self.get, keys) if v is not None), None)

    def named_events(self, *names: str) -> list[tuple[str, dict[str, Any]]]:
        """(name, attributes) of the span events called `names`, in order, marked as read."""
        self._events.update(names)
        return [(ev["name"], ev.get("attributes") or {}) for ev in self.span.events if ev.get("name") in names]

    def events(self, *names: str) -> list[dict[str, Any]]:
        """Attributes of the span events called `names`, in order, marked as read."""
        return [attrs for _, attrs in self.named_events(*names)]

    def unused(self) -> list[str]:
        """Content-like attributes (long text, JSON) and events the importer never looked at."""
        out = []
        for key, value in self.span.attributes.items():
            if any(key == k or key.startswith(k + ".") for k in self._keys) or not _content_like(value):
                continue
            out.append(_INDEX.sub(".N", key))
        for ev in self.span.events:
            name = ev.get("name")
            if name not in self._events and name != "exception" and any(_content_like(v) for v in (ev.get("attributes") or {}).values()):
                out.append(f"event {name}")
        return out


def _content_like(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    text = value.strip()
    return text[:1] in ("[", "{") or (len(text) >= 24 and " " in text)


@dataclass
class SpanRead:
    """What one span says: the dialect's reading, before the shared rules apply."""

    kind: str  # "llm" (a model call), "tool" (a tool run), "span" (agent, chain, anything else)
    role: str
    name: str | None
    content: str = ""
    tool_calls: list[Call] = field(default_factory=list)
    observation: str | None = None
    in_msgs: list[Msg] = field(default_factory=list)  # llm: the conversation sent
    input_text: str | None = None  # llm: the input when it is not messages
    state_in: tuple[list[Msg], str] | None = None  # span: conversation state instead of content
    state_out: tuple[list[Msg], str] | None = None
    system: str | None = None
    tools: list[str] = field(default_factory=list)
    task: str | None = None
    final: str | None = None  # what the span answered, if it is the run's root


@dataclass(frozen=True)
class Dialect:
    """How one span format reads: `read` returns None for spans that are no step at all."""

    read: Callable[[Span, Attrs], SpanRead | None]
    agent_name: Callable[[Span], str | None]
    fallback_agent: Callable[[Span], str]


@dataclass
class Built:
    """Steps and what goes around them in a Trace."""

    steps: list[Step]
    agents: list[AgentInfo]
    task: str
    final: str | None
    span_step: dict[str, int]  # every span id that became, joined or groups a step -> that step
    metadata: dict[str, Any]


def _norm(text: str) -> str:
    return " ".join(text.split())


def _output_key(r: SpanRead) -> tuple[str, str]:
    return _norm(r.content), dumps([(c.get("name"), c.get("arguments")) for c in r.tool_calls])


def _merge_nested_calls(spans: list[Span], reads: dict[int, SpanRead]) -> dict[int, int]:
    """{inner span: outer span} for LLM spans that repeat an enclosing LLM span's call."""
    merged: dict[int, int] = {}
    llm = sorted((o for o, r in reads.items() if r.kind == "llm"), key=lambda o: len(ancestors(spans[o], spans)))
    for o in llm:
        outer = next((a.order for a in ancestors(spans[o], spans)[1:] if a.order in reads and reads[a.order].kind == "llm"), None)
        if outer is None:
            continue
        target = merged.get(outer, outer)
        a, b = reads[target], reads[o]
        ka, kb = _output_key(a), _output_key(b)
        if ka != kb and any(ka) and any(kb):
            continue  # two different answers: two calls
        if not any(ka):
            a.content, a.tool_calls, a.role = b.content, b.tool_calls, b.role
        if len(b.in_msgs) > len(a.in_msgs):
            a.in_msgs = b.in_msgs
        a.input_text = a.input_text or b.input_text
        a.system = a.system or b.system
        a.tools += [t for t in b.tools if t not in a.tools]
        merged[o] = target
    return merged


def _known_texts(reads: dict[int, SpanRead]) -> set[str]:
    """Everything a model call or tool run carries, to recognise state that only repeats it."""
    known: set[str] = set()
    for r in reads.values():
        if r.kind == "span":
            continue
        texts = [r.content, r.observation or "", r.input_text or "", calls_text(r.tool_calls)]
        texts += [m.text for m in r.in_msgs] + [calls_text([c]) for c in r.tool_calls]
        known.update(_norm(t) for t in texts if t.strip())
    return known


def _fresh(state: tuple[list[Msg], str], known: set[str], shown: set[str]) -> str:
    """The state's messages not already carried by a call, a tool or an earlier state."""
    msgs, rest = state
    fresh = []
    for m in msgs:
        key = _norm(m.text)
        if m.role != "system" and key and key not in known and key not in shown:
            shown.add(key)
            fresh.append(m)
    text = render(fresh)
    if rest and _norm(rest) not in shown:
        shown.add(_norm(rest))
        text = f"{text}\n\n{rest}" if text else rest
    return text


def _agent(span: Span, spans: list[Span], dialect: Dialect) -> tuple[str, bool]:
    """(the agent of `span`, whether it is the dialect's fallback: no agent span above it)."""
    for s in ancestors(span, spans):
        name = dialect.agent_name(s)
        if name:
            return name, False
    return dialect.fallback_agent(span), True


def _add_unique(target: list[str], items: list[str]) -> None:
    target += [t for t in items if t and t not in target]


def _above_calls(spans: list[Span], reads: dict[int, SpanRead], merged: dict[int, int]) -> set[int]:
    """Spans with a model call below them: the plumbing around the calls (chains, agent wrappers)."""
    out: set[int] = set()
    for o, r in reads.items():
        if r.kind == "llm" and o not in merged:
            out.update(a.order for a in ancestors(spans[o], spans)[1:])
    return out


def _step_kind(r: SpanRead, sp: Span, wraps_calls: bool, dialect: Dialect) -> Literal["action", "observation"]:
    """What a step of this span is: a model call is an action (a decision); a tool run is an
    observation (the environment's answer); any other span (chain, agent wrapper, graph node) is
    plumbing around calls, an observation, unless no call is recorded below it, it names an agent
    and it records an output: then it is that agent's only record of what it did (an action)."""
    if r.kind == "llm":
        return "action"
    if r.kind == "tool" or wraps_calls or not dialect.agent_name(sp):
        return "observation"
    return "action" if (r.final or (r.observation or "").strip() or r.tool_calls) else "observation"  # what it did, not only what it got


def build(spans: list[Span], dialect: Dialect) -> Built:
    """Steps (start-time order) and agents of a span export, read through `dialect`."""
    order = ordered(spans)
    reads: dict[int, SpanRead] = {}
    attrs: dict[int, Attrs] = {}
    for sp in order:
        a = Attrs(sp)
        r = dialect.read(sp, a)
        if r is not None:
            reads[sp.order], attrs[sp.order] = r, a
    merged = _merge_nested_calls(spans, reads)
    known = _known_texts(reads)
    wrappers = _above_calls(spans, reads, merged)
    tracker = InputTracker()
    steps: list[Step] = []
    step_of: dict[int, int] = {}
    grouping: list[int] = []
    agent_order: dict[str, str] = {}
    fallback_steps: list[int] = []
    prompts: dict[str, str] = {}
    tools: dict[str, list[str]] = {}
    shown: set[str] = set()
    task: str | None = None
    agent_task: str | None = None
    first_user: str | None = None
    last_llm: str | None = None
    for sp in order:
        r = reads.get(sp.order)
        if r is None or sp.order in merged:
            continue
        agent, fallback = _agent(sp, spans, dialect)
        key = normalize_agent(agent)
        task = task or r.task
        if r.kind == "span" and agent_task is None and dialect.agent_name(sp):  # the outermost agent span: its task
            agent_task = r.task or (r.content if r.state_in is None else None) or None
        content, observation, new_input = r.content, r.observation, None
        if r.kind == "llm":
            if r.in_msgs:
                new_input = tracker.new_input(key, r.in_msgs)
                first_user = first_user or next((m.text for m in r.in_msgs if m.role == "user" and m.text.strip()), None)
            elif r.input_text:
                new_input = r.input_text
            tracker.note_output(key, content)
            last_llm = content or last_llm
        if r.state_in is not None:
            content = _fresh(r.state_in, known, shown)
        if r.state_out is not None:
            observation = _fresh(r.state_out, known, shown) or None
        notes = error_notes(sp)
        if notes:
            observation = "\n".join(([observation] if observation else []) + notes)
        kind = _step_kind(r, sp, sp.order in wrappers, dialect)
        if r.kind == "span" and kind == "action" and not content.strip() and r.final:  # a call recorded only at its outer level
            content, new_input = r.final, r.task
        if r.kind == "span" and not (content.strip() or (observation or "").strip() or r.tool_calls):
            grouping.append(sp.order)
            continue
        agent_order.setdefault(key, agent)
        if fallback and key == GENERIC_AGENT:
            fallback_steps.append(len(steps))
        _add_unique(tools.setdefault(key, []), r.tools)
        if r.system:
            prompts.setdefault(key, r.system)
        step_of[sp.order] = len(steps)
        steps.append(
            Step(
                index=len(steps),
                agent=agent,
                role=r.role,
                content=content,
                tool_calls=r.tool_calls,
                observation=observation,
                input=new_input,
                span_id=sp.span_id,
                parent_span_id=sp.parent_id,
                name=r.name,
                start_time=sp.start,
                kind=kind,
            )
        )
    for k, p in tracker.system_prompts.items():
        prompts.setdefault(k, p)
    _one_agent_for_all(steps, fallback_steps, agent_order, prompts, tools)
    roots = [sp for sp in order if sp.parent is None and sp.order in reads]
    final = next((reads[sp.order].final for sp in reversed(roots) if reads[sp.order].final), None)
    root_text = next((reads[sp.order].content for sp in roots if reads[sp.order].kind == "span" and reads[sp.order].content), None)
    metadata: dict[str, Any] = {}
    if len(reads) < len(spans):
        metadata["skipped_spans"] = len(spans) - len(reads)
    if merged:
        metadata["merged_spans"] = len(merged)
    if grouping:
        metadata["grouping_spans"] = len(grouping)
    unused = sorted({u for o, i in step_of.items() if step_is_empty(steps[i]) for u in attrs[o].unused()})
    if unused:
        metadata["unused_attributes"] = unused
    return Built(
        steps=steps,
        agents=[AgentInfo(name=agent_order[k], system_prompt=prompts.get(k), tools=tools.get(k, [])) for k in agent_order],
        task=agent_task or task or first_user or root_text or "",
        final=final or last_llm,
        span_step=_span_steps(spans, order, step_of, merged, grouping + [o for o in wrappers if o in step_of], steps),
        metadata=metadata,
    )


def _one_agent_for_all(
    steps: list[Step], fallback_steps: list[int], agent_order: dict[str, str], prompts: dict[str, str], tools: dict[str, list[str]]
) -> None:
    """Where exactly one agent is named in the run, the steps that no agent span is above and no
    service names (framework spans outside the agent's own span, given the generic name "agent")
    are that agent's: one run, one agent, never split into the agent and "agent"."""
    generic = set(fallback_steps)
    named = {normalize_agent(s.agent) for i, s in enumerate(steps) if i not in generic}
    if len(named) != 1 or not fallback_steps:
        return
    (only,) = named
    for i in fallback_steps:
        old = normalize_agent(steps[i].agent)
        if old == only:
            continue
        steps[i] = steps[i].model_copy(update={"agent": agent_order[only]})
        agent_order.pop(old, None)
        if old in prompts:
            prompts.setdefault(only, prompts.pop(old))
        _add_unique(tools.setdefault(only, []), tools.pop(old, []))


def span_traces(
    fmt: str,
    spans: list[Span],
    meta: dict[str, Any],
    dialect: Dialect,
    path: Path,
    source: str,
    empty: str,
    labels: Callable[[Built], Labels | None] | None = None,
) -> list[Trace]:
    """One Trace per trace the export holds (`split_traces`: a trace id, or spans linked by
    parents), read through `dialect`; a trace whose spans give no step is left out, and with none
    left the export is refused (`empty`: what the spans lack). `labels` (a TRAIL row's) belong to
    one run: with several traces in the file they are refused."""
    groups = split_traces(spans)
    if labels is not None and len(groups) > 1:
        ids = ", ".join(str(g[0].trace_id) for g in groups[:3])
        raise TraceError(source, f"the labels are for one run, but the spans hold {len(groups)} traces (trace ids {ids}, ...)")
    built = [(g, build(g, dialect)) for g in groups]
    kept = [(g, b) for g, b in built if b.steps]
    if not kept:
        raise TraceError(source, f"empty history: {empty}")
    if len(groups) == 1:
        g, b = kept[0]
        return [span_trace(fmt, b, g, meta, path, source, labels(b) if labels is not None else None)]
    names = _trace_names([str(g[0].trace_id) for g, _ in kept])
    out = []
    for (g, b), name in zip(kept, names):
        trace = span_trace(fmt, b, g, meta, path, source)
        extra = {"trace_id": g[0].trace_id, "traces_in_file": len(groups)}
        if len(kept) < len(groups):
            extra["traces_without_steps"] = len(groups) - len(kept)
        out.append(trace.model_copy(update={"id": f"{trace.id}/{name}", "metadata": {**trace.metadata, **extra}}))
    return out


def single(traces: list[Trace], source: str) -> Trace:
    """The one trace of an export, or a TraceError saying that it holds several."""
    if len(traces) > 1:
        raise TraceError(source, f"the export holds {len(traces)} traces: read it with load_traces()")
    return traces[0]


def _trace_names(ids: list[str]) -> list[str]:
    """Short names for the traces of one file: each trace id's first 16 characters (``0x``
    dropped), or the whole id where two would read the same."""
    short = [i.lower().removeprefix("0x")[:16] for i in ids]
    return short if len(set(short)) == len(short) else [i.lower().removeprefix("0x") for i in ids]


def span_trace(
    fmt: str, built: Built, spans: list[Span], meta: dict[str, Any], path: Path, source: str, labels: Labels | None = None
) -> Trace:
    """The Trace of a span export: `built` steps, container metadata, the run's final output
    (a container's own ``final_output`` first, as any-agent writes it)."""
    metadata: dict[str, Any] = {**meta, **built.metadata, "spans": len(spans)}
    final = metadata.pop("final_output", None) or built.final
    return Trace(
        id=file_stem(path),
        source=source,
        format=fmt,
        subset=None,
        task=built.task,
        agents=built.agents,
        steps=built.steps,
        final_output=final,
        ground_truth=None,
        labels=labels,
        metadata=metadata,
    )


def _span_steps(
    spans: list[Span], order: list[Span], step_of: dict[int, int], merged: dict[int, int], folded: list[int], steps: list[Step]
) -> dict[str, int]:
    """Span id -> the step a label at that span means: its own, the call it repeats, or, for a
    span that only groups or wraps others (a grouping span, a chain or agent span around model
    calls), the first action step below it, else the first step below, else the next step, else
    the last. Linear in spans times depth: each step is filed under its ancestors once."""
    out: dict[int, int] = dict(step_of)
    out.update({inner: step_of[outer] for inner, outer in merged.items() if outer in step_of})
    if not step_of:
        return {spans[o].span_id: i for o, i in out.items() if spans[o].span_id}
    below: dict[int, list[int]] = {}  # span -> the steps of the spans under it
    for o, i in step_of.items():
        for a in ancestors(spans[o], spans)[1:]:
            below.setdefault(a.order, []).append(i)
    position = {sp.order: k for k, sp in enumerate(order)}
    step_positions = sorted((position[o], i) for o, i in step_of.items())  # steps follow spans' order
    for g in folded:
        under = below.get(g, [])
        acting = [i for i in under if steps[i].kind == "action"]
        if under:
            out[g] = min(acting or under)
            continue
        k = bisect.bisect_right(step_positions, (position[g], len(steps)))
        out[g] = step_positions[k][1] if k < len(step_positions) else max(step_of.values())
    return {spans[o].span_id: i for o, i in out.items() if spans[o].span_id}
