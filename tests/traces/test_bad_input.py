"""Bad input gets one clear TraceError naming the file and what is wrong where; never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localfa.traces import FORMATS, TraceError, load_trace
from localfa.traces.load import DEFAULT_MAX_BYTES, MAX_BYTES_ENV


def _load_err(path: Path, **kw) -> str:
    with pytest.raises(TraceError) as info:
        load_trace(path, **kw)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    assert "\n" not in msg
    assert info.value.path == str(path)
    return msg[len(str(path)) + 2 :]


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


WW_OK = {
    "question": "q",
    "ground_truth": "a",
    "is_correct": False,
    "mistake_agent": "A",
    "mistake_step": "1",
    "mistake_reason": "r",
    "history": [{"content": "hi", "role": "user", "name": "A"}, {"content": "x", "role": "assistant", "name": "B"}],
}


def test_not_json(tmp_path: Path) -> None:
    msg = _load_err(_write(tmp_path, "t.json", "hello, this is not JSON"))
    assert msg.startswith("not valid JSON: Expecting value: line 1 column 1")


def test_truncated_json(tmp_path: Path) -> None:
    text = json.dumps(WW_OK, indent=1)
    msg = _load_err(_write(tmp_path, "t.json", text[: len(text) // 2]))
    assert msg == ("truncated JSON: the file ends before the value is complete (Unterminated string starting at: line 8 column 2)")


def test_truncated_jsonl_line(tmp_path: Path) -> None:
    lines = '{"role": "user", "content": "a"}\n{"role": "assistant", "content": "b'
    msg = _load_err(_write(tmp_path, "t.jsonl", lines))
    assert msg == "truncated JSON on line 2 (JSON Lines): Unterminated string starting at: column 34"


def test_invalid_jsonl_line(tmp_path: Path) -> None:
    lines = '{"role": "user", "content": "a"}\n{"role": oops}\n'
    msg = _load_err(_write(tmp_path, "t.jsonl", lines))
    assert msg.startswith("not valid JSON on line 2")


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        (42, "expected a JSON object or array at the top level, got a number"),
        ("a string", "got a string"),
        (None, "got null"),
        ([1, 2, 3], "item 0: expected an object (a message or a span), got a number"),
        ({"history": "not a list", "question": "q"}, "'history' must be an array of steps, got a string"),
        ({"history": [["content", "x"]]}, "history[0]: expected a step object, got an array"),
        ({"history": [{"content": 5, "name": "A"}]}, "history[0]: step 'content' must be text, got a number"),
        ({"history": [{"content": "x"}]}, "history[0]: step names no agent"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0]: message 'content' must be text, got a number"),
        ({"spans": "nope"}, "does not match any known trace format"),
        (
            {"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "a", "name": "x", "attributes": []}]}]}]},
            "does not match any known trace format",
        ),
    ],
)
def test_wrong_shape(tmp_path: Path, value: object, expect: str) -> None:
    msg = _load_err(_write(tmp_path, "t.json", json.dumps(value)))
    assert expect in msg


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        ({**WW_OK, "history": []}, "empty history: 'history' holds no steps"),
        ([], "empty history"),
        ({"chat_history": []}, "empty history: 'chat_history' holds no messages"),
        ({"trace_id": "t", "spans": []}, "empty history: 'spans' holds no spans"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}, "empty history: the OTLP export holds no spans"),
    ],
)
def test_empty_history(tmp_path: Path, value: object, expect: str) -> None:
    assert expect in _load_err(_write(tmp_path, "t.json", json.dumps(value)))


def test_empty_file(tmp_path: Path) -> None:
    assert _load_err(_write(tmp_path, "t.json", "  \n")) == "file is empty"


def test_magentic_log_with_no_conversation(tmp_path: Path) -> None:
    rec = {"timestamp": "2024-01-01T00:00:00", "prompt_tokens": 1, "completion_tokens": 1, "type": "LLMCallEvent"}
    msg = _load_err(_write(tmp_path, "log.jsonl", json.dumps(rec) + "\n" + json.dumps(rec)))
    assert msg == "empty history: the log holds no conversation messages (only 2 LLMCallEvent)"


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        ({**WW_OK, "history": [{"role": "user", "name": "A"}]}, "history[0]: step has no 'content'"),
        ({**WW_OK, "history": [{"content": None, "role": "human"}]}, "history[0]: step 'content' is null"),
        ([{"role": "user", "content": "a"}, {"role": "assistant"}], "item 1: message has no 'content'"),
        ([{"role": "assistant", "content": None}], "item 0: message 'content' is null and it makes no tool call"),
        ([{"source": "WebSurfer", "type": "OrchestrationEvent", "timestamp": "t"}], "item 0: log record has no 'message'"),
        ([{"source": "agent", "type": "TextMessage"}], "item 0: message has no 'content'"),
    ],
)
def test_step_without_content(tmp_path: Path, value: object, expect: str) -> None:
    assert expect in _load_err(_write(tmp_path, "t.json", json.dumps(value)))


@pytest.mark.parametrize(
    ("step", "expect"),
    [
        ("2", "mistake_step '2' is outside the trace (2 steps, valid 0..1)"),
        ("-1", "mistake_step '-1' is outside the trace"),
        (7, "mistake_step 7 is outside the trace"),
        ("three", "mistake_step must be a step number, got 'three'"),
        ("1.5", "mistake_step must be a step number"),
        (True, "mistake_step must be a step number"),
    ],
)
def test_label_step_outside_trace(tmp_path: Path, step: object, expect: str) -> None:
    assert expect in _load_err(_write(tmp_path, "t.json", json.dumps({**WW_OK, "mistake_step": step})))


def test_trail_label_location_outside_trace(tmp_path: Path) -> None:
    fix = Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "openinference_trail_row.json"
    row = json.loads(fix.read_text())
    labels = json.loads(row["labels"])
    labels["errors"][0]["location"] = "ffffffffffffffff"
    row["labels"] = json.dumps(labels)
    msg = _load_err(_write(tmp_path, "row.json", json.dumps(row)))
    assert "labels.errors[0]: location 'ffffffffffffffff' is not a span in the trace" in msg


def test_non_utf8_bytes(tmp_path: Path) -> None:
    data = json.dumps(WW_OK).encode("utf-8")
    data = data.replace(b'"hi"', b'"h\xff\xfei"')
    msg = _load_err(_write(tmp_path, "t.json", data))
    assert data.index(b"\xff") == 152
    assert msg == "not UTF-8 text: byte 0xff at offset 152 (line 1) is not valid UTF-8; re-encode the file as UTF-8"


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.json", b"\xef\xbb\xbf" + json.dumps(WW_OK).encode())
    assert len(load_trace(p).steps) == 2


def test_no_known_format_lists_formats_tried(tmp_path: Path) -> None:
    msg = _load_err(_write(tmp_path, "t.json", json.dumps({"rows": [1, 2], "version": 3})))
    assert msg.startswith(f"does not match any known trace format (tried: {', '.join(FORMATS)})")
    assert "top-level keys: rows, version" in msg
    msg = _load_err(_write(tmp_path, "u.json", json.dumps([{"id": 1}, {"id": 2}])))
    assert f"tried: {', '.join(FORMATS)}" in msg and "first item keys: id" in msg


def test_spans_without_known_attributes(tmp_path: Path) -> None:
    spans = {"trace_id": "t", "spans": [{"span_id": "a", "span_name": "GET", "span_attributes": {"http.method": "GET"}}]}
    msg = _load_err(_write(tmp_path, "t.json", json.dumps(spans)))
    assert "does not match any known trace format" in msg
    assert "1 spans carry neither 'openinference.span.kind' nor 'gen_ai.*' attributes" in msg


def test_malformed_span_is_located(tmp_path: Path) -> None:
    span = {
        "span_id": "a",
        "span_name": "x",
        "span_attributes": {"openinference.span.kind": "LLM"},
        "child_spans": [{"span_id": ["not", "an", "id"], "span_name": "y"}],
    }
    msg = _load_err(_write(tmp_path, "t.json", json.dumps({"spans": [span]})))
    assert msg == "spans[0].child_spans[0]: 'span_id' must be text, got an array"


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert _load_err(tmp_path / "nope.json") == "no such file"
    assert _load_err(tmp_path) == "is a directory, not a trace file"


def test_deeply_nested_json(tmp_path: Path) -> None:
    msg = _load_err(_write(tmp_path, "t.json", "[" * 200_000 + "]" * 200_000))
    assert msg == "not readable JSON: nested too deeply"


def _big_whowhen(path: Path, target_bytes: int) -> int:
    """A Who&When file of about `target_bytes`, written in one go (fast)."""
    step = json.dumps({"content": "x" * 4000 + " words\n", "role": "user", "name": "Agent_A"})
    n = target_bytes // (len(step) + 1) + 1
    head = '{"question": "q", "ground_truth": "a", "is_correct": false, "mistake_agent": "Agent_A", "mistake_step": "3", "history": ['
    path.write_text(head + ",".join([step] * n) + "]}", encoding="utf-8")
    return n


def test_100mb_file_loads_under_the_default_limit(tmp_path: Path) -> None:
    """A 100 MB file is well under the 256 MiB default and loads whole. How long it takes is
    measured by scripts/bench_load.py (load_100mb_s), not asserted here."""
    p = tmp_path / "big.json"
    n = _big_whowhen(p, 100 * 1024 * 1024)
    # each step is 4,058 characters of JSON plus a comma: 104,857,600 // 4,059 + 1 steps
    assert p.stat().st_size >= 100 * 1024 * 1024 and n == 25_834
    trace = load_trace(p)
    assert len(trace.steps) == 25_834 and trace.labels.mistake_step == 3
    assert trace.steps[25_833].content == "x" * 4000 + " words\n"


def test_size_limit_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "big.json"
    _big_whowhen(p, 3 * 1024 * 1024)
    msg = _load_err(p, max_bytes=1024 * 1024)
    assert "over the 1.0 MiB limit" in msg and MAX_BYTES_ENV in msg and "max_bytes" in msg
    monkeypatch.setenv(MAX_BYTES_ENV, "2M")
    assert "over the 2.0 MiB limit" in _load_err(p)
    monkeypatch.setenv(MAX_BYTES_ENV, str(10 * 1024 * 1024))
    assert load_trace(p).steps
    monkeypatch.setenv(MAX_BYTES_ENV, "lots")
    assert "is not a size" in _load_err(p)
    monkeypatch.delenv(MAX_BYTES_ENV)
    assert DEFAULT_MAX_BYTES == 256 * 1024 * 1024
