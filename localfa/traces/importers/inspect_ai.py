"""inspect_ai evaluation logs: ``.eval`` archives and ``.json`` logs, one trace per sample.

A ``.json`` log is ``{version, status, eval: {task, model, ...}, plan, results, stats, samples:
[...]}``; an ``.eval`` archive is a zip of ``header.json`` (the same, without samples) and
``samples/<id>_epoch_<n>.json``, deflate- or zstd-compressed (zstd needs the ``zstandard``
package, or Python 3.14's ``compression.zstd``). Both are read directly; inspect_ai need not be
installed.

Per sample (``{id, epoch, input, target, messages, output, scores, error?, metadata}``): the
system message and the first user message (the task) are observations, each assistant message is
an action step of ``<task> agent (<model>)`` (its reasoning blocks, text and tool calls), each
tool message an observation joined to its call (``tool_call_id``, ``function``; a tool error is
kept in the text). The final output is ``output.completion``. The sample's scores are the
harness's verdict for ``--failed-only``: a sample fails when a score is below full marks (``I``,
``N``, ``P``, or a number under 1; the lowest of a dict of scores); a sample that errored or was
not scored has no verdict. Not read: the events transcript, sandbox and model-usage details.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers import coding
from localfa.traces.importers.common import content_text, first_line, object_items, type_name
from localfa.traces.model import AgentInfo, Step, Trace

NAME = "inspect_ai"
SUFFIX = ".eval"
MAX_MEMBER_BYTES = 256 * 1024 * 1024
_LETTERS = {"C": 1.0, "I": 0.0, "N": 0.0, "P": 0.5}
_ZSTD = 93


def sniff(data: Any) -> bool:
    """An object with an ``eval`` spec (task, model) and ``samples``: an inspect_ai log."""
    if not isinstance(data, dict) or not isinstance(data.get("eval"), dict):
        return False
    spec = data["eval"]
    return "task" in spec and "model" in spec and ("samples" in data or "status" in data)


def _zstd_decompress(raw: bytes, source: str, name: str) -> bytes:
    try:
        import zstandard  # type: ignore[import-not-found,unused-ignore]

        out: bytes = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        return out
    except ImportError:
        pass
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]  # Python 3.14+

        out = zstd.decompress(raw)
        return out
    except ImportError:
        raise TraceError(source, f"{name}: zstd-compressed; install the 'zstandard' package to read .eval archives") from None


def _member(z: zipfile.ZipFile, info: zipfile.ZipInfo, source: str) -> Any:
    if info.file_size > MAX_MEMBER_BYTES:
        raise TraceError(source, f"{info.filename}: {info.file_size} bytes, over the {MAX_MEMBER_BYTES}-byte limit per archive member")
    if info.compress_type == _ZSTD:  # zipfile reads stored and deflate members only (before 3.14)
        data = _zstd_decompress(_raw_member(z, info), source, info.filename)
    else:
        data = z.read(info)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise TraceError(source, f"{info.filename}: not readable JSON ({type(exc).__name__})") from None


def _raw_member(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The compressed bytes of one member: after its local header (30 bytes, name, extra)."""
    if z.fp is None:
        raise ValueError("the archive is closed")
    z.fp.seek(info.header_offset)
    header = z.fp.read(30)
    name_len = int.from_bytes(header[26:28], "little")
    extra_len = int.from_bytes(header[28:30], "little")
    z.fp.seek(info.header_offset + 30 + name_len + extra_len)
    return z.fp.read(info.compress_size)


def read_archive(raw: bytes, source: str) -> dict[str, Any]:
    """An ``.eval`` archive as the ``.json`` log it stands for (header plus samples)."""
    try:
        z = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile:
        raise TraceError(source, "not an inspect_ai .eval archive: not a zip file") from None
    with z:
        infos = {i.filename: i for i in z.infolist()}
        if "header.json" not in infos:
            start = infos.get("_journal/start.json")
            if start is None:
                raise TraceError(source, "not an inspect_ai .eval archive: no header.json or _journal/start.json")
            header = _member(z, start, source)
        else:
            header = _member(z, infos["header.json"], source)
        if not isinstance(header, dict):
            raise TraceError(source, f"header.json: expected an object, got {type_name(header)}")
        samples = [
            _member(z, info, source) for name, info in sorted(infos.items()) if name.startswith("samples/") and name.endswith(".json")
        ]
    return {**header, "samples": samples}


