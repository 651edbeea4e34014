"""Fault-injection soak, in three phases, each a sweep of every registered method.

1. Faults in the engine: the scripted engine with faults injected (localfa.testing.faults),
   killed with SIGKILL twice at random points and resumed until no retryable failure is left:

       units=  faults_injected=  records=  records_lost=  duplicates=  errors_final=

2. Faults in the servers: the sweep runs over HTTP (`--engine openai`) against two scripted
   servers (localfa.testing.scripted_server, real processes) and meets, mid-run, a poison request
   (a 500 on every server that takes it), a server that is killed (SIGKILL) and started again on
   its port, a 429 with Retry-After, and, after the sweep itself is killed, cache entries that no
   longer validate. It ends with every unit recorded once:

       lost=0 duplicates=0 servers_readmitted=1

3. Hostile input (scripts/soak_hostile.py): one trace file of each kind that once stopped a
   sweep beside good ones, through bench, a resume, diagnose, report and view:

       problems=0 bench_rc=1 diagnose_rc=1

`records_lost`/`lost`: planned units with no record; `duplicates`: a unit recorded again after a
final record (a retried transient failure that is replaced does not count); `errors_final`: units
whose record is still an error after the resumes (only final faults: cut or invalid output, and
in phase 2 the poison request's unit).

    python scripts/soak.py                      # all phases, ~1-3 min
    python scripts/soak.py --phase hostile      # phase 3 only
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

from soak_common import REPO, analyse, bench_command, count_lines, write_traces  # scripts/soak_common.py
from soak_hostile import hostile_phase  # scripts/soak_hostile.py
from soak_servers import servers_phase  # scripts/soak_servers.py

sys.path.insert(0, str(REPO))

from localfa.bench.benchjson import add_json_option, run_recorded  # noqa: E402 - after the path is set


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase", choices=("all", "engine", "servers", "hostile"), default="all")
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
    add_json_option(ap)
    args = ap.parse_args()

    work = args.out or Path(tempfile.mkdtemp(prefix="localfa-soak-"))
    if work.exists() and args.out is not None:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    ok = True
    if args.phase in ("all", "engine"):
        ok = engine_phase(args, work / "engine") and ok
    if args.phase in ("all", "servers"):
        ok = servers_phase(args, work / "servers") and ok
    if args.phase in ("all", "hostile"):
        ok = hostile_phase(args, work / "hostile") and ok
    if not args.keep and args.out is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "soak"))
