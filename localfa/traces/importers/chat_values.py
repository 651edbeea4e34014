"""Chat messages as instrumentations serialise them, read into `Msg` lists and tool calls.

Span attributes hold the same conversation in many spellings; one reader takes them all, so
the span importers agree on what a message says:
- OpenAI chat (``{role, content, tool_calls: [{id, function: {name, arguments}}]}``), a chat
  completion (``{choices: [{message}]}``), Responses API items (``{type: "message" |
  "function_call" | "function_call_output"}``, ``{output: [...]}``);
- OTel GenAI parts (``{role, parts: [{type: text | tool_call | tool_call_response}]}``);
- LangChain's serialised messages (``{lc, id: [..., "AIMessage"], kwargs: {content, tool_calls}}``,
  ``{type: "human" | "ai" | "tool", content}``, ``["user", "text"]`` tuples) and LangGraph state
  (``{messages: [...]}``);
- Google ADK / Gemini contents (``{role, parts: [{text} | {function_call} | {function_response}]}``,
  ``{contents: [...]}``, ``{content: {parts}}``) and Bedrock / Strands blocks (``{text}``,
  ``{toolUse}``, ``{toolResult}``);
- any-agent's LLM output (``[{"tool.name", "tool.args"}]``).
"""

from __future__ import annotations

from typing import Any

from localfa.traces.importers.common import content_text, dumps
from localfa.traces.importers.llm_inputs import Msg
from localfa.traces.importers.spans import maybe_json

Call = dict[str, Any]
_LC_ROLES = {
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "ToolMessage": "tool",
    "SystemMessage": "system",
    "FunctionMessage": "tool",
    "ChatMessage": "unknown",
}
_TYPE_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system", "model": "assistant"}
_TEXT_PARTS = {"text", "reasoning", "output_text", "input_text", "thinking"}
_MEDIA = {"image_url", "image", "input_image", "blob", "uri", "file", "audio", "input_audio"}


def text_of(value: Any) -> str:
    """A value as step text: strings as they are, anything else as compact JSON ("" for None)."""
    return value if isinstance(value, str) else ("" if value is None else dumps(value))


def calls_text(calls: list[Call]) -> str:
    """Tool calls as ``name(arguments)`` lines: the text of a step that only calls tools."""
    return "\n".join(f"{c.get('name')}({text_of(c.get('arguments'))})" for c in calls)


def tool_names(definitions: list[Any]) -> list[str]:
    """Names of tool definitions (``{type: function, function: {name}}`` or ``{name}``, either
    as objects or as JSON text)."""
    names = []
    for d in map(maybe_json, definitions):
        if isinstance(d, dict):
            fn = d.get("function") if isinstance(d.get("function"), dict) else d
            if isinstance(fn.get("name"), str):
                names.append(fn["name"])
    return names


def bare_call(name: str | None) -> str:
    """The text of a tool span without arguments: ``name()``, or the name itself when it is a
    phrase (the Agents SDK's ``handoff to Billing``)."""
    text = name or "tool"
    return text if " " in text else f"{text}()"


def _call(name: Any, arguments: Any, call_id: Any = None) -> Call:
    call: Call = {"name": name, "arguments": maybe_json(arguments)}
    return {"id": call_id, **call} if call_id is not None else call


def _tool_call(tc: Any) -> Call | None:
    """One entry of a message's tool-call list, in OpenAI, LangChain or any-agent spelling."""
    if not isinstance(tc, dict):
        return None
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else None
    if fn is not None:
        return _call(fn.get("name"), fn.get("arguments"), tc.get("id"))
    if "tool.name" in tc:
        return _call(tc["tool.name"], tc.get("tool.args"), tc.get("id"))
    if "name" in tc:
        return _call(tc["name"], tc.get("args", tc.get("arguments", tc.get("input"))), tc.get("id"))
    return None


def parts(value: Any) -> tuple[str, list[Call]]:
    """(text, tool calls) of a content-part list (GenAI, OpenAI, ADK, Bedrock blocks) or any content."""
    if not isinstance(value, list):
        return content_text(value), []
    texts: list[str] = []
    calls: list[Call] = []
    for p in value:
        if not isinstance(p, dict):
            texts.append(content_text(p))
            continue
        kind = p.get("type")
        if kind in _TEXT_PARTS or (kind is None and isinstance(p.get("text"), str)):
            texts.append(content_text(p.get("content", p.get("text"))))
        elif kind == "tool_call":
            calls.append(_call(p.get("name"), p.get("arguments"), p.get("id")))
        elif kind == "tool_call_response":
            texts.append(text_of(p.get("response", p.get("result"))))
        elif isinstance(p.get("function_call"), dict):  # Gemini / ADK
            fc = p["function_call"]
            calls.append(_call(fc.get("name"), fc.get("args"), fc.get("id")))
        elif isinstance(p.get("function_response"), dict):
            texts.append(text_of(p["function_response"].get("response")))
        elif isinstance(p.get("toolUse"), dict):  # Bedrock / Strands
            tu = p["toolUse"]
            calls.append(_call(tu.get("name"), tu.get("input"), tu.get("toolUseId")))
        elif isinstance(p.get("toolResult"), dict):
            texts.append(parts(p["toolResult"].get("content"))[0])
        elif kind in _MEDIA:
            texts.append("<image>" if "image" in str(kind) else f"<{kind}>")
        else:
            texts.append(dumps(p))
    return "\n".join(t for t in texts if t), calls


