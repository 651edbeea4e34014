"""`localfa inspect TRACE`: what a trace file holds, as the methods will see it.

Prints the detected format, steps, agents, size (lines, characters, tokens) and labels, then one
row per step (its kind, action or observation, its size in characters and line-view lines, and
who acted), or with ``--lines A:B`` a window of the numbered line view; a file of several runs (an
inspect_ai log) gives one summary per run (``--sample`` picks one). Bad input exits with status 2 and one line
``error: <file>: <what is wrong, where>`` on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from localfa.cli.errors import fail, fail_trace
from localfa.terminal import terminal_safe
from localfa.traces.errors import TraceError
from localfa.traces.lineview import LineView, TokenCounter, approx_tokens
from localfa.traces.load import FORMATS, load_traces
from localfa.traces.model import Trace
from localfa.traces.quality import empty_step_warning
from localfa.traces.runs import with_harness


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


def step_rows(trace: Trace, view: LineView) -> list[dict[str, Any]]:
    """Per step: index, kind (action / observation), characters, line-view lines, agent, name."""
    rows = []
    for s in trace.steps:
        first, last = view.lines_of_step(s.index)
        chars = len(s.content) + len(s.observation or "") + len(s.input or "") + sum(len(str(c)) for c in s.tool_calls)
        rows.append({"step": s.index, "kind": s.kind, "chars": chars, "lines": last - first + 1, "agent": s.agent, "name": s.name})
    return rows


def render_steps(rows: list[dict[str, Any]]) -> str:
    """`step_rows` as an aligned table."""
    if not rows:
        return ""
    w_step = max(4, len(str(rows[-1]["step"])))
    w_chars = max(5, *(len(f"{r['chars']:,}") for r in rows))
    w_lines = max(5, *(len(str(r["lines"])) for r in rows))
    out = [f"{'step':>{w_step}}  {'kind':<11}  {'chars':>{w_chars}}  {'lines':>{w_lines}}  agent"]
    for r in rows:
        who = r["agent"] + (f" · {r['name']}" if r["name"] else "")
        out.append(f"{r['step']:>{w_step}}  {r['kind']:<11}  {r['chars']:>{w_chars},}  {r['lines']:>{w_lines}}  {who}")
    return "\n".join(out)


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
        "action_steps": len([s for s in trace.steps if s.kind == "action"]),
        "agents": [a.name for a in trace.agents if not a.environment],
        "environment": trace.environment_agents(),
        "speakers": trace.agent_names(),
        "lines": view.total_lines,
        "width": view.width,
        "characters": view.total_chars,
        "tokens": view.tokens(),
        "tokenizer": tokenizer_name,
        "labels": labels,
        "final_output": trace.final_output,
        "ground_truth": trace.ground_truth,
        "warnings": trace.metadata.get("label_warnings", [])
        + trace.metadata.get("import_warnings", [])
        + [w for w in [empty_step_warning(trace)] if w],
        "harness": trace.metadata.get("harness"),
        "outcome": trace.outcome,
        "task_source": trace.metadata.get("task_source"),
        "per_step": step_rows(trace, view),
    }


def _short(text: str | None, limit: int = 100) -> str:
    if text is None:
        return "-"
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


OUTCOME_LINES = 12


def _block(text: str, limit: int = OUTCOME_LINES) -> str:
    """A multi-line value: its last `limit` lines (a verifier's output ends with its summary),
    continuation lines indented under the value column by `render_summary`."""
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    if len(lines) > limit:
        lines = [lines[0], f"[... {len(lines) - limit} lines, all in --json ...]", *lines[-(limit - 1) :]]
    return "\n".join(lines)


def _steps_row(info: dict[str, Any]) -> str:
    n, acts = info["steps"], info.get("action_steps", info["steps"])
    return str(n) if acts == n else f"{n} ({acts} action, {n - acts} observation)"


def _environment(info: dict[str, Any]) -> str:
    """``; environment: Computer_terminal`` where the trace marks executors as the environment."""
    env = info.get("environment") or []
    return f"; environment: {', '.join(env)}" if env else ""


def render_summary(info: dict[str, Any]) -> str:
    """`summary` as aligned text lines."""
    fmt = info["format"] + (f" ({info['subset']})" if info["subset"] else "")
    if info.get("format_source"):
        fmt += f", {info['format_source']}"
    rows = [
        ("trace", info["id"]),
        ("source", info["source"]),
        ("format", fmt),
        ("task", _short(info["task"]) + (f" (from {info['task_source']})" if info.get("task_source") else "")),
        ("steps", _steps_row(info)),
        ("agents", f"{', '.join(info['agents'])} ({len(info['agents'])})" + _environment(info)),
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
    harness = info.get("harness")
    if harness:
        verdict = {True: "failed", False: "passed", None: "no verdict"}[harness.get("failed")]
        rows.append(("harness", f"{harness.get('harness')}: {verdict} ({harness.get('why')})"))
    if info.get("outcome"):
        rows.append(("outcome", _block(info["outcome"])))
    rows.append(("final output", _short(info["final_output"])))
    rows.append(("ground truth", _short(info["ground_truth"])))
    for w in info["warnings"]:
        rows.append(("warning", w))
    pad = max(len(k) for k, _ in rows)
    text = "\n".join(f"{k + ':':<{pad + 1}} {v}".replace("\n", "\n" + " " * (pad + 2)) for k, v in rows)
    table = render_steps(info.get("per_step") or [])
    return f"{text}\n\n{table}" if table else text


def inspect(
    trace: str = typer.Argument(
        ..., metavar="TRACE", help="Trace file (JSON, JSON Lines, an inspect_ai .eval log), or a folder of them (a harness trial or job)."
    ),
    format: Optional[str] = typer.Option(None, "--format", help=f"Force the importer instead of detecting it: {', '.join(FORMATS)}."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary (or the lines) as JSON."),
    lines: Optional[str] = typer.Option(
        None,
        "--lines",
        help="Print lines A:B (numbered from 0 as the methods see them, inclusive) of the line view instead of the summary.",
    ),
    sample: Optional[str] = typer.Option(
        None, "--sample", help="A file holding several runs (an inspect_ai log): only the run whose id ends with this."
    ),
    tokenizer: Optional[str] = typer.Option(
        None, "--tokenizer", help="Local Hugging Face model folder whose tokenizer.json counts tokens."
    ),
    width: int = typer.Option(200, "--width", min=20, help="Line width of the line view."),
) -> None:
    """Summarise a trace (format, steps, agents, size, labels) or print part of its line view; a
    file of several runs (an inspect_ai log) or a folder (a Harbor trial or job, a SWE-bench run)
    is summarised run by run, read as `diagnose` reads it.

    \b
    Examples:
      localfa inspect run.json
      localfa inspect run.json --lines 0:40
      localfa inspect jobs/2026-12-01/fix-dates__A1b2C    # a Harbor trial folder
    """
    loaded, unreadable = load_runs(trace, format)
    runs = [t for t, _, _ in loaded]
    if sample is not None:
        runs = [t for t in runs if t.id == sample or t.id.endswith("/" + sample)]
        if not runs:
            fail(trace, f"--sample {sample!r}: no run of that id in this file")
    if lines is not None:
        if len(runs) > 1:
            fail(trace, f"--lines: the file holds {len(runs)} runs ({', '.join(t.id for t in runs[:5])}); choose one with --sample")
        print_lines(runs[0], lines, trace, width, as_json)
        return
    name, counter = resolve_token_counter(tokenizer)
    infos = []
    for run, _root, _path in loaded:
        if run not in runs:  # --sample left it out
            continue
        view = LineView(run, width=width, count_tokens=counter)
        info = summary(run, view, name)
        info["format_source"] = "forced" if format else "detected"
        infos.append(info)
    if as_json:
        typer.echo(terminal_safe(json.dumps(infos[0] if len(infos) == 1 else infos, ensure_ascii=False, indent=2)))
    else:
        typer.echo(terminal_safe("\n\n".join(render_summary(info) for info in infos)))
    if unreadable:  # each one's `error:` line is above
        raise typer.Exit(1)


def load_runs(trace: str, fmt: str | None) -> tuple[list[tuple[Trace, Path, Path]], int]:
    """((run, root, file) for each run `trace` holds, files of a folder that could not be read):
    a file's runs, or those of every trace file in a folder (a harness's trials as `diagnose`
    finds them), with the ids `diagnose` gives; each unreadable file is an `error:` line."""
    from localfa.bench.units import read_trace_file
    from localfa.traces.load import trace_files_with_roots
    from localfa.traces.runs import harness_traces

    path = Path(trace)
    if not path.is_dir():
        try:
            # as methods see it: the harness's verdict, verifier output and task beside the file
            return [(with_harness(t, path.parent, path, load_traces), path.parent, path) for t in load_traces(trace, format=fmt)], 0
        except TraceError as e:
            fail_trace(e)
    errors: list[TraceError] = []
    say = lambda msg: typer.echo(msg, err=True)  # noqa: E731
    try:
        found = trace_files_with_roots([trace], warn=say)
        kept = harness_traces(found, lambda f: read_trace_file(f, fmt), lambda root, f, exc: errors.append(exc), [path], False, say)
    except TraceError as e:
        fail_trace(e)
    for problem in errors:
        say(f"error: {problem}")
    if not kept:
        fail(trace, "no trace file in this folder could be read" if errors else "no trace file in this folder")
    return [(t, root, f) for root, f, t in kept], len(errors)


def print_lines(loaded: Trace, spec: str, source: str, width: int, as_json: bool) -> None:
    """``--lines A:B`` of one trace's line view, as text or JSON."""
    view = LineView(loaded, width=width)
    first, last = parse_lines(spec, view.total_lines, source)
    if as_json:
        rows = [{"line": n, "step": view.step_at_line(n), "text": view.lines[n]} for n in range(first, last + 1)]
        typer.echo(terminal_safe(json.dumps({"id": loaded.id, "total_lines": view.total_lines, "lines": rows}, ensure_ascii=False)))
    else:
        typer.echo(terminal_safe(view.read(first, last - first + 1)))
