"""Reading a trace file: size limit, UTF-8, JSON or JSON Lines, format detection, import.

Everything that can go wrong with the input surfaces as one `TraceError` whose text says what is
wrong and where (line/column, JSON path, step), so the CLI prints one line and methods skip
or report the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Sequence

import pydantic_core

from localfa.limits import DEFAULT_MAX_TRACE_BYTES, ENV, max_trace_bytes_from_env
from localfa.redact import redact, redact_value
from localfa.traces import importers
from localfa.traces.errors import TraceError
from localfa.traces.importers.common import TRACE_SUFFIXES, check_labels, type_name
from localfa.traces.model import Trace
from localfa.traces.runs import harness_trace_files, visible_files

FORMATS: tuple[str, ...] = importers.FORMATS
DEFAULT_MAX_BYTES = DEFAULT_MAX_TRACE_BYTES
MAX_BYTES_ENV = ENV["max_trace_bytes"]
_SKIP_NAMES = re.compile(r"^(readme|license|licence|copying|notice|changelog)(\..*)?$", re.IGNORECASE)
# A shape an importer did not foresee (pydantic's ValidationError is a ValueError) still gives
# one clear TraceError, never a traceback.
_SHAPE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError)


def max_bytes_from_env(source: str = "") -> int:
    """The size limit: $LOCALFA_MAX_TRACE_BYTES (bytes, or with a K/M/G suffix), else 256 MiB."""
    try:
        return max_trace_bytes_from_env()
    except ValueError as exc:
        raise TraceError(source or MAX_BYTES_ENV, str(exc)) from None


def _mib(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB"


def _read_text(path: Path, source: str, limit: int) -> str:
    data = _read_bytes(path, source, limit)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        return_msg = (
            f"not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start} (line {line}) is not valid UTF-8; re-encode the file as UTF-8"
        )
        raise TraceError(source, return_msg) from None


def _read_bytes(path: Path, source: str, limit: int) -> bytes:
    """The file's bytes, within the size limit."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise TraceError(source, "no such file") from None
    except OSError as e:
        raise TraceError(source, f"cannot read: {e.strerror or e}") from None
    if path.is_dir():
        raise TraceError(source, "is a directory, not a trace file")
    if size > limit:
        raise TraceError(
            source,
            f"file is {_mib(size)} ({size} bytes), over the {_mib(limit)} limit; raise it with "
            f"{MAX_BYTES_ENV} or load_trace(max_bytes=...)",
        )
    try:
        return path.read_bytes()
    except OSError as e:
        raise TraceError(source, f"cannot read: {e.strerror or e}") from None


def _ends_early(e: json.JSONDecodeError, text: str) -> bool:
    """Whether the decoder ran out of input (the file was cut short) rather than met bad text."""
    return e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")


