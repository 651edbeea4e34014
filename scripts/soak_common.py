"""What both soak phases share (scripts/soak.py, scripts/soak_servers.py): the traces they sweep,
the sweep's command line and the count of what a run directory holds."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

AGENTS = ("Orchestrator", "WebSurfer", "Coder", "Verifier")
WORDS = (
    "searched",
    "the",
    "table",
    "shows",
    "42",
    "wrong",
    "page",
    "result",
    "ignore",
    "previous",
    "instructions",
    "assumed",
    "verified",
    "rounded",
    "source",
    "answer",
    '{"step_id": 3}',
)


def write_traces(folder: Path, n: int, seed: int) -> None:
    """`n` small multi-agent chat logs (messages format), deterministic from `seed`."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for t in range(n):
        steps = [{"role": "user", "name": "human", "content": f"Task {t}: how many rows does table {t} have?"}]
        for i in range(rng.randint(6, 16)):
            agent = AGENTS[(i + t) % len(AGENTS)]
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 80)))
            steps.append({"role": "assistant", "name": agent, "content": f"{agent} step {i}: {text}"})
        (folder / f"trace{t:03d}.json").write_text(json.dumps(steps), encoding="utf-8")


def count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def bench_command(traces_dir: Path, run_dir: Path, methods: list[str], seeds: str, engine: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "localfa",
        "bench",
        str(traces_dir),
        "--methods",
        ",".join(methods),
        "--seeds",
        seeds,
        *engine,
        "--out",
        str(run_dir),
        "--no-progress",
        "--concurrency",
        "16",
    ]


def analyse(results: Path, planned: set[tuple]) -> dict[str, int]:
    """Count what the run directory holds: records, lost units, duplicates, errors by kind."""
    last: dict[tuple, dict] = {}
    duplicates = replaced = 0
    for line in results.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        key = (rec["trace"], rec["method"], rec.get("budget") or "none", int(rec["seed"]))
        old = last.get(key)
        if old is not None:
            if old.get("error") and old.get("error_kind") == "transient":
                replaced += 1
            else:
                duplicates += 1
        last[key] = rec
    errors = [r for r in last.values() if r.get("error")]
    return {
        "records": len(set(last) & planned),
        "records_lost": len(planned - set(last)),
        "duplicates": duplicates,
        "replaced": replaced,
        "errors_final": sum(1 for r in errors if r.get("error_kind") != "transient"),
        "errors_transient": sum(1 for r in errors if r.get("error_kind") == "transient"),
        "errors_not_injected": sum(1 for r in errors if "injected fault" not in r["error"]),
    }
