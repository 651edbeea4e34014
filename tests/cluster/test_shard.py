"""`--shard I/N`: a deterministic split of the units, one results file per shard, read as one run."""

from __future__ import annotations

import subprocess

import pytest

from localfa.bench.driver import run_units_sweep
from localfa.bench.executors import LocalExecutor
from localfa.bench.report import load_run
from localfa.bench.shard import Shard, bucket
from localfa.bench.sweep import load_traces, parse_methods, run_sweep
from localfa.bench.units import plan_units
from localfa.engine.scripted import scripted_default
from tests.cluster.helpers import LOCALFA, by_key, raw_lines, write_whowhen


def test_shard_parse_and_a_stable_split():
    assert Shard.parse(" 2/8 ") == Shard(2, 8) and Shard(2, 8).results_name == "results.shard-2-of-8.jsonl"
    for bad in ("0/2", "3/2", "1/0", "a/b", "1", ""):
        with pytest.raises(ValueError):
            Shard.parse(bad)
    # sha256 of the key, not Python's salted hash: the same bucket in every process and on every host
    assert bucket(("whowhen/hand-crafted/1", "safari", "none", 0), 1000) == 604
    assert bucket(("whowhen/hand-crafted/1", "safari", "none", 1), 1000) == 864


def test_shards_partition_every_unit(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=5)])
    units = plan_units(traces, parse_methods("all-at-once,random"), ["none", "2000"], [0, 1, 2])
    keys = [u.key for u in units]
    for n in (2, 3, 7):
        owned = [[k for k in keys if Shard(i, n).owns(k)] for i in range(1, n + 1)]
        assert sorted(k for part in owned for k in part) == sorted(keys)  # each unit in exactly one shard
        assert min(map(len, owned)) > 0


def test_two_shards_equal_the_unsharded_run(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=3)])
    methods = parse_methods("all-at-once,binary-search,random")
    whole = run_sweep(tmp_path / "whole", traces, methods, [0, 1], scripted_default(), progress=False)
    run = tmp_path / "sharded"
    parts = [
        run_units_sweep(run, traces, methods, [0, 1], LocalExecutor(scripted_default()), shard=Shard(i, 2), progress=False) for i in (1, 2)
    ]
    assert sorted(p.name for p in run.glob("results*.jsonl")) == ["results.shard-1-of-2.jsonl", "results.shard-2-of-2.jsonl"]
    assert sum(p.written for p in parts) == whole.written == 36 and min(p.written for p in parts) > 0
    assert by_key(run) == by_key(tmp_path / "whole")
    assert len(raw_lines(run)) == 36  # no key written by both shards
    records, manifest = load_run(run)  # the report reads every shard file
    assert len(records) == 36 and manifest["shard"] in ("1/2", "2/2") and len(manifest["resumed"]) == 1
    # resume reads all shard files: the unsharded command has nothing left to do
    again = run_sweep(run, traces, methods, [0, 1], scripted_default(), progress=False)
    assert again.written == 0 and again.skipped == 36
    # and a shard re-run after a kill skips what it finished
    redo = run_units_sweep(run, traces, methods, [0, 1], LocalExecutor(scripted_default()), shard=Shard(1, 2), progress=False)
    assert redo.written == 0 and redo.skipped == parts[0].written


def test_shard_cli_and_bad_flags(tmp_path):
    data = write_whowhen(tmp_path / "ww", per_subset=2)
    run = tmp_path / "run"
    base = ["bench", str(data), "--methods", "all-at-once,random", "--engine", "scripted", "--no-progress", "--out", str(run)]
    for i in (1, 2):
        p = subprocess.run([*LOCALFA, *base, "--shard", f"{i}/2"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
    assert len(by_key(run)) == 8 and not (run / "results.jsonl").exists()
    rep = subprocess.run([*LOCALFA, "report", str(run)], capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0 and "all-at-once" in rep.stdout, rep.stderr
    for extra, needle in ((["--shard", "3/2"], "--shard"), (["--shard", "x"], "--shard"), (["--workers", "2"], "--ray")):
        p = subprocess.run([*LOCALFA, *base, *extra], capture_output=True, text=True, timeout=120)
        err = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(err) == 1 and err[0].startswith("error: ") and needle in err[0], p.stderr
