"""Phase 2 of scripts/soak.py: a sweep over HTTP against two scripted servers that fail as real
servers do, mid-run (see soak.py's docstring). Prints its figures, last:

    lost=0 duplicates=0 servers_readmitted=1
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from soak_common import REPO, analyse, bench_command, count_lines, write_traces

POISON = "POISON-PILL"
CORRUPT = "\u0000no longer valid"


class Server:
    """One scripted server process on a fixed port, which can be killed and started again."""

    def __init__(self, port: int, extra: list[str]) -> None:
        self.port, self.extra = port, extra
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "localfa.testing.scripted_server", "--port", str(self.port), *self.extra]
        self.proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_healthy(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise TimeoutError(f"{self.url} did not come up")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Sweep:
    """One `localfa bench` pass, its stderr read as it comes (the rotation's lines)."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def readmitted(self) -> int:
        return sum("is back in rotation" in line for line in self.lines)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(timeout=5)

    def finish(self, timeout_s: float) -> str:
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return "failed (timeout)"
        self._reader.join(timeout=5)
        if self.proc.returncode not in (0, 1):
            return f"failed (status {self.proc.returncode}): " + "\n".join(self.lines[-10:])
        return "done"


def corrupt_cache(cache_dir: Path) -> dict[str, str]:
    """Make every cached answer text invalid for its grammar; key -> file, for the check after."""
    corrupted: dict[str, str] = {}
    for db_path in sorted(cache_dir.glob("*.sqlite")):
        db = sqlite3.connect(str(db_path), timeout=30)
        try:
            rows = db.execute("SELECT key, body FROM responses").fetchall()
            for key, body in rows:
                data = json.loads(body)
                data["text"] = CORRUPT
                db.execute("UPDATE responses SET body = ? WHERE key = ?", (json.dumps(data), key))
                corrupted[key] = db_path.name
            db.commit()
        finally:
            db.close()
    return corrupted


def reasked(cache_dir: Path, corrupted: dict[str, str]) -> int:
    """Corrupted entries that now hold a fresh answer: asked again instead of crashing a unit."""
    fresh: set[str] = set()
    for db_path in cache_dir.glob("*.sqlite"):
        db = sqlite3.connect(str(db_path), timeout=30)
        try:
            for key, body in db.execute("SELECT key, body FROM responses").fetchall():
                if key in corrupted and json.loads(body).get("text") != CORRUPT:
                    fresh.add(key)
        finally:
            db.close()
    return len(fresh)


def servers_phase(args: argparse.Namespace, work: Path) -> bool:
    from localfa.bench.sweep import load_traces, parse_seeds
    from localfa.methods.registry import method_class, method_names
    from localfa.serving.launch import free_port

    traces_dir, run_dir = work / "traces", work / "run"
    results, events = run_dir / "results.jsonl", work / "server-events.jsonl"
    write_traces(traces_dir, args.server_traces, args.seed + 100)
    poisoned = sorted(traces_dir.glob("*.json"))[0]
    steps = json.loads(poisoned.read_text())
    steps[0]["content"] += f" {POISON}"
    poisoned.write_text(json.dumps(steps))
    # every method an OpenAI-compatible server can serve (one that scores prompts needs the model's probabilities)
    methods = [m for m in method_names() if not method_class(m).scores_prompts]
    seeds = parse_seeds(args.seeds)
    planned = {(t.id, m, "none", s) for t in load_traces([traces_dir]) for m in methods for s in seeds}
    hold = work / "hold"  # present from B's kill until B is back in rotation: the sweep slows down, never ends first
    common = [
        *("--delay", str(args.server_delay), "--events", str(events), "--poison", POISON, "--poison-file", str(work / "poison")),
        *("--hold-file", str(hold)),
    ]
    servers = [Server(free_port(), [*common, "--throttle-at", "40"]), Server(free_port(), common)]
    for s in servers:
        s.start()
    for s in servers:
        s.wait_healthy()
    engine = ["--engine", "openai", *[a for s in servers for a in ("--base-url", s.url)]]
    cmd = bench_command(traces_dir, run_dir, methods, args.seeds, engine)
    started = time.perf_counter()
    readmitted, outcomes, corrupted = 0, [], {}
    try:
        # pass 1: server B dies at 5% of the units and comes back; the sweep is killed once B is
        # back in rotation and half the units are written
        sweep = Sweep(cmd)
        killed_at = restarted = None
        while sweep.proc.poll() is None:
            done = count_lines(results)
            if killed_at is None and done >= 0.05 * len(planned):  # early: the probes back off (1, 2, 4 s)
                hold.touch()
                servers[1].kill()
                killed_at = time.monotonic()
            if killed_at is not None and restarted is None and time.monotonic() - killed_at >= 1.5:
                servers[1].start()
                restarted = time.monotonic()
            if restarted is not None and sweep.readmitted():
                hold.unlink(missing_ok=True)
            if restarted is not None and sweep.readmitted() and done >= 0.5 * len(planned):
                sweep.kill()
                outcomes.append("killed")
                break
            if time.perf_counter() - started > 600:
                sweep.kill()
                outcomes.append("failed (timeout)")
                break
            time.sleep(0.02)
        else:
            outcomes.append(sweep.finish(60))
        readmitted += sweep.readmitted()
        hold.unlink(missing_ok=True)
        if restarted is None:
            servers[1].start()
        servers[1].wait_healthy()
        corrupted = corrupt_cache(run_dir / "cache")
        for _ in range(args.max_passes):  # resume until nothing retryable is left
            sweep = Sweep(cmd)
            outcomes.append(sweep.finish(600))
            readmitted += sweep.readmitted()
            if outcomes[-1] == "done" and analyse(results, planned)["errors_transient"] == 0:
                break
    finally:
        for s in servers:
            s.kill()
    figures = analyse(results, planned)
    kinds = Counter(json.loads(line)["kind"] for line in events.read_text().splitlines()) if events.exists() else Counter()
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    poison_units = {(r["trace"], r["method"]) for r in records if r.get("error") and "failed on 2 servers" in r["error"]}
    other_errors = [r for r in records if r.get("error") and "failed on 2 servers" not in r["error"] and r.get("error_kind") != "transient"]
    stale = reasked(run_dir / "cache", corrupted)
    print(
        f"servers_phase: units={len(planned)} passes={len(outcomes)} outcomes={','.join(o.split(' ')[0] for o in outcomes)} wall_s={time.perf_counter() - started:.1f}"
    )
    for o in outcomes:
        if o.startswith("failed"):
            print(o, file=sys.stderr)
    print(
        f"server_killed=1 throttled_429={kinds['429']} poison_answers={kinds['poison']} poison_units={len(poison_units)} "
        f"cache_entries_corrupted={len(corrupted)} stale_cache_reasked={stale} errors_other={len(other_errors)}"
    )
    print(f"lost={figures['records_lost']} duplicates={figures['duplicates']} servers_readmitted={readmitted}")
    return (
        figures["records_lost"] == 0
        and figures["duplicates"] == 0
        and readmitted == 1
        and kinds["429"] >= 1
        and kinds["poison"] >= 2
        and stale >= 1
        and not other_errors
        and "killed" in outcomes
    )
