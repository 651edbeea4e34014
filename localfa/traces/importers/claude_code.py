"""Claude Code runs: the session log under ``~/.claude/projects/<project>/<session>.jsonl`` and the
stream that ``claude -p --output-format stream-json`` prints (harnesses keep it beside their runs).

Session log lines: ``{type: user|assistant|system|summary|file-history-snapshot|..., uuid,
parentUuid, isSidechain, sessionId, agentId?, isMeta?, message: {role, model?, id?, content},
toolUseResult?}``. A streamed answer is written one content block per line, all lines sharing
``message.id``: they are one step. Stream-json lines: ``{type: system (subtype init: model,
tools) | assistant | user | result (result, is_error, subtype), session_id, parent_tool_use_id?,
message?}``.

Steps: an assistant message is one action step (thinking, then its text; its ``tool_use`` blocks
kept as tool calls). A ``tool_result`` block is an observation joined to its call (``call_id``,
the call's tool name). The first user text is the task; later user text, meta messages
(command output, caveats) and system lines are observations. Sub-agents (the Task/Agent tool)
are agents of their own: their lines (``isSidechain``, or ``parent_tool_use_id`` in the stream,
or a ``subagents/agent-<id>.jsonl`` file beside the session) are placed before the Task call's
result, each named after its ``subagent_type``. The final output is the stream's ``result``, else
the lead agent's last text. Not read: summaries, file-history snapshots, queue operations,
token usage.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers import coding
from localfa.traces.importers.common import type_name
from localfa.traces.model import AgentInfo, Step, Trace, normalize_agent

NAME = "claude-code"
SYSTEM = "Claude Code"
TASK_TOOLS = {"Task", "Agent"}
MAX_SUBAGENT_BYTES = 64 * 1024 * 1024
_KINDS = {"user", "assistant"}
_AGENT_ID_TEXT = re.compile(r"agentId:\s*([A-Za-z0-9_-]+)")


def _is_session_line(x: Any) -> bool:
    return isinstance(x, dict) and "sessionId" in x and "parentUuid" in x and "isSidechain" in x


def _is_stream_line(x: Any) -> bool:
    if not isinstance(x, dict) or "session_id" not in x:
        return False
    kind = x.get("type")
    return (kind in _KINDS and isinstance(x.get("message"), dict)) or (kind == "system" and x.get("subtype") == "init") or kind == "result"


def sniff(data: Any) -> bool:
    """JSON Lines whose records carry Claude Code's session keys or its stream-json shape."""
    if not isinstance(data, list):
        return False
    head = data[:50]
    return any(_is_session_line(x) for x in head) or sum(1 for x in head if _is_stream_line(x)) >= 2


@dataclass
class _Line:
    """One user or assistant record, reduced to what the steps need."""

    at: int
    kind: str  # "user" | "assistant" | "system"
    blocks: list[dict[str, Any]]
    group: str | None  # the sub-agent it belongs to (None: the lead agent)
    model: str | None = None
    meta: bool = False
    result_agent: str | None = None  # a Task result: the sub-agent id it names
    msg_id: str | None = None  # assistant lines: the streamed answer they belong to


@dataclass
class _Run:
    lines: list[_Line] = field(default_factory=list)
    init_model: str | None = None
    result: dict[str, Any] | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    session: str | None = None