def _concatenated(text: str) -> list[Any] | None:
    """JSON values written one after another (the OTel console exporter's pretty-printed spans),
    or None if the text is not such a sequence."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            return values
        try:
            value, pos = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            return None
        values.append(value)


def _parse_json(text: str, source: str) -> Any:
    """One JSON value, or a list of values for JSON Lines and concatenated JSON objects."""
    if not text.strip():
        raise TraceError(source, "file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if e.msg != "Extra data":
            if _ends_early(e, text):
                raise TraceError(
                    source, f"truncated JSON: the file ends before the value is complete ({e.msg}: line {e.lineno} column {e.colno})"
                ) from None
            raise TraceError(source, f"not valid JSON: {e.msg}: line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise TraceError(source, "not readable JSON: nested too deeply") from None
    # Extra data after the first value: JSON Lines (one value per line), else values one after
    # another over several lines; the error names the line as JSON Lines would.
    values = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as e:
            stream = _concatenated(text)
            if stream is not None:
                return stream
            what = "truncated JSON" if _ends_early(e, line) else "not valid JSON"
            raise TraceError(source, f"{what} on line {lineno} (JSON Lines): {e.msg}: column {e.colno}") from None
        except RecursionError:
            raise TraceError(source, f"not readable JSON on line {lineno} (JSON Lines): nested too deeply") from None
    return values


def _empty_container(data: Any) -> str | None:
    """The 'empty history' message for a known container holding nothing, else None."""
    if not isinstance(data, dict):
        return None
    for key, what in (("chat_history", "messages"), ("messages", "messages"), ("spans", "spans")):
        if data.get(key) == []:
            return f"empty history: '{key}' holds no {what}"
    if isinstance(data.get("resourceSpans"), list):
        n = 0
        for rs in data["resourceSpans"]:
            if not isinstance(rs, dict):
                continue
            scopes = rs.get("scopeSpans")
            for ss in scopes if isinstance(scopes, list) else [{}]:
                if isinstance(ss, dict):
                    n += len(ss["spans"]) if isinstance(ss.get("spans"), list) else 1
        if n == 0:
            return "empty history: the OTLP export holds no spans"
    return None


def _explain_spans(data: Any, source: str) -> None:
    """For span exports no importer took: the precise shape error, or what the spans lack."""
    from localfa.traces.importers.openinference import unwrap_row
    from localfa.traces.importers.spans import collect_spans, is_span_container

    inner, _ = unwrap_row(data, source)
    if not is_span_container(inner):
        return
    spans, _ = collect_spans(inner, source)  # raises a TraceError naming the malformed span
    raise TraceError(
        source,
        f"does not match any known trace format (tried: {', '.join(FORMATS)}): its {len(spans)} spans "
        f"carry neither 'openinference.span.kind' nor 'gen_ai.*' attributes",
    )


def _import(data: Any, format: str | None, p: Path, source: str) -> list[Trace]:
    """Detect the format (unless forced) and run its importer: the runs the file holds."""
    if format is None:
        if not isinstance(data, (dict, list)):
            raise TraceError(source, f"expected a JSON object or array at the top level, got {type_name(data)}")
        if isinstance(data, list):
            if not data:
                raise TraceError(source, "empty history: the array holds no messages or spans")
            bad = next((i for i, x in enumerate(data) if not isinstance(x, dict)), None)
            if bad is not None:
                raise TraceError(source, f"item {bad}: expected an object (a message or a span), got {type_name(data[bad])}")
        format = importers.detect(data)
        if format is None:
            empty = _empty_container(data)
            if empty:
                raise TraceError(source, empty)
            _explain_spans(data, source)
            keys = ""
            if isinstance(data, dict):
                keys = "; top-level keys: " + ", ".join(sorted(map(str, data))[:10])
            elif isinstance(data[0], dict):
                keys = "; first item keys: " + ", ".join(sorted(map(str, data[0]))[:10])
            raise TraceError(source, f"does not match any known trace format (tried: {', '.join(FORMATS)}){keys}")
    try:
        return importers.parse_many(format, data, p, source)
    except TraceError:
        raise
    except _SHAPE_ERRORS as e:
        raise TraceError(source, f"not a valid {format} trace: {type(e).__name__}: {e}") from None


def load_trace(path: str | Path, format: str | None = None, max_bytes: int | None = None) -> Trace:
    """Load one trace file (JSON or JSON Lines) as a `Trace`; raises `TraceError` only.

    `format` forces an importer (one of FORMATS); otherwise the format is detected. `max_bytes`
    caps the file size (default: $LOCALFA_MAX_TRACE_BYTES, else DEFAULT_MAX_BYTES). A file that
    holds several runs (an inspect_ai log of many samples) is read with `load_traces`.
    """
    traces = load_traces(path, format, max_bytes)
    if len(traces) > 1:
        raise TraceError(str(path), f"the file holds {len(traces)} runs ({traces[0].format} samples): read it with load_traces()")
    return traces[0]


def load_traces(path: str | Path, format: str | None = None, max_bytes: int | None = None) -> list[Trace]:
    """Every run one file holds, as Traces (one for most formats; one per sample of an
    inspect_ai log); raises `TraceError` only."""
    source = str(path)
    p = Path(path)
    if format is not None and format not in FORMATS:
        raise TraceError(source, f"unknown format {format!r} (known: {', '.join(FORMATS)})")
    limit = max_bytes if max_bytes is not None else max_bytes_from_env(source)
    repaired: list[str] = []
    if p.name.lower().endswith(importers.inspect_ai.SUFFIX):  # a zip archive, not JSON text
        data: Any = redact_value(importers.inspect_ai.read_archive(_read_bytes(p, source, limit), source))
        format = format or importers.inspect_ai.NAME
    else:
        text = redact(_read_text(p, source, limit))  # a key the trace carries goes no further (`localfa.redact`)
        data = _parse_json(text, source)
        if _SURROGATE_ESCAPE.search(text):  # cheap gate: only JSON escapes can carry a lone surrogate
            try:
                data = _repair_surrogates(data, "$", repaired)
            except RecursionError:
                raise TraceError(source, "not readable JSON: nested too deeply") from None
        del text
    try:
        traces = _import(data, format, p, source)
    except TraceError:
        raise
    except _SHAPE_ERRORS as e:
        raise TraceError(source, f"not a readable trace: {type(e).__name__}: {e}") from None
    for trace in traces:
        if not trace.steps:
            raise TraceError(source, f"empty history: the trace{_which(trace, traces)} has no steps")
        check_labels(trace.labels, len(trace.steps), source)
        _check_writable(trace, source)
        if repaired:
            trace.metadata[REPAIRED] = _repair_note(trace, repaired)
    return traces


def _which(trace: Trace, traces: list[Trace]) -> str:
    return f" {trace.id!r}" if len(traces) > 1 else ""


def _check_writable(trace: Trace, source: str) -> None:
    """Refuse a trace whose free-form parts (tool-call arguments, metadata) cannot be written as
    JSON (nested past the serialiser's depth): it could be neither hashed nor recorded, and a sweep
    would meet that only after its engine started."""
    try:
        pydantic_core.to_json([[s.tool_calls for s in trace.steps], trace.metadata])
    except (ValueError, RecursionError) as e:  # PydanticSerializationError is a ValueError
        raise TraceError(source, f"cannot be written back as JSON (tool-call arguments or metadata): {e}") from None


# A lone UTF-16 surrogate ("\ud83d" without its partner: a stack that cut an emoji in half) is
# valid JSON but no text: it cannot be encoded, hashed, tokenised or written. Each is replaced at
# load by U+FFFD, and the trace says where (`repair_note`).
_SURROGATE_ESCAPE = re.compile(r"\\ud[89a-f]", re.IGNORECASE)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPAIRED = "text_repaired"


def _repair_surrogates(value: Any, where: str, repaired: list[str]) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD; the JSON paths changed go to `repaired`."""
    if isinstance(value, str):
        if _LONE_SURROGATE.search(value):
            repaired.append(where)
            return _LONE_SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, list):
        return [_repair_surrogates(v, f"{where}[{i}]", repaired) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {_repair_surrogates(k, where, repaired): _repair_surrogates(v, f"{where}.{k}", repaired) for k, v in value.items()}
    return value


def _repair_note(trace: Trace, repaired: list[str]) -> str:
    """One line: where lone surrogates were replaced (the first step holding one, else the JSON path)."""
    steps = [s.index for s in trace.steps if "\ufffd" in (s.content or "") + (s.observation or "")]
    where = f"step {steps[0]}" if steps else repaired[0]
    more = (
        f" ({len(repaired) - 1} more places{', steps ' + ', '.join(map(str, steps[:5])) if len(steps) > 1 else ''})"
        if len(repaired) > 1
        else ""
    )
    return f"{where}: a lone UTF-16 surrogate (half of an emoji cut by the writer) was replaced by U+FFFD{more}"


def repair_note(trace: Trace) -> str | None:
    """The load-time repair of this trace's text, as `FILE: step N: ...`, or None (nothing repaired)."""
    note = trace.metadata.get(REPAIRED) if isinstance(trace.metadata, dict) else None
    return f"{trace.source}: {note}" if note else None


def _natural_key(path: Path) -> list[tuple[int, int | str]]:
    key: list[tuple[int, int | str]] = []
    for part in path.parts:
        for chunk in re.split(r"(\d+)", part):
            if chunk.isdigit():
                key.append((0, int(chunk)))
            elif chunk:
                key.append((1, chunk.lower()))
        key.append((2, ""))
    return key


def is_trace_file(path: Path) -> bool:
    """A JSON/JSONL file that is not a README/LICENSE or hidden file."""
    name = path.name
    return path.is_file() and not name.startswith(".") and not _SKIP_NAMES.match(name) and name.lower().endswith(TRACE_SUFFIXES)


def iter_trace_files(paths: Sequence[str | Path]) -> list[Path]:
    """Trace files under `paths`: folders expanded recursively in natural order (2.json < 10.json).

    Files named explicitly are kept whatever their name; inside folders only .json/.jsonl/.ndjson
    files count, README/LICENSE and hidden files are skipped. A missing path is a TraceError.
    """
    return [f for _, f in trace_files_with_roots(paths)]


def trace_files_with_roots(
    paths: Sequence[str | Path], follow_links: bool = False, warn: Callable[[str], None] | None = None
) -> list[tuple[Path, Path]]:
    """(dataset root, file) for every trace file under `paths` (see `iter_trace_files`).

    The root is the folder given on the command line, or the file's own folder for a file given
    explicitly; ids that two files share fall back to the path under it (`localfa.traces.ids.distinct_ids`).
    Inside a folder, a symbolic link to a file outside it is skipped, with one warning through
    `warn` per folder, unless `follow_links` (a folder of traces must not read the host's files
    because a link in it says so); a file named explicitly is read wherever it points.
    """
    out: list[tuple[Path, Path]] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        run = harness_trace_files(p, is_trace_file) if p.is_dir() else None  # Harbor jobs, SWE-bench runs: trajectories
        if run is not None:
            found = sorted(run, key=lambda f: _natural_key(f.relative_to(p)))
            root = p
        elif p.is_dir():
            found = visible_files(p, is_trace_file)
            found.sort(key=lambda f: _natural_key(f.relative_to(p)))
            root = p
        elif p.exists():
            found = [p]
            root = p.parent
        else:
            raise TraceError(str(raw), "no such file or directory")
        if p.is_dir() and not follow_links:
            found = _inside(p, found, warn)
        for f in found:
            real = f.resolve()
            if real not in seen:
                seen.add(real)
                out.append((root, f))
    return out


def _inside(root: Path, found: list[Path], warn: Callable[[str], None] | None) -> list[Path]:
    """The files of `found` that are inside `root` once links are followed; one warning for the rest."""
    top = root.resolve()
    kept: list[Path] = []
    outside: list[Path] = []
    for f in found:
        (kept if f.resolve().is_relative_to(top) else outside).append(f)
    if outside and warn is not None:
        names = ", ".join(str(f) for f in outside[:3]) + (f" and {len(outside) - 3} more" if len(outside) > 3 else "")
        warn(
            f"warning: {root}: skipped {len(outside)} symbolic link{'s' if len(outside) != 1 else ''} to files outside it ({names}); give --follow-links to read them"
        )
    return kept