def _message(m: dict[str, Any]) -> tuple[Msg, list[Call]]:
    """One message object in any of the spellings above."""
    role = m.get("role")
    if m.get("lc") is not None and isinstance(m.get("kwargs"), dict):  # LangChain dumpd()
        ident = m.get("id")
        cls = ident[-1] if isinstance(ident, list) and ident else ""
        kw = m["kwargs"]
        role = _LC_ROLES.get(cls) or _TYPE_ROLES.get(str(kw.get("type")), "unknown")
        m = kw
    kind = m.get("type")
    if kind == "function_call":  # Responses API item
        call = _call(m.get("name"), m.get("arguments"), m.get("call_id", m.get("id")))
        return Msg(role="assistant", text=calls_text([call])), [call]
    if kind == "function_call_output":
        return Msg(role="tool", text=text_of(maybe_json(m.get("output")))), []
    if role is None:
        role = _TYPE_ROLES.get(str(kind), "unknown")
    content = m.get("content")
    if isinstance(maybe_json(content), list):  # parts serialised as JSON text (Strands events)
        content = maybe_json(content)
    text, calls = parts(m["parts"]) if "parts" in m else parts(content)
    listed = m.get("tool_calls")
    for tc in listed if isinstance(listed, list) else []:
        call = _tool_call(tc)
        if call is not None:
            calls.append(call)
    if isinstance(m.get("function_call"), dict):  # legacy OpenAI
        calls.append(_call(m["function_call"].get("name"), m["function_call"].get("arguments")))
    if "tool.name" in m:  # any-agent output item
        calls.append(_call(m["tool.name"], m.get("tool.args")))
    name = m.get("name") if role != "tool" else None
    msg = Msg(
        role=_TYPE_ROLES.get(str(role), str(role)),
        text=text or calls_text(calls),
        name=str(name) if isinstance(name, str) and name else None,
    )
    return msg, calls


def read_messages(value: Any) -> tuple[list[Msg], list[Call]]:
    """Messages and the tool calls they make, from any serialised conversation (see module doc).

    A bare string is one message of unknown role; unreadable values give no messages.
    """
    value = maybe_json(value)
    if value is None or value == "":
        return [], []
    if isinstance(value, str):
        return [Msg(role="unknown", text=value)], []
    if isinstance(value, dict):
        for key in ("messages", "choices", "output", "contents"):
            if isinstance(value.get(key), list) and key in value and not ("role" in value or "lc" in value):
                items = value[key]
                if key == "choices":
                    items = [c.get("message", c) if isinstance(c, dict) else c for c in items]
                return read_messages(items)
        if isinstance(value.get("content"), dict) and "role" not in value:  # ADK llm_response
            return read_messages(value["content"])
        if isinstance(value.get("generations"), list):  # LangChain LLMResult
            gens = [g for row in value["generations"] for g in (row if isinstance(row, list) else [row])]
            return read_messages([g.get("message") or {"role": "assistant", "content": g.get("text")} for g in gens if isinstance(g, dict)])
        value = [value]
    if not isinstance(value, list):
        return [Msg(role="unknown", text=text_of(value))], []
    msgs: list[Msg] = []
    calls: list[Call] = []
    for item in value:
        if isinstance(item, dict):
            msg, c = _message(item)
        elif isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
            msg, c = Msg(role=_TYPE_ROLES.get(item[0], item[0]), text=content_text(item[1])), []
        else:
            msg, c = Msg(role="unknown", text=content_text(item)), []
        msgs.append(msg)
        calls += c
    return msgs, calls


def output_text(value: Any) -> str:
    """A tool's or span's output as text; a message-shaped output (LangChain ``ToolMessage``,
    ``{role, content}``) gives its content, anything else its text or compact JSON."""
    value = maybe_json(value)
    if isinstance(value, dict) and ("lc" in value or ("content" in value and ("role" in value or "type" in value))):
        msgs, calls = read_messages(value)
        return "\n".join(m.text for m in msgs if m.text) or calls_text(calls)
    return text_of(value)


def state_messages(value: Any) -> tuple[list[Msg], str] | None:
    """A CHAIN span's input/output when it is conversation state (LangGraph ``{messages: [...]}``
    or a message list): (messages, the other state fields as JSON, "" if none); None otherwise."""
    value = maybe_json(value)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        rest = {k: v for k, v in value.items() if k != "messages" and v not in (None, "", [], {})}
        return read_messages(value["messages"])[0], dumps(rest) if rest else ""
    if isinstance(value, list) and value and all(isinstance(m, dict) and ("role" in m or "lc" in m) for m in value):
        return read_messages(value)[0], ""
    return None