def _blocks(content: Any, where: str, source: str) -> list[dict[str, Any]]:
    """Content blocks; a block's ``type`` and a tool's ``name`` must be text (they are looked up)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if content is None:
        return []
    if not isinstance(content, list):
        raise TraceError(source, f"{where}.message.content: must be text or an array of blocks, got {type_name(content)}")
    out = []
    for j, b in enumerate(content):
        if not isinstance(b, dict):
            b = {"type": "text", "text": coding.text_of(b, where, source)}
        for key in ("type", "name", "id", "tool_use_id"):
            if b.get(key) is not None and not isinstance(b[key], str):
                raise TraceError(source, f"{where}.message.content[{j}].{key}: must be text, got {type_name(b[key])}")
        out.append(b)
    return out


def _sidechain_groups(records: list[dict[str, Any]]) -> dict[str, str]:
    """uuid -> sub-agent key for session lines on a side chain: the ``agentId`` any line of its
    ``parentUuid`` chain carries, else the chain's root. A line whose parent is missing from the
    file (a trimmed or compacted log) continues the side chain written just before it."""
    side = {r["uuid"]: r for r in records if r.get("isSidechain") and isinstance(r.get("uuid"), str)}
    chain: dict[str, str] = {}
    last: str | None = None
    for uid, r in side.items():  # file order: a parent is met before its children
        parent = r.get("parentUuid") if isinstance(r.get("parentUuid"), str) else None
        if parent in chain:
            chain[uid] = chain[parent]
        elif parent is not None and last is not None:
            chain[uid] = last
        else:
            chain[uid] = f"chain:{uid}"
        last = chain[uid]
    named: dict[str, str] = {}
    for uid, key in chain.items():
        agent = side[uid].get("agentId")
        if isinstance(agent, str) and agent:
            named.setdefault(key, agent)
    return {uid: named.get(key, key) for uid, key in chain.items()}


def _result_agent(record: dict[str, Any], blocks: list[dict[str, Any]]) -> str | None:
    tur = record.get("toolUseResult")
    if isinstance(tur, dict) and isinstance(tur.get("agentId"), str):
        return tur["agentId"]
    if not record.get("isSidechain") and isinstance(record.get("agentId"), str):
        return record["agentId"]
    for b in blocks:
        if b.get("type") == "tool_result":
            m = _AGENT_ID_TEXT.search(coding.text_of(b.get("content"), "", ""))
            if m:
                return m.group(1)
    return None


def _read(records: list[Any], source: str, group_of: dict[str, str] | None = None, force_group: str | None = None) -> _Run:
    run = _Run()
    seen: set[str] = set()
    groups = group_of if group_of is not None else _sidechain_groups([r for r in records if isinstance(r, dict)])
    for i, r in enumerate(records):
        where = f"line {i + 1}"
        if not isinstance(r, dict):
            raise TraceError(source, f"{where}: expected an object, got {type_name(r)}")
        kind = r.get("type") if isinstance(r.get("type"), str) else None
        session = r.get("sessionId") or r.get("session_id")
        run.session = run.session or (session if isinstance(session, str) else None)
        uid = r.get("uuid")
        if isinstance(uid, str) and kind in _KINDS:
            if uid in seen:
                continue  # Claude Code may append a line twice
            seen.add(uid)
        if kind == "system" and r.get("subtype") == "init":
            run.init_model = r.get("model") if isinstance(r.get("model"), str) else None
            continue
        if kind == "result":
            run.result = r
            continue
        if kind == "system" and isinstance(r.get("content"), str) and r["content"].strip():
            run.lines.append(_Line(i, "system", [{"type": "text", "text": r["content"]}], force_group))
            continue
        if kind not in _KINDS:
            label = str(kind if isinstance(kind, str) else "untyped")
            run.skipped[label] = run.skipped.get(label, 0) + 1
            continue
        msg = r.get("message")
        if not isinstance(msg, dict):
            raise TraceError(source, f"{where}: a {kind} line has no 'message' object")
        blocks = _blocks(msg.get("content"), where, source)
        group = force_group
        if group is None and r.get("isSidechain") and isinstance(uid, str):
            group = groups.get(uid)
        if group is None and isinstance(r.get("parent_tool_use_id"), str):
            group = r["parent_tool_use_id"]
        msg_id = msg.get("id") if isinstance(msg.get("id"), str) and kind == "assistant" else None
        prev = run.lines[-1] if run.lines else None
        if msg_id and prev is not None and prev.msg_id == msg_id and prev.group == group:
            prev.blocks.extend(blocks)  # one streamed answer, written block by block
            continue
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        result_agent = _result_agent(r, blocks) if kind == "user" else None
        run.lines.append(_Line(i, kind, blocks, group, model, bool(r.get("isMeta")), result_agent, msg_id))
    return run


def _subagent_files(path: Path, session: str | None) -> list[Path]:
    """``agent-<id>.jsonl`` files Claude Code wrote for this session's sub-agents (2.1+: in
    ``<session>/subagents/``)."""
    if not session:
        return []
    folder = path.parent / session / "subagents"
    return sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []


def _load_subagents(path: Path, run: _Run, source: str, warnings: list[str]) -> None:
    for f in _subagent_files(path, run.session):
        key = f.name[len("agent-") : -len(".jsonl")]
        try:
            if f.stat().st_size > MAX_SUBAGENT_BYTES:
                warnings.append(f"{f.name}: over {MAX_SUBAGENT_BYTES} bytes, not read")
                continue
            records = [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            warnings.append(f"{f.name}: not read ({type(exc).__name__})")
            continue
        sub = _read(records, f"{source} ({f.name})", group_of={}, force_group=key)
        if not any(line.group == key for line in run.lines):
            run.lines.extend(sub.lines)


@dataclass
class _Emit:
    lead: str
    steps: list[Step] = field(default_factory=list)
    agents: list[AgentInfo] = field(default_factory=list)
    call_names: dict[str, str] = field(default_factory=dict)
    task: str | None = None
    last_text: str | None = None  # the lead agent's last words (without its thinking)

    def name(self, wanted: str) -> str:
        taken = {normalize_agent(a.name) for a in self.agents}
        label, n = wanted, 1
        while normalize_agent(label) in taken:
            n += 1
            label = f"{wanted} #{n}"
        self.agents.append(AgentInfo(name=label))
        return label


def _text(blocks: list[dict[str, Any]], kind: str) -> str:
    return "\n".join(str(b.get(kind) or "") for b in blocks if b.get("type") == kind and str(b.get(kind) or "").strip())


@dataclass
class _Subs:
    """The sub-agents' lines by key, their names, the Task calls, and which were placed."""

    lines: dict[str, list[_Line]]
    names: dict[str, str]
    task_calls: set[str]
    placed: set[str] = field(default_factory=set)


