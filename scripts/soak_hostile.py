"""Soak phase 3, hostile input (scripts/soak.py --phase hostile): a corpus holding one trace file
of each kind that once stopped a sweep, beside good traces (`localfa.testing.hostile.write_corpus`),
read by every command a user runs on it: `bench` (every registered method, oracle engine, then a
resume), `diagnose`, `report` and `view` of the run. Each must give every good trace its records,
one error record per bad file and method, nothing for a link to a file outside the folder, exit 1
where the run holds error records (0 for report and view), and never print a traceback:

    hostile_files=  bench_rc=1 resume_rc=1 diagnose_rc=1 report_rc=0 view_rc=0 problems=0
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from soak_common import REPO, bench_command  # scripts/soak_common.py

sys.path.insert(0, str(REPO))


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def _lines(path: Path) -> list[dict]:
    """JSON lines split on newlines only (a record may hold U+2028, which `splitlines` breaks on)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def hostile_phase(args: argparse.Namespace, work: Path) -> bool:
    from localfa.methods.registry import method_names
    from localfa.testing.hostile import write_corpus

    corpus = write_corpus(work / "data", outside=work / "outside")
    methods = method_names()
    run = work / "run"
    localfa = [sys.executable, "-m", "localfa"]
    bench = bench_command(corpus.folder, run, methods, "0", ["--engine", "oracle"])
    first, resumed = _run(bench), _run(bench)
    diag_out = work / "diagnose.jsonl"
    diagnose = _run(
        [*localfa, "diagnose", str(corpus.folder), "--method", "all-at-once", "--engine", "oracle", "--quiet", "--out", str(diag_out)]
    )
    report = _run([*localfa, "report", str(run)])
    view = _run([*localfa, "view", str(run), "--out", str(work / "view.html")])

    problems = [f"bench: {p}" for p in corpus.problems(_lines(run / "results.jsonl"), first.stderr, per_file=len(methods))]
    problems += [f"diagnose: {p}" for p in corpus.problems(_lines(diag_out) if diag_out.exists() else [], diagnose.stderr)]
    problems += [f"{name}: a traceback" for name, p in (("resume", resumed), ("report", report), ("view", view)) if "Traceback" in p.stderr]
    expected = {"bench": (first, 1), "resume": (resumed, 1), "diagnose": (diagnose, 1), "report": (report, 0), "view": (view, 0)}
    problems += [f"{name}: exit status {p.returncode}, expected {rc}" for name, (p, rc) in expected.items() if p.returncode != rc]
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(f"methods={','.join(methods)}")
    print(f"good_traces={len(corpus.good)} bad_files={len(corpus.bad)} skipped_links={len(corpus.skipped)}")
    print(f"hostile_files={len(corpus.bad) + len(corpus.skipped) + 1}")  # + the trace with hostile names
    print(" ".join(f"{name}_rc={p.returncode}" for name, (p, _) in expected.items()))
    print(f"problems={len(problems)}")
    return not problems