def _score_value(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        if value.upper() in _LETTERS:
            return _LETTERS[value.upper()]
        try:
            return float(value)
        except ValueError:
            return None
    if isinstance(value, dict):
        values = [v for v in map(_score_value, value.values()) if v is not None]
        return min(values) if values else None
    return None


def verdict(sample: dict[str, Any]) -> dict[str, Any]:
    """The sample's scores as a harness verdict (``metadata["harness"]``)."""
    if sample.get("error"):
        message = sample["error"].get("message") if isinstance(sample["error"], dict) else sample["error"]
        return {"harness": NAME, "why": f"sample error: {first_line(str(message), 80)}"}
    scores = sample.get("scores") if isinstance(sample.get("scores"), dict) else {}
    read = {name: _score_value(s.get("value") if isinstance(s, dict) else s) for name, s in scores.items()}
    known = {k: v for k, v in read.items() if v is not None}
    if not known:
        return {"harness": NAME, "why": "not scored"}
    name, worst = min(known.items(), key=lambda kv: kv[1])
    raw = scores[name].get("value") if isinstance(scores[name], dict) else scores[name]
    return {"harness": NAME, "failed": worst < 1.0, "why": f"score {name}={raw!r}", "reward": worst}


def _text(content: Any) -> tuple[str, str]:
    """(text, reasoning) of a message's content: a string or a list of typed blocks."""
    if not isinstance(content, list):
        return content_text(content), ""
    text = [content_text([b]) for b in content if not (isinstance(b, dict) and b.get("type") == "reasoning")]
    reasoning = [str(b.get("reasoning") or b.get("summary") or "") for b in content if isinstance(b, dict) and b.get("type") == "reasoning"]
    return "\n".join(t for t in text if t), "\n".join(r for r in reasoning if r)


def _steps(messages: list[tuple[str, dict[str, Any]]], agent: str, source: str) -> tuple[list[Step], str]:
    steps: list[Step] = []
    task = ""
    names: dict[str, str] = {}
    for where, m in messages:
        role = m.get("role")
        text, reasoning = _text(m.get("content"))
        if role == "assistant":
            calls = []
            for _, c in object_items(m.get("tool_calls"), f"{where}.tool_calls", source):
                call = {"id": c.get("id"), "name": c.get("function"), "arguments": c.get("arguments")}
                if isinstance(call["id"], str) and isinstance(call["name"], str):
                    names[call["id"]] = call["name"]
                calls.append(call)
            steps.append(coding.action(len(steps), agent, coding.with_reasoning(text, reasoning), calls))
        elif role == "system":
            steps.append(coding.observation(len(steps), text, agent=coding.SYSTEM, role="system"))
        elif role == "user" and not task:
            task = text
            steps.append(coding.observation(len(steps), text, agent=coding.USER, role="user", name="task"))
        elif role == "tool":
            call_id = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
            error = m.get("error")
            if isinstance(error, dict) and error.get("message"):
                text = f"{text}\n[tool error: {error.get('type', 'error')}] {error['message']}".strip()
            name = m.get("function") if isinstance(m.get("function"), str) else names.get(call_id or "")
            steps.append(coding.observation(len(steps), text, call_id=call_id, name=name))
        else:
            steps.append(coding.observation(len(steps), text, agent=coding.USER, role=str(role or "user")))
    return steps, task


def _sample_trace(log: dict[str, Any], sample: dict[str, Any], where: str, path: Path, source: str, many_epochs: bool) -> Trace:
    spec = log["eval"]
    model = spec.get("model") if isinstance(spec.get("model"), str) else None
    agent = coding.agent_label(f"{spec.get('task') or 'inspect'} agent", model)
    messages = object_items(sample.get("messages"), f"{where}.messages", source, "a message object")
    if not messages:
        raise TraceError(source, f"{where}: the sample has no messages")
    steps, task = _steps(messages, agent, source)
    key = str(sample.get("id"))
    if many_epochs:
        key += f"@epoch{sample.get('epoch')}"
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    final = output.get("completion") if isinstance(output.get("completion"), str) and output["completion"].strip() else None
    if final is None:
        final = next((s.content for s in reversed(steps) if s.kind == "action" and s.content.strip()), None)
    target = sample.get("target")
    metadata: dict[str, Any] = {
        "log_sample": key,
        "harness": verdict(sample),
        "eval": {k: spec[k] for k in ("task", "model", "run_id", "eval_id") if k in spec},
    }
    return Trace(
        id=f"{coding.run_id(path)}/{key}",
        source=source,
        format=NAME,
        task=task or content_text(sample.get("input")),
        agents=[AgentInfo(name=agent, system_prompt=next((s.content for s in steps if s.role == "system"), None))],
        steps=steps,
        final_output=final,
        ground_truth=content_text(target) if target is not None else None,
        metadata=metadata,
    )


def parse_many(data: Any, path: Path, source: str) -> list[Trace]:
    """Every sample of an inspect_ai log as a Trace, in the log's order."""
    if not sniff(data):
        raise TraceError(source, "not an inspect_ai log: expected an object with 'eval' (task, model) and 'samples'")
    samples = object_items(data.get("samples"), "samples", source, "a sample object")
    if not samples:
        status = data.get("status")
        raise TraceError(source, f"empty history: the log holds no samples (status {status!r}; a header-only log keeps none)")
    many_epochs = len({s.get("epoch") for _, s in samples}) > 1
    return [_sample_trace(data, s, where, path, source, many_epochs) for where, s in samples]


def parse(data: Any, path: Path, source: str) -> Trace:
    """A one-sample log as a Trace (a log of several is read with `parse_many`)."""
    traces = parse_many(data, path, source)
    if len(traces) > 1:
        raise TraceError(source, f"the log holds {len(traces)} samples: read it with load_traces() (bench, diagnose and inspect do)")
    return traces[0]