def _emit_line(em: _Emit, line: _Line, agent: str, subs: _Subs) -> None:
    if line.kind == "system":
        em.steps.append(coding.observation(len(em.steps), _text(line.blocks, "text"), agent=coding.SYSTEM, role="system"))
        return
    if line.kind == "assistant":
        calls = [
            {"id": b.get("id"), "name": b.get("name"), "arguments": b.get("input")} for b in line.blocks if b.get("type") == "tool_use"
        ]
        for c in calls:
            if isinstance(c["id"], str) and isinstance(c["name"], str):
                em.call_names[c["id"]] = c["name"]
        said = _text(line.blocks, "text")
        if agent == em.lead and said.strip():
            em.last_text = said
        text = coding.with_reasoning(said, _text(line.blocks, "thinking"))
        em.steps.append(coding.action(len(em.steps), agent, text, calls))
        return
    for b in line.blocks:
        if b.get("type") == "tool_result":
            call_id = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None
            key = _sub_key(call_id, line, subs)
            if key is not None:
                _emit_sub(em, key, subs)
            text = coding.text_of(b.get("content"), "", "")
            name = em.call_names.get(call_id or "")
            em.steps.append(coding.observation(len(em.steps), text, call_id=call_id, name=name or ("error" if b.get("is_error") else None)))
        elif b.get("type") in ("text", "image", "document"):
            text = str(b.get("text") or f"<{b.get('type')}>")
            if em.task is None and not line.meta and line.group is None and text.strip():
                em.task = text
                em.steps.append(coding.observation(len(em.steps), text, agent=coding.USER, role="user", name="task"))
            elif line.group is not None and agent != em.lead and not any(s.agent == agent for s in em.steps):
                em.steps.append(coding.observation(len(em.steps), text, agent=coding.USER, role="user", name="subagent prompt"))
            else:
                em.steps.append(coding.observation(len(em.steps), text, agent=coding.USER, role="user", name="meta" if line.meta else None))


