"""`localfa inspect TRACE`: what a trace file holds, as the methods will see it.

Prints the detected format, steps, agents, size (lines, characters, tokens) and labels, or with
``--lines A:B`` a window of the numbered line view. Bad input exits with status 2 and one line
``error: <file>: <what is wrong, where>`` on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from localfa.cli.errors import fail, fail_trace
from localfa.traces.errors import TraceError
from localfa.traces.lineview import LineView, TokenCounter, approx_tokens
from localfa.traces.load import FORMATS, load_trace
from localfa.traces.model import Trace
from localfa.traces.quality import empty_step_warning


def resolve_token_counter(tokenizer: str | None) -> tuple[str, TokenCounter]:
    """(name, counter): the tokenizer of a local model folder, the embedded model's, or "approx"."""
    if tokenizer:
        folder = Path(tokenizer)
        if not (folder / "tokenizer.json").is_file():
            fail(tokenizer, "no tokenizer.json in this folder (--tokenizer takes a local Hugging Face model folder)")
        from localfa.tokens import token_counter

        name, fn = token_counter(folder)
        if name == "approx":
            fail(tokenizer, "tokenizer.json could not be loaded (is the 'tokenizers' package installed?)")
        return name, fn
    try:
        from localfa.tokens import token_counter

        return token_counter(None)
    except (ImportError, OSError, ValueError):
        return "approx", approx_tokens


def parse_lines(spec: str, total: int, source: str) -> tuple[int, int]:
    """``A:B`` (line numbers from 0 as in the line view, inclusive; ``A:`` and ``:B`` open-ended)
    as a checked (first, last)."""
    a, sep, b = spec.partition(":")
    try:
        first = int(a) if a.strip() else 0
        last = int(b) if (sep and b.strip()) else (total - 1 if sep else first)
    except ValueError:
        fail(source, f"--lines {spec!r} is not A:B (line numbers from 0, e.g. 0:40)")
    if first < 0 or last < first:
        fail(source, f"--lines {spec!r}: need 0 <= A <= B")
    if first >= total:
        fail(source, f"--lines {spec!r} is outside the line view (lines 0..{total - 1})")
    return first, min(last, total - 1)


def summary(trace: Trace, view: LineView, tokenizer_name: str) -> dict[str, Any]:
    """The facts `inspect` reports, as plain data."""
    labels = None
    if trace.labels is not None:
        lab = trace.labels
        labels = lab.model_dump()
        if lab.mistake_step is not None:
            labels["agent_at_mistake_step"] = trace.agent_at(lab.mistake_step)
    return {
        "id": trace.id,
        "source": trace.source,
        "format": trace.format,
        "subset": trace.subset,
        "task": trace.task,
        "steps": len(trace.steps),
        "agents": [a.name for a in trace.agents],
        "speakers": trace.agent_names(),
        "lines": view.total_lines,
        "width": view.width,
        "characters": view.total_chars,
        "tokens": view.tokens(),
        "tokenizer": tokenizer_name,
        "labels": labels,
        "final_output": trace.final_output,
        "ground_truth": trace.ground_truth,
        "warnings": trace.metadata.get("label_warnings", []) + [w for w in [empty_step_warning(trace)] if w],
    }


def _short(text: str | None, limit: int = 100) -> str:
    if text is None:
        return "-"
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def render_summary(info: dict[str, Any]) -> str:
    """`summary` as aligned text lines."""
    fmt = info["format"] + (f" ({info['subset']})" if info["subset"] else "")
    if info.get("format_source"):
        fmt += f", {info['format_source']}"
    rows = [
        ("trace", info["id"]),
        ("source", info["source"]),
        ("format", fmt),
        ("task", _short(info["task"])),
        ("steps", str(info["steps"])),
        ("agents", f"{', '.join(info['agents'])} ({len(info['agents'])})"),
        ("lines", f"{info['lines']:,} (width {info['width']})"),
        ("characters", f"{info['characters']:,}"),
        ("tokens", f"{info['tokens']:,} ({info['tokenizer']})"),
    ]
    lab = info["labels"]
    if lab is None:
        rows.append(("labels", "none"))
    else:
        parts = []
        if lab.get("mistake_agent") is not None:
            parts.append(f"mistake_agent={lab['mistake_agent']}")
        if lab.get("mistake_step") is not None:
            parts.append(f"mistake_step={lab['mistake_step']} (agent there: {lab.get('agent_at_mistake_step')})")
        if lab.get("fault_steps"):
            parts.append(f"fault_steps={lab['fault_steps']}")
        if lab.get("high_impact_steps"):
            parts.append(f"high_impact_steps={lab['high_impact_steps']}")
        if lab.get("categories"):
            parts.append(f"categories={lab['categories']}")
        rows.append(("labels", " ".join(parts) or "(labelled, no faults)"))
        if lab.get("reason"):
            rows.append(("reason", _short(lab["reason"], 160)))
    rows.append(("final output", _short(info["final_output"])))
    rows.append(("ground truth", _short(info["ground_truth"])))
    for w in info["warnings"]:
        rows.append(("warning", w))
    pad = max(len(k) for k, _ in rows)
    return "\n".join(f"{k + ':':<{pad + 1}} {v}" for k, v in rows)


def inspect(
    trace: str = typer.Argument(..., help="Trace file (JSON or JSON Lines)."),
    format: Optional[str] = typer.Option(None, "--format", help=f"Force the importer instead of detecting it: {', '.join(FORMATS)}."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary (or the lines) as JSON."),
    lines: Optional[str] = typer.Option(
        None,
        "--lines",
        help="Print lines A:B (numbered from 0 as the methods see them, inclusive) of the line view instead of the summary.",
    ),
    tokenizer: Optional[str] = typer.Option(
        None, "--tokenizer", help="Local Hugging Face model folder whose tokenizer.json counts tokens."
    ),
    width: int = typer.Option(200, "--width", min=20, help="Line width of the line view."),
) -> None:
    """Summarise a trace (format, steps, agents, size, labels) or print part of its line view."""
    try:
        loaded = load_trace(trace, format=format)
    except TraceError as e:
        fail_trace(e)
    if lines is not None:
        view = LineView(loaded, width=width)
        first, last = parse_lines(lines, view.total_lines, trace)
        if as_json:
            rows = [{"line": n, "step": view.step_at_line(n), "text": view.lines[n]} for n in range(first, last + 1)]
            typer.echo(json.dumps({"id": loaded.id, "total_lines": view.total_lines, "lines": rows}, ensure_ascii=False))
        else:
            typer.echo(view.read(first, last - first + 1))
        return
    name, counter = resolve_token_counter(tokenizer)
    view = LineView(loaded, width=width, count_tokens=counter)
    info = summary(loaded, view, name)
    info["format_source"] = "forced" if format else "detected"
    if as_json:
        typer.echo(json.dumps(info, ensure_ascii=False, indent=2))
    else:
        typer.echo(render_summary(info))
