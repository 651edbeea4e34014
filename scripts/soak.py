"""Fault-injection soak, in two phases, each a sweep of every registered method.

1. Faults in the engine: the scripted engine with faults injected (localfa.testing.faults),
   killed with SIGKILL twice at random points and resumed until no retryable failure is left:

       units=  faults_injected=  records=  records_lost=  duplicates=  errors_final=

2. Faults in the servers: the sweep runs over HTTP (`--engine openai`) against two scripted
   servers (localfa.testing.scripted_server, real processes) and meets, mid-run, a poison request
   (a 500 on every server that takes it), a server that is killed (SIGKILL) and started again on
   its port, a 429 with Retry-After, and, after the sweep itself is killed, cache entries that no
   longer validate. It ends with every unit recorded once:

       lost=0 duplicates=0 servers_readmitted=1

`records_lost`/`lost`: planned units with no record; `duplicates`: a unit recorded again after a
final record (a retried transient failure that is replaced does not count); `errors_final`: units
whose record is still an error after the resumes (only final faults: cut or invalid output, and
in phase 2 the poison request's unit).

    python scripts/soak.py                      # both phases, ~1-3 min
    python scripts/soak.py --phase servers      # phase 2 only
    python scripts/soak.py --rate 0.1 --seed 3 --out /tmp/soak --keep
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

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


def run_bench(cmd: list[str], env: dict[str, str], results: Path, kill_at: int | None, timeout_s: float) -> str:
    """Run one sweep; SIGKILL its process group once `results` holds `kill_at` lines.

    Returns "killed", "done" or "failed (status N)".
    """
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None:
            if kill_at is not None and count_lines(results) >= kill_at:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return "killed"
            if time.monotonic() > deadline:
                raise TimeoutError(f"a sweep ran longer than {timeout_s:.0f} s")
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):  # 1: some records are errors (expected here)
        return f"failed (status {proc.returncode}): {err[-400:]}"
    return "done"


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


def engine_phase(args: argparse.Namespace, work: Path) -> bool:
    """Phase 1: faults injected into the scripted engine, the sweep killed twice and resumed."""
    from localfa.bench.sweep import load_traces, parse_seeds
    from localfa.methods.registry import method_names

    traces_dir, run_dir, fault_log = work / "traces", work / "run", work / "faults.jsonl"
    results = run_dir / "results.jsonl"
    write_traces(traces_dir, args.traces, args.seed)
    methods, seeds = method_names(), parse_seeds(args.seeds)
    planned = {(t.id, m, "none", s) for t in load_traces([traces_dir]) for m in methods for s in seeds}
    cmd = bench_command(traces_dir, run_dir, methods, args.seeds, ["--engine", "scripted"])
    rng = random.Random(args.seed)
    kill_points = [int(len(planned) * rng.uniform(0.15, 0.4)), int(len(planned) * rng.uniform(0.5, 0.8))]
    started = time.perf_counter()
    outcomes: list[str] = []
    kills = 0
    for n in range(2 + args.max_passes):
        env = {
            **os.environ,
            "LOCALFA_INJECT_FAULTS": f"{args.rate}:{args.seed + n}",
            "LOCALFA_FAULT_LOG": str(fault_log),
            "LOCALFA_SCRIPTED_DELAY_S": str(args.delay),
        }
        kill_at = kill_points[n] if n < len(kill_points) else None
        if kill_at is not None:
            kill_at = max(kill_at, count_lines(results) + 1)
        outcome = run_bench(cmd, env, results, kill_at, timeout_s=300)
        outcomes.append(outcome)
        kills += outcome == "killed"
        if outcome.startswith("failed"):
            print(f"pass {n}: {outcome}", file=sys.stderr)
        if n >= 2 and outcome == "done" and analyse(results, planned)["errors_transient"] == 0:
            break
    figures = analyse(results, planned)
    faults = (
        Counter(json.loads(line)["kind"] for line in fault_log.read_text().splitlines() if line.strip())
        if fault_log.exists()
        else Counter()
    )
    wall = time.perf_counter() - started
    print(f"methods={','.join(methods)}")
    print(f"passes={len(outcomes)} kills={kills} outcomes={','.join(o.split(' ')[0] for o in outcomes)} wall_s={wall:.1f}")
    print("faults_by_kind=" + ",".join(f"{k}:{faults[k]}" for k in sorted(faults)))
    print(
        f"replaced_transient={figures['replaced']} errors_transient_left={figures['errors_transient']} "
        f"errors_not_injected={figures['errors_not_injected']}"
    )
    print(f"units={len(planned)}")
    print(f"faults_injected={sum(faults.values())}")
    print(f"records={figures['records']}")
    print(f"records_lost={figures['records_lost']}")
    print(f"duplicates={figures['duplicates']}")
    print(f"errors_final={figures['errors_final']}")
    return (
        kills == 2
        and figures["records_lost"] == 0
        and figures["duplicates"] == 0
        and figures["errors_transient"] == 0
        and figures["errors_not_injected"] == 0
    )


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase", choices=("all", "engine", "servers"), default="all")
    ap.add_argument("--traces", type=int, default=27, help="synthetic traces (units = traces x methods x seeds)")
    ap.add_argument("--server-traces", type=int, default=16, help="synthetic traces of phase 2")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--rate", type=float, default=0.05, help="share of requests that meet a fault")
    ap.add_argument("--seed", type=int, default=7, help="fault seed (each pass adds its number to it)")
    ap.add_argument("--delay", type=float, default=0.01, help="scripted engine delay per request, seconds")
    ap.add_argument("--server-delay", type=float, default=0.02, help="phase 2: a scripted server's delay per request")
    ap.add_argument("--max-passes", type=int, default=12, help="resumes after the kills, at most")
    ap.add_argument("--out", type=Path, default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()

    work = args.out or Path(tempfile.mkdtemp(prefix="localfa-soak-"))
    if work.exists() and args.out is not None:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    ok = True
    if args.phase in ("all", "engine"):
        ok = engine_phase(args, work / "engine") and ok
    if args.phase in ("all", "servers"):
        from soak_servers import servers_phase  # scripts/soak_servers.py

        ok = servers_phase(args, work / "servers") and ok
    if not args.keep and args.out is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
