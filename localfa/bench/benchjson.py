"""Benchmark figures as data: what a `scripts/bench_*.py` prints, kept as JSON with where and when.

Every benchmark script prints its figures as ``name=value`` lines. With ``--json FILE`` the same
lines are also written to FILE, one row per line that holds a figure, beside the machine, the
date, the commit and the load they were taken under, so the benchmarks page (docs/benchmarks.md)
is drawn from files and no figure is typed by hand. A script opts in with two lines:
`add_json_option(parser)` and ``raise SystemExit(run_recorded(main, "bench_x"))``.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from localfa.durable import replace_durably
from localfa.manifest import git_revision
from localfa.redact import mask_argv
from localfa.values import number_or_text

SCHEMA = "localfa-bench/1"
# `name=value`: a value runs to the next space, or is bracketed: `[0.64, 0.78]`, `{0: 0.84, 1: 0.1}`.
_FIGURE = re.compile(r"(?<![\w.-])([A-Za-z_][\w.@:-]*)=(\[[^\]]*\]|\{[^}]*\}|\([^)]*\)|\S+)")


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """The `--json FILE` option every benchmark script takes."""
    parser.add_argument(
        "--json", type=Path, metavar="FILE", help="also write the printed figures, with machine, date, commit and load, as JSON"
    )


def figures_of(line: str) -> dict[str, Any]:
    """The ``name=value`` figures of one printed line (numbers as numbers), in their order."""
    return {name: number_or_text(value.rstrip(",;")) for name, value in _FIGURE.findall(line)}


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def machine() -> dict[str, Any]:
    """What the figures were taken on: no host name, nothing that names the user."""
    return {
        "system": f"{platform.system()} {platform.machine()}",
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def bench_record(name: str, rows: list[dict[str, Any]], *, started: float, load_at_start: list[float] | None) -> dict[str, Any]:
    """One benchmark run's JSON: its rows of figures and where, when and under what load."""
    return {
        "schema": SCHEMA,
        "benchmark": name,
        "command": mask_argv(sys.argv),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": round(time.time() - started, 1),
        "commit": git_revision(),
        "machine": machine(),
        "load": {"start": load_at_start, "end": load_average()},
        "rows": rows,
    }


class _Tee(io.TextIOBase):
    """Writes through to the real stdout and keeps every complete line."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self.lines: list[str] = []
        self._part = ""

    def write(self, text: str) -> int:
        self.target.write(text)
        self._part += text
        *done, self._part = self._part.split("\n")
        self.lines.extend(done)
        return len(text)

    def flush(self) -> None:
        self.target.flush()


def run_recorded(main: Callable[[], Any], name: str) -> int:
    """Run a benchmark's `main`; with ``--json FILE`` on the command line, write its figures there
    once it ends cleanly (a failed run writes nothing: no half-measured file reaches the page)."""
    probe = argparse.ArgumentParser(add_help=False)
    add_json_option(probe)
    out = probe.parse_known_args()[0].json
    if out is None:
        return int(main() or 0)
    started, load_at_start = time.time(), load_average()
    tee = _Tee(sys.stdout)
    real, sys.stdout = sys.stdout, tee  # type: ignore[assignment]
    try:
        status = int(main() or 0)
    finally:
        sys.stdout = real
    rows = [f for f in (figures_of(line) for line in [*tee.lines, tee._part]) if f]
    if status == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        replace_durably(out, json.dumps(bench_record(name, rows, started=started, load_at_start=load_at_start), indent=2) + "\n")
        print(f"wrote {out}", file=sys.stderr)
    return status


# ---- the benchmarks page -------------------------------------------------------------------------


def _e(value: Any) -> str:
    """A field of a file that may be hostile, as inert HTML text."""
    return html.escape(value if isinstance(value, str) else json.dumps(value), quote=True)


def _table(rows: list[dict[str, Any]]) -> str:
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    head = "".join(f"<th>{_e(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{_e(row.get(k, ''))}</td>" for k in keys) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _groups(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Consecutive rows with the same figure names form one table; consecutive lines of one figure
    each (``units=270``, ``records=270``) form one table of figure and value."""
    groups: list[list[dict[str, Any]]] = []
    for row in rows:
        single = {"figure": next(iter(row)), "value": next(iter(row.values()))} if len(row) == 1 else None
        if single and groups and list(groups[-1][0]) == ["figure", "value"]:
            groups[-1].append(single)
        elif not single and groups and list(groups[-1][0]) == list(row):
            groups[-1].append(row)
        else:
            groups.append([single or row])
    return groups


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _provenance(record: dict[str, Any]) -> str:
    m = _mapping(record.get("machine"))
    load = _mapping(record.get("load"))
    parts = [
        f"taken {record.get('date')}",
        f"commit {record.get('commit') or 'unknown'}",
        f"{m.get('cores')} cores ({m.get('cpu')}), {m.get('memory_gib')} GiB, {m.get('system')}",
        f"GPUs {m.get('gpus')}" if m.get("gpus") else "no GPU",
        f"load {load.get('start')} at start, {load.get('end')} at end (1, 5, 15 min)",
        f"{record.get('wall_s')} s",
    ]
    command = record.get("command")
    cmd = " ".join(str(c) for c in command) if isinstance(command, list) else str(command)
    return f"<p><code>{_e(cmd)}</code><br>{_e('; '.join(parts))}</p>"


def render_page(files: Iterable[Path]) -> str:
    """The benchmarks page's body: one section per JSON file, every field escaped."""
    sections = []
    for path in sorted(files):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            sections.append(f"## {_e(path.name)}\n\n<p>unreadable: {_e(str(exc))}</p>\n")
            continue
        if not isinstance(record, dict) or record.get("schema") != SCHEMA:
            sections.append(f"## {_e(path.name)}\n\n<p>not a {SCHEMA} file</p>\n")
            continue
        rows = [r for r in record.get("rows") or [] if isinstance(r, dict)]
        tables = "\n\n".join(_table(g) for g in _groups(rows)) or "<p>no figures</p>"
        sections.append(f"## {_e(str(record.get('benchmark')))} ({_e(path.name)})\n\n{_provenance(record)}\n\n{tables}\n")
    return "\n".join(sections) or "No benchmark file yet.\n"