def _sub_key(call_id: str | None, line: _Line, subs: _Subs) -> str | None:
    """The sub-agent whose work this Task result returns: named by the result, by the call id
    (stream-json), else the first side chain not yet placed."""
    if call_id is None or call_id not in subs.task_calls:
        return None
    for key in (line.result_agent, call_id):
        if key and key in subs.lines and key not in subs.placed:
            return key
    return next((k for k in subs.lines if k not in subs.placed and k not in subs.task_calls), None)


def _emit_sub(em: _Emit, key: str, subs: _Subs) -> None:
    subs.placed.add(key)
    for line in subs.lines[key]:
        _emit_line(em, line, subs.names[key], subs)


def _sub_names(em: _Emit, run: _Run, subs: dict[str, list[_Line]]) -> dict[str, str]:
    """A name per sub-agent: its Task call's ``subagent_type`` (in call order), and its model."""
    types: list[str] = []
    by_call: dict[str, str] = {}
    for line in run.lines:
        for b in line.blocks:
            if line.kind == "assistant" and b.get("type") == "tool_use" and b.get("name") in TASK_TOOLS:
                args = b.get("input") if isinstance(b.get("input"), dict) else {}
                kind = str(args.get("subagent_type") or "sub-agent")
                types.append(kind)
                if isinstance(b.get("id"), str):
                    by_call[b["id"]] = kind
    names: dict[str, str] = {}
    for i, key in enumerate(subs):
        kind = by_call.get(key) or (types[i] if i < len(types) else "sub-agent")
        model = next((ln.model for ln in subs[key] if ln.model), None)
        names[key] = em.name(coding.agent_label(kind, model))
    return names


def parse(data: Any, path: Path, source: str) -> Trace:
    """A Claude Code session log or stream-json capture as a Trace."""
    if not isinstance(data, list):
        raise TraceError(source, f"not a Claude Code log: expected JSON Lines records, got {type_name(data)}")
    run = _read(data, source)
    warnings: list[str] = []
    _load_subagents(path, run, source, warnings)
    if not any(line.kind == "assistant" for line in run.lines):
        raise TraceError(source, "the log has no assistant message: nothing the agent did")
    model = run.init_model or next((ln.model for ln in run.lines if ln.group is None and ln.model), None)
    em = _Emit(lead=coding.agent_label(SYSTEM, model))
    em.agents.append(AgentInfo(name=em.lead))
    by_key: dict[str, list[_Line]] = {}
    for line in run.lines:
        if line.group is not None:
            by_key.setdefault(line.group, []).append(line)
    task_calls = {
        str(b.get("id"))
        for ln in run.lines
        for b in ln.blocks
        if ln.kind == "assistant" and b.get("type") == "tool_use" and b.get("name") in TASK_TOOLS
    }
    subs = _Subs(by_key, _sub_names(em, run, by_key), task_calls)
    for line in run.lines:
        if line.group is None:
            _emit_line(em, line, em.lead, subs)
    for key in subs.names:  # a side chain no Task result returned (a run cut short): after the rest
        if key not in subs.placed:
            _emit_sub(em, key, subs)
    result = run.result or {}
    final = result.get("result") if isinstance(result.get("result"), str) and result["result"].strip() else None
    final = final or em.last_text
    metadata: dict[str, Any] = {"session_id": run.session} if run.session else {}
    if run.result is not None:
        metadata["exit_status"] = str(result.get("subtype") or ("error" if result.get("is_error") else "success"))
        for key in ("num_turns", "total_cost_usd", "is_error"):
            if key in result:
                metadata[key] = result[key]
    if run.skipped:
        metadata["skipped_records"] = dict(sorted(run.skipped.items()))
    if warnings:
        metadata["import_warnings"] = warnings
    return Trace(
        id=coding.run_id(path),
        source=source,
        format=NAME,
        task=em.task or "",
        agents=em.agents,
        steps=em.steps,
        final_output=final,
        metadata=metadata,
    )
