"""Span containers, flattened: what the OpenInference and OTel GenAI importers share.

Three container shapes reach us, all read into one flat list of `Span`:
- OTLP JSON (``{"resourceSpans": [{"resource", "scopeSpans": [{"spans": [...]}]}]}``, or one
  such object per line as the OTel file exporter writes), attributes as ``[{key, value: AnyValue}]``;
- span trees as the TRAIL benchmark stores them (``{"trace_id", "spans": [{span_id,
  parent_span_id, span_name, timestamp, span_attributes, child_spans: [...]}]}``: the OTel
  collector's ClickHouse columns in snake case, children nested);
- flat span lists as Arize Phoenix and the OTel console exporter write them (``{name, context:
  {trace_id, span_id}, parent_id, start_time, attributes, span_kind?}``), JSON array, JSON Lines or
  the console exporter's pretty-printed objects one after another; the OTel JS SDK's ReadableSpan
  (``{name, spanContext: {traceId, spanId}, parentSpanId | parentSpanContext, startTime: [s, ns],
  attributes}``, as Vercel AI SDK spans are dumped); any-agent's ``AgentTrace``
  (``{"spans": [...], "final_output"}``, ids as decimal numbers, ``parent: {span_id}``).

Parents are found whatever their spelling (``parent_id``, ``parent_span_id``, ``parentSpanId``,
``ParentSpanId``, ``parent: {span_id}``) and whatever the id's notation: ``0x``-prefixed or bare
hex, decimal numbers, or base64 (protobuf JSON) name the same span.

Attributes are flattened to dotted keys (``llm.input_messages.0.message.role``), so nested
Phoenix attributes and flat TRAIL/OTLP ones read the same. Spans are then ordered by start time
(ties and missing times keep file order, parents before children).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers.common import type_name

_FRACTION = re.compile(r"(\.\d{6})\d+")
_OTLP_STATUS = {2: "ERROR", "STATUS_CODE_ERROR": "ERROR", 1: "OK", "STATUS_CODE_OK": "OK"}


@dataclass
class Span:
    """One span, container-independent."""

    order: int
    span_id: str | None
    parent_id: str | None
    name: str
    start: str | None
    start_ns: int | None
    attributes: dict[str, Any]
    kind: str | None = None  # a top-level span kind field (Phoenix span_kind / OTel kind)
    status: str | None = None
    status_message: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    parent: int | None = None  # index into the flat list
    trace_id: str | None = None


def flatten_attributes(attrs: Any, prefix: str = "") -> dict[str, Any]:
    """Nested attribute objects as dotted keys; lists of objects get their index as a key part."""
    out: dict[str, Any] = {}
    if not isinstance(attrs, dict):
        return out
    for key, value in attrs.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_attributes(value, full + "."))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                out.update(flatten_attributes(item, f"{full}.{i}."))
        else:
            out[full] = value
    return out


def _any_value(v: Any) -> Any:
    """An OTLP AnyValue as a plain value."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [_any_value(x) for x in (v["arrayValue"] or {}).get("values", []) or []]
    if "kvlistValue" in v:
        return {kv.get("key"): _any_value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", []) or []}
    if "bytesValue" in v:
        try:
            return base64.b64decode(v["bytesValue"]).hex()
        except (ValueError, TypeError):
            return v["bytesValue"]
    return None


def _kv_list(items: Any) -> dict[str, Any]:
    """OTLP ``[{key, value}]`` attributes as a (flattened) dict."""
    if isinstance(items, dict):  # some exporters already write a mapping
        return flatten_attributes(items)
    out: dict[str, Any] = {}
    if items is not None and not isinstance(items, list):
        raise ValueError(f"OTLP attributes must be an array of {{key, value}}, got {type_name(items)}")
    for kv in items or []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            val = _any_value(kv.get("value"))
            if isinstance(val, dict):
                out.update(flatten_attributes(val, kv["key"] + "."))
            else:
                out[kv["key"]] = val
    return out


def iso_to_ns(text: str) -> int | None:
    """An ISO-8601 timestamp as Unix nanoseconds (naive times are taken as UTC); None if unreadable."""
    s = text.strip()
    if not s:
        return None
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    s = _FRACTION.sub(r"\1", s)  # fromisoformat takes at most microseconds
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def ns_to_iso(ns: int) -> str:
    """Unix nanoseconds as an ISO-8601 UTC timestamp (microsecond precision)."""
    dt = datetime.fromtimestamp(ns // 1_000 / 1_000_000, tz=timezone.utc)
    return dt.isoformat().replace("+00:00", "Z")


def _time(value: Any) -> tuple[str | None, int | None]:
    """(display text, ns) for a span time given as ISO text or Unix nanoseconds."""
    if value is None or value == "":
        return None, None
    if isinstance(value, bool):
        return None, None
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.strip().isdigit()):
        ns = int(value)
        return ns_to_iso(ns), ns
    if isinstance(value, str):
        return value, iso_to_ns(value)
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        ns = value[0] * 1_000_000_000 + value[1]  # the OTel JS SDK's [seconds, nanoseconds]
        return ns_to_iso(ns), ns
    return None, None


def _id(value: Any, what: str, where: str, source: str) -> str | None:
    """A span/parent id as text (numbers are accepted and written as text); None if absent.

    An all-zero id is OTel's "no parent" and reads as absent.
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return None if value.strip().lower().removeprefix("0x").strip("0") == "" else value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if value else None
    raise TraceError(source, f"{where}: {what} must be text, got {type_name(value)}")


def id_keys(raw: str | None) -> list[str | int]:
    """Every reading of a span id, so that a parent written in another notation still matches.

    ``0xab`` and ``ab`` are the hex number 0xab; an all-digit id may also be decimal (any-agent
    writes ids as numbers); a 12/24-character base64 id (protobuf JSON) is its 8/16 bytes.
    """
    if raw is None:
        return []
    text = raw.strip()
    keys: list[str | int] = [text]
    low = text.lower()
    body = low[2:] if low.startswith("0x") else low
    if body and all(c in string.hexdigits for c in body):
        keys.append(int(body, 16))
    if text.isdigit():
        keys.append(int(text))
    if len(text) in (12, 24) and text.endswith("="):
        try:
            keys.append(int.from_bytes(base64.b64decode(text, validate=True), "big"))
        except (binascii.Error, ValueError):
            pass
    return keys


_PARENT_KEYS = ("parent_span_id", "parent_id", "parentSpanId", "ParentSpanId", "parentId")
_SPAN_ID_KEYS = ("span_id", "spanId", "SpanId", "spanID")
_TRACE_ID_KEYS = ("trace_id", "traceId", "TraceId", "traceID")


def _trace_id(*sources: Any) -> str | None:
    """The first trace id (text or a number) among the objects `sources`, or None."""
    for obj in sources:
        value = _first(obj, _TRACE_ID_KEYS) if isinstance(obj, dict) else None
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip("0x "):
            return str(value)
    return None


def _first(obj: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((obj[k] for k in keys if obj.get(k) not in (None, "")), None)


def _parent_ref(sp: dict[str, Any]) -> Any:
    """The parent id in any of the spellings exporters use (``parent: {span_id}`` included)."""
    ref = _first(sp, _PARENT_KEYS)
    if ref is None and isinstance(sp.get("parentSpanContext"), dict):  # OTel JS SDK 2.x
        ref = _first(sp["parentSpanContext"], _SPAN_ID_KEYS)
    if ref is None and isinstance(sp.get("parent"), dict):
        ref = _first(sp["parent"], _SPAN_ID_KEYS)
    elif ref is None and isinstance(sp.get("parent"), (str, int)) and not isinstance(sp.get("parent"), bool):
        ref = sp["parent"]
    return ref


def _list(value: Any, what: str, where: str, source: str) -> list[Any]:
    """An optional array field ([] when absent)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TraceError(source, f"{where}: '{what}' must be an array, got {type_name(value)}")
    return value


def _context(sp: dict[str, Any]) -> dict[str, Any]:
    """The span's own context object: ``context`` (Phoenix, Python console) or ``spanContext``
    (the OTel JS SDK's ReadableSpan, as Vercel AI SDK exports are dumped)."""
    for key in ("context", "spanContext"):
        if isinstance(sp.get(key), dict):
            return sp[key]  # type: ignore[no-any-return]
    return {}


def _is_span_like(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    return any(k in obj for k in _SPAN_ID_KEYS) or any(k in _context(obj) for k in _SPAN_ID_KEYS)


def is_span_container(data: Any) -> bool:
    """Whether `data` is one of the span containers this module reads."""
    if isinstance(data, dict):
        if isinstance(data.get("resourceSpans"), list):
            return True
        spans = data.get("spans")
        return isinstance(spans, list) and (not spans or _is_span_like(spans[0]))
    if isinstance(data, list) and data:
        first = data[0]
        return _is_span_like(first) or (isinstance(first, dict) and "resourceSpans" in first)
    return False


class _Collector:
    def __init__(self, source: str) -> None:
        self.source = source
        self.spans: list[Span] = []

    def _add(self, span: Span) -> int:
        self.spans.append(span)
        return span.order

    def otlp(self, req: Any, where: str) -> None:
        if not isinstance(req, dict) or not isinstance(req.get("resourceSpans"), list):
            raise TraceError(self.source, f"{where}: expected an OTLP object with 'resourceSpans', got {type_name(req)}")
        for r, rs in enumerate(req["resourceSpans"]):
            if not isinstance(rs, dict):
                raise TraceError(self.source, f"{where}.resourceSpans[{r}]: expected an object, got {type_name(rs)}")
            res = rs.get("resource") if isinstance(rs.get("resource"), dict) else {}
            resource = _kv_list(res.get("attributes"))
            scopes = _list(
                rs.get("scopeSpans", rs.get("instrumentationLibrarySpans")), "scopeSpans", f"{where}.resourceSpans[{r}]", self.source
            )
            for s, ss in enumerate(scopes):
                if not isinstance(ss, dict):
                    raise TraceError(self.source, f"{where}.resourceSpans[{r}].scopeSpans[{s}]: expected an object, got {type_name(ss)}")
                for k, sp in enumerate(_list(ss.get("spans"), "spans", f"{where}.resourceSpans[{r}].scopeSpans[{s}]", self.source)):
                    w = f"{where}.resourceSpans[{r}].scopeSpans[{s}].spans[{k}]"
                    if not isinstance(sp, dict):
                        raise TraceError(self.source, f"{w}: expected a span object, got {type_name(sp)}")
                    start, start_ns = _time(sp.get("startTimeUnixNano"))
                    status = sp.get("status") if isinstance(sp.get("status"), dict) else {}
                    code = status.get("code")
                    events = []
                    for ev in _list(sp.get("events"), "events", w, self.source):
                        if isinstance(ev, dict):
                            events.append({"name": ev.get("name"), "attributes": _kv_list(ev.get("attributes"))})
                    self._add(
                        Span(
                            order=len(self.spans),
                            span_id=_id(sp.get("spanId"), "'spanId'", w, self.source),
                            parent_id=_id(sp.get("parentSpanId"), "'parentSpanId'", w, self.source),
                            name=str(sp.get("name") or ""),
                            start=start,
                            start_ns=start_ns,
                            attributes=_kv_list(sp.get("attributes")),
                            kind=str(sp["kind"]) if sp.get("kind") is not None else None,
                            status=_OTLP_STATUS.get(code) if isinstance(code, (int, str)) else None,
                            status_message=str(status["message"]) if status.get("message") else None,
                            events=events,
                            resource=resource,
                            trace_id=_trace_id(sp),
                        )
                    )

    def tree(self, sp: Any, parent: int | None, where: str) -> None:
        """A TRAIL/Phoenix/console span, and its `child_spans` recursively."""
        if not isinstance(sp, dict):
            raise TraceError(self.source, f"{where}: expected a span object, got {type_name(sp)}")
        ctx = _context(sp)
        attrs = sp.get("span_attributes", sp.get("attributes"))
        if attrs is not None and not isinstance(attrs, dict):
            raise TraceError(self.source, f"{where}: span attributes must be an object, got {type_name(attrs)}")
        start_raw = next((sp[k] for k in ("start_time", "startTime", "timestamp") if sp.get(k) is not None), None)
        start, start_ns = _time(start_raw)
        status = sp.get("status")
        code = sp.get("status_code") or (status.get("status_code") if isinstance(status, dict) else None)
        message = sp.get("status_message") or (status.get("description") if isinstance(status, dict) else None)
        events = []
        for ev in _list(sp.get("events"), "events", where, self.source):
            if isinstance(ev, dict):
                name = ev.get("name", ev.get("Name"))
                ev_attrs = ev.get("attributes", ev.get("Attributes"))
                events.append({"name": name, "attributes": flatten_attributes(ev_attrs) if isinstance(ev_attrs, dict) else {}})
        parent_id = _id(_parent_ref(sp), "the parent span id", where, self.source)
        span_id = _id(_first(sp, _SPAN_ID_KEYS) or _first(ctx, _SPAN_ID_KEYS), "'span_id'", where, self.source)
        resource = sp.get("resource_attributes")
        if resource is None and isinstance(sp.get("resource"), dict):
            resource = sp["resource"].get("attributes")
        idx = self._add(
            Span(
                order=len(self.spans),
                span_id=span_id,
                parent_id=parent_id,
                name=str(sp.get("span_name") or sp.get("name") or ""),
                start=start,
                start_ns=start_ns,
                attributes=flatten_attributes(attrs or {}),
                kind=str(sp.get("span_kind") or sp.get("kind") or "") or None,
                status=str(code).upper().replace("STATUSCODE.", "") if code else None,
                status_message=str(message) if message else None,
                events=events,
                resource=flatten_attributes(resource) if isinstance(resource, dict) else {},
                parent=parent,
                trace_id=_trace_id(sp, ctx),
            )
        )
        children = _list(sp.get("child_spans"), "child_spans", where, self.source)
        for k, child in enumerate(children):
            self.tree(child, idx, f"{where}.child_spans[{k}]")


def any_span(data: Any, test: Callable[[Span], bool]) -> bool:
    """Detection: whether `data` is a readable span container with a span passing `test`."""
    if not is_span_container(data):
        return False
    try:
        spans, _ = collect_spans(data, "")
    except TraceError:
        return False
    return any(test(s) for s in spans)


def collect_spans(data: Any, source: str) -> tuple[list[Span], dict[str, Any]]:
    """All spans in `data` (flat, file order, parents linked) and container metadata."""
    col = _Collector(source)
    meta: dict[str, Any] = {}
    if isinstance(data, dict) and "resourceSpans" in data:
        col.otlp(data, "OTLP")
    elif isinstance(data, dict) and "spans" in data:
        if not isinstance(data["spans"], list):
            raise TraceError(source, f"'spans' must be an array, got {type_name(data['spans'])}")
        for key in ("trace_id", "traceId"):
            if key in data:
                meta["trace_id"] = data[key]
        if isinstance(data.get("final_output"), str):  # any-agent's AgentTrace
            meta["final_output"] = data["final_output"]
        for k, sp in enumerate(data["spans"]):
            col.tree(sp, None, f"spans[{k}]")
    elif isinstance(data, list):
        for k, item in enumerate(data):
            if isinstance(item, dict) and "resourceSpans" in item:
                col.otlp(item, f"item {k}")
            else:
                col.tree(item, None, f"item {k}")
    else:
        raise TraceError(source, f"not a span export: expected OTLP 'resourceSpans' or a 'spans' array, got {type_name(data)}")
    spans = col.spans
    if not spans:
        raise TraceError(source, "empty history: the trace holds no spans")
    by_id: dict[str | int, int] = {}
    for s in spans:
        for key in id_keys(s.span_id):
            by_id.setdefault(key, s.order)
    for s in spans:
        if s.parent is None and s.parent_id:
            found = next((by_id[k] for k in id_keys(s.parent_id) if k in by_id), None)
            if found is not None and found != s.order:
                s.parent = found
        if s.parent is not None and s.parent_id is None:
            s.parent_id = spans[s.parent].span_id
    return spans, meta


def _trace_key(raw: str) -> str | int:
    """One reading of a trace id whatever its notation (hex with or without ``0x``, decimal)."""
    return next((k for k in id_keys(raw) if isinstance(k, int)), raw)


def split_traces(spans: list[Span]) -> list[list[Span]]:
    """The spans of each trace the export holds, each list renumbered (`Span.order`, `Span.parent`)
    so that it reads as an export of its own; one list (the spans as given) for a single trace.

    A trace is a trace id; a span without one belongs to its parent's trace (spans without trace
    ids and parents are one run together), and a span whose parent is in another trace joins that
    trace (a parent link says they are one run). Spans of
    unrelated runs (each call its own trace, as the Vercel AI SDK writes them without a context
    manager) are never merged into one run."""
    group = list(range(len(spans)))

    def find(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    first_of: dict[str | int | None, int] = {}
    for s in spans:
        if s.trace_id is not None or s.parent is None:  # an export without trace ids is one run
            key = _trace_key(s.trace_id) if s.trace_id is not None else None
            group[find(s.order)] = find(first_of.setdefault(key, s.order))
    for s in spans:
        if s.parent is not None:
            group[find(s.order)] = find(s.parent)
    members: dict[int, list[Span]] = {}
    for s in spans:
        members.setdefault(find(s.order), []).append(s)
    if len(members) <= 1:
        return [spans]
    return [_renumbered(m) for m in members.values()]


def _renumbered(members: list[Span]) -> list[Span]:
    index = {s.order: i for i, s in enumerate(members)}
    return [replace(s, order=i, parent=index.get(s.parent) if s.parent is not None else None) for i, s in enumerate(members)]


def ordered(spans: list[Span]) -> list[Span]:
    """Spans in start-time order; a span without a time sorts with the span before it in the file.

    File order is depth-first for trees (parent before child), which breaks ties.
    """
    key: list[tuple[int, int]] = []
    last = -(2**63)
    for s in spans:
        if s.start_ns is not None:
            last = s.start_ns
        key.append((last, s.order))
    return [spans[i] for i in sorted(range(len(spans)), key=lambda i: key[i])]


def ancestors(span: Span, spans: list[Span]) -> list[Span]:
    """`span` itself, then its parent, grand-parent, ... (cycle-safe)."""
    out = [span]
    seen = {span.order}
    cur = span
    while cur.parent is not None and cur.parent not in seen:
        seen.add(cur.parent)
        cur = spans[cur.parent]
        out.append(cur)
    return out


def maybe_json(value: Any) -> Any:
    """Attribute values that hold JSON text (message arrays, arguments) decoded; others as they are."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("[", "{"):
            try:
                return json.loads(text)
            except ValueError:
                return value
    return value


def unflatten(attrs: dict[str, Any], key: str) -> Any:
    """The value under `key`, rebuilt from dotted sub-keys where the exporter flattened it.

    ``gen_ai.prompt.0.role`` / ``gen_ai.prompt.0.content`` under ``gen_ai.prompt`` give
    ``[{"role": ..., "content": ...}]``: objects whose keys are all indices become lists.
    """
    if key in attrs:
        return attrs[key]
    prefix = key + "."
    tree: dict[str, Any] = {}
    for k, v in attrs.items():
        if not k.startswith(prefix):
            continue
        node = tree
        parts = k[len(prefix) :].split(".")
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        node[parts[-1]] = v
    return _lists(tree) if tree else None


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out = {k: _lists(v) for k, v in node.items()}
    if out and all(k.isdigit() for k in out):
        return [out[k] for k in sorted(out, key=int)]
    return out


def error_notes(span: Span) -> list[str]:
    """Error status and recorded exceptions of a span, as short lines for its observation."""
    notes = []
    if span.status == "ERROR":
        notes.append(f"[status ERROR] {span.status_message or ''}".rstrip())
    for ev in span.events:
        if ev.get("name") == "exception":
            a = ev.get("attributes") or {}
            kind, msg = a.get("exception.type"), a.get("exception.message")
            notes.append(f"[exception] {kind or ''}: {msg or ''}".strip())
    return notes
