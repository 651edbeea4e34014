"""Sweeps you can trust: upstream layouts, distinct ids, retried engine errors, resume refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localfa.bench.store import read_records
from localfa.bench.sweep import TIMING_FIELDS, SweepError, load_traces, parse_methods, run_sweep
from localfa.engine.errors import EngineUnavailableError
from localfa.engine.scripted import ScriptedEngine, scripted_default
from localfa.results import ResultRecord, classify_error
from localfa.traces.errors import TraceError
from localfa.traces.importers.whowhen import folder_subset
from tests.bench.test_sweep import write_whowhen

LOCALFA = [sys.executable, "-m", "localfa"]


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LOCALFA, "bench", *args, "--engine", "scripted", "--no-progress"], capture_output=True, text=True, timeout=300)


def upstream_copy(whowhen: Path, root: Path) -> Path:
    """The public repository's layout: Who_and_When/{Algorithm-Generated,Hand-Crafted}/N.json."""
    ww = root / "Who_and_When"
    for ours, theirs in (("algorithm-generated", "Algorithm-Generated"), ("hand-crafted", "Hand-Crafted")):
        shutil.copytree(whowhen / ours, ww / theirs)
    return ww


# ---- point 1: the upstream layout and distinct ids ----------------------------------------------


def test_upstream_layout_runs_into_one_run_with_one_record_per_file(whowhen, tmp_path):
    ww = upstream_copy(whowhen, tmp_path)
    files = sorted(ww.rglob("*.json"))
    run = tmp_path / "RUN"
    p = bench(str(ww), "--methods", "random", "--out", str(run))
    assert p.returncode == 0, p.stderr
    recs = read_records(run / "results.jsonl")
    assert len(recs) == len(files) == len({r.trace for r in recs})
    expected = {f"whowhen/{'algorithm-generated' if f.parent.name.startswith('A') else 'hand-crafted'}/{f.stem}" for f in files}
    assert {r.trace for r in recs} == expected
    assert {r.source for r in recs} == {str(f) for f in files}
    assert {r.subset for r in recs} == {"algorithm-generated", "hand-crafted"}


def test_two_subset_folders_into_one_out_keep_both(whowhen, tmp_path):
    ww = upstream_copy(whowhen, tmp_path)
    run = tmp_path / "RUN"
    for sub in ("Algorithm-Generated", "Hand-Crafted"):
        n = len(list((ww / sub).glob("*.json")))
        p = bench(str(ww / sub), "--methods", "random", "--out", str(run))
        assert p.returncode == 0, p.stderr
        assert f"{n} new records (0 with errors), 0 already done, {n} planned" in p.stderr
    n_files = len(list(ww.rglob("*.json")))
    recs = read_records(run / "results.jsonl")
    assert len(recs) == len({r.trace for r in recs}) == n_files


@pytest.mark.parametrize(
    "folder,subset",
    [
        ("Algorithm-Generated", "algorithm-generated"),
        ("algorithm_generated", "algorithm-generated"),
        ("AlgorithmGenerated", "algorithm-generated"),
        ("Hand-Crafted", "hand-crafted"),
        ("hand crafted", "hand-crafted"),
        ("HAND_CRAFTED", "hand-crafted"),
        ("handcrafted-v2", None),
        ("algorithm", None),
    ],
)
def test_subset_folder_names_ignore_case_and_separators(folder, subset):
    assert folder_subset(folder) == subset


def messages_trace(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"role": "user", "content": "task"}, {"role": "assistant", "name": "Coder", "content": text}]))
    return path


def test_same_file_name_in_two_folders_gets_path_ids(tmp_path):
    data = tmp_path / "data"
    messages_trace(data / "a" / "1.json", "alpha")
    messages_trace(data / "b" / "1.json", "beta")
    messages_trace(data / "b" / "2.json", "gamma")
    traces = load_traces([data])
    assert [t.id for t in traces] == ["a/1", "b/1", "b/2"]  # paths under the folder given, always
    # the ids do not depend on --limit: they are fixed before it applies
    assert [t.id for t in load_traces([data], limit=1)] == ["a/1", "b/1"]
    # two files given from different roots with the same path under them: refused, never renamed
    with pytest.raises(TraceError, match="give the folder that holds both"):
        load_traces([data / "a", data / "b"])


def test_a_key_collision_across_runs_names_both_files(tmp_path):
    data = tmp_path / "data"
    first = messages_trace(data / "a" / "1.json", "alpha")
    second = messages_trace(data / "b" / "1.json", "beta")
    run = tmp_path / "RUN"
    assert bench(str(data / "a"), "--methods", "random", "--out", str(run)).returncode == 0
    p = bench(str(data / "b"), "--methods", "random", "--out", str(run))
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and str(first) in err[0] and str(second) in err[0] and "same id" in err[0], p.stderr
    assert len(read_records(run / "results.jsonl")) == 1  # nothing was skipped as "already done"


def test_an_id_a_file_gives_itself_never_clashes_with_another_files_path(tmp_path):
    """Issue 38 point 6: what a file says of itself (an instance id) is no trace id; two roots
    that name one path are the only clash."""
    from localfa.traces.ids import distinct_ids
    from localfa.traces.load import load_trace

    a = messages_trace(tmp_path / "x" / "1.json", "one")
    b = messages_trace(tmp_path / "y" / "1.json", "two")
    c = messages_trace(tmp_path / "z" / "k.json", "three")
    claims = load_trace(c).model_copy(update={"id": "x/1"})
    ids = [t.id for t in distinct_ids([(tmp_path, a, load_trace(a)), (tmp_path, b, load_trace(b)), (tmp_path, c, claims)])]
    assert ids == ["x/1", "y/1", "z/k"]
    other = messages_trace(tmp_path / "other" / "x" / "1.json", "four")
    with pytest.raises(TraceError, match="also the id of"):
        distinct_ids([(tmp_path, a, load_trace(a)), (tmp_path / "other", other, load_trace(other))])


# ---- point 2: engine errors are retried, logic errors are final ----------------------------------


def test_error_kinds():
    assert classify_error("EngineUnavailableError: http://127.0.0.1:9: connection refused") == "transient"
    assert classify_error("EngineError: http://h:1/v1: request failed (timed out)") == "transient"
    assert classify_error("EngineError: http://h:1/v1: HTTP 502: bad gateway") == "transient"
    assert classify_error("ReadTimeout: read timed out") == "transient"
    assert classify_error("ConnectionRefusedError: [Errno 111] Connection refused") == "transient"
    assert classify_error("EngineError: http://h:1/v1: HTTP 400: bad request") == "final"
    assert classify_error("TruncatedOutputError: output for grammar 'x' was cut") == "final"
    assert classify_error("BudgetError: budget scale:2: the trace has no labelled fault step") == "final"
    assert classify_error("ValueError: bad\nTraceback ...") == "final"
    assert classify_error(None) is None


def flaky(fail_marker: str | None):
    """A scripted engine answering validly, except engine-unavailable errors for one trace's calls."""
    base = scripted_default()

    def answer(req):
        if fail_marker and any(fail_marker in m["content"] for m in req.messages):
            raise EngineUnavailableError("http://127.0.0.1:9/v1: connection refused")
        return base._fn(req)

    return ScriptedEngine(answer)


def test_engine_errors_are_retried_on_resume_and_replace_the_failure(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=2)])
    methods = parse_methods("all-at-once")
    run = tmp_path / "run"
    first = run_sweep(run, traces, methods, [0], flaky("Task 1?"), progress=False)
    failed = sorted(r.trace for r in first.records if r.error)
    assert failed == ["whowhen/algorithm-generated/1", "whowhen/hand-crafted/1"]
    assert {r.error_kind for r in first.records if r.error} == {"transient"}
    again = run_sweep(run, traces, methods, [0], flaky(None), progress=False)
    assert (again.retried, again.written, again.skipped, again.errors) == (2, 2, 2, 0)
    recs = read_records(run / "results.jsonl")
    assert len(recs) == 4 and not [r for r in recs if r.error]
    # the file keeps the failures (append-only); the retried record is the one that counts
    lines = (run / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6
    # and the retried run equals a run that never failed
    clean = run_sweep(tmp_path / "clean", traces, methods, [0], scripted_default(), progress=False)
    strip = lambda r: r.model_dump(exclude={*TIMING_FIELDS, "wall_s"})  # noqa: E731
    assert {r.key: strip(r) for r in recs} == {r.key: strip(r) for r in clean.records}


def test_final_errors_stay_unless_retry_errors(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    methods = parse_methods("all-at-once")
    run = tmp_path / "run"
    bad = run_sweep(run, traces, methods, [0], ScriptedEngine(lambda r: "not json"), progress=False)
    assert [r.error_kind for r in bad.records] == ["final", "final"]
    kept = run_sweep(run, traces, methods, [0], scripted_default(), progress=False)
    assert (kept.written, kept.skipped, kept.retried) == (0, 2, 0)
    retried = run_sweep(run, traces, methods, [0], scripted_default(), retry_errors=True, progress=False)
    assert (retried.written, retried.retried, retried.errors) == (2, 2, 0)
    assert [r.error for r in read_records(run / "results.jsonl")] == [None, None]


def test_bench_cli_retry_errors_flag(tmp_path):
    data = write_whowhen(tmp_path / "ww", per_subset=1)
    run = tmp_path / "run"
    run.mkdir()
    # a run whose one record failed on a method error (final)
    rec = ResultRecord(
        trace="whowhen/hand-crafted/1", method="random", seed=0, error="ValueError: bug", error_kind="final", stop_reason="error"
    )
    assert bench(str(data), "--methods", "random", "--out", str(run)).returncode == 0
    lines = (run / "results.jsonl").read_text().splitlines()
    (run / "results.jsonl").write_text("\n".join(lines[:1]) + "\n" + rec.to_line())
    p = bench(str(data), "--methods", "random", "--out", str(run))
    assert p.returncode == 1 and "0 new records" in p.stderr, p.stderr  # the run still holds an error record
    p = bench(str(data), "--methods", "random", "--out", str(run), "--retry-errors")
    assert p.returncode == 0 and "1 new records (0 with errors, 1 were retries of failed records)" in p.stderr, p.stderr
    assert [r.error for r in read_records(run / "results.jsonl")] == [None, None]


# ---- point 4 and issue 17: a resumed run refuses what changes answers -----------------------------


class Described(ScriptedEngine):
    """A scripted engine that reports in-process vLLM engine settings (for the manifest)."""

    def __init__(self, model_dir: Path, **settings) -> None:
        base = scripted_default()
        super().__init__(base._fn, max_model_len=settings.get("max_model_len", 8192))
        self.settings = {"dtype": "bfloat16", "backend": "guidance", "vllm_version": "0.32.0", **settings}
        self.model_info = {"path": str(model_dir), "sha256": "f" * 16, "name": "tiny"}

    def describe(self):
        s = self.settings
        return {
            "backend": "scripted",
            "vllm_version": s["vllm_version"],
            "max_model_len": self.max_model_len,
            "engine_args": {"dtype": s["dtype"], "structured_outputs_config": {"backend": s["backend"]}},
            "chat_template_kwargs": {"enable_thinking": s.get("thinking", False)},
            "extra_args": s.get("extra", {}),
        }


def model_dir(root: Path, template: str = "{{ messages }}", temperature: float = 0.6) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "chat_template.jinja").write_text(template)
    (root / "generation_config.json").write_text(json.dumps({"temperature": temperature, "top_p": 0.9, "bos_token_id": 1}))
    return root


CHANGES = {
    "max_model_len": (lambda m: Described(m, max_model_len=4096), "max_model_len: 8192 -> 4096"),
    "dtype": (lambda m: Described(m, dtype="float16"), "dtype: 'bfloat16' -> 'float16'"),
    "structured_outputs_backend": (lambda m: Described(m, backend="xgrammar"), "structured_outputs_backend: 'guidance' -> 'xgrammar'"),
    "vllm_version": (lambda m: Described(m, vllm_version="0.33.0"), "vllm_version: '0.32.0' -> '0.33.0'"),
    "enable_thinking": (lambda m: Described(m, thinking=True), "enable_thinking: False -> True"),
    "extra_args": (lambda m: Described(m, extra={"kv_cache_dtype": "fp8"}), "extra_args: kv_cache_dtype differ"),
    "chat_template": (lambda m: Described(model_dir(m, template="{{ other }}")), "chat_template: '"),
    "sampling_defaults": (lambda m: Described(model_dir(m, temperature=1.0)), "sampling_defaults: temperature differ"),
}


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_resume_refuses_a_changed_engine_setting(tmp_path, field):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    methods = parse_methods("random")
    run = tmp_path / "run"
    mdir = model_dir(tmp_path / "model")
    run_sweep(run, traces, methods, [0], Described(mdir), progress=False)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["answer_settings"] == {
        "max_model_len": 8192,
        "dtype": "bfloat16",
        "structured_outputs_backend": "guidance",
        "vllm_version": "0.32.0",
        "chat_template": manifest["answer_settings"]["chat_template"],
        "sampling_defaults": {"temperature": 0.6, "top_p": 0.9},
        "enable_thinking": False,
        "extra_args": {},
        "limits": {"max_step_chars": 20000, "max_steps": 5000},
    }
    assert len(manifest["answer_settings"]["chat_template"]) == 16
    run_sweep(run, traces, methods, [1], Described(mdir), progress=False)  # unchanged: resumes
    make, needle = CHANGES[field]
    changed = make(mdir)
    with pytest.raises(SweepError) as err:
        run_sweep(run, traces, methods, [2], changed, progress=False)
    assert needle in str(err.value) and "--force" in str(err.value)
    assert run_sweep(run, traces, methods, [2], changed, force=True, progress=False).written == 2


def test_resume_refuses_changed_trace_limits(tmp_path, monkeypatch):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    methods = parse_methods("random")
    run = tmp_path / "run"
    mdir = model_dir(tmp_path / "model")
    run_sweep(run, traces, methods, [0], Described(mdir), progress=False)
    monkeypatch.setenv("LOCALFA_MAX_STEP_CHARS", "1000")
    with pytest.raises(SweepError, match="limits: max_step_chars differ"):
        run_sweep(run, traces, methods, [1], Described(mdir), progress=False)


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda m: m["prompts"].update({next(iter(m["prompts"])): "0" * 16}), "prompts: "),
        (lambda m: m["grammars"].update({next(iter(m["grammars"])): "0" * 16}), "grammars: "),
        (lambda m: m["methods"]["all-at-once"]["resolved"].update(max_chars=1), "method all-at-once: "),
        (lambda m: m["model"].update(sha256="0" * 16), "model: sha256 differ"),
        (lambda m: m["engine"].update(backend="vllm"), "backend: 'vllm' -> 'scripted'"),
    ],
)
def test_resume_refuses_a_changed_prompt_grammar_option_model_or_backend(tmp_path, edit, needle):
    """The run directory was made with other settings (edited into its manifest): refuse to mix."""
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    methods = parse_methods("all-at-once")
    run = tmp_path / "run"
    run_sweep(run, traces, methods, [0], scripted_default(), progress=False)
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    with pytest.raises(SweepError) as err:
        run_sweep(run, traces, methods, [1], scripted_default(), progress=False)
    assert needle in str(err.value)


# ---- issue 17: records do not depend on concurrency or on interruptions --------------------------


def test_a_resumed_sweep_equals_an_uninterrupted_one(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=3)])
    methods = parse_methods("all-at-once,binary-search,step-by-step")
    split = tmp_path / "split"
    run_sweep(split, traces[:2], methods, [0], scripted_default(), concurrency=3, progress=False)
    run_sweep(split, traces[:4], methods[:2], [0, 1], scripted_default(), concurrency=2, progress=False)
    run_sweep(split, traces, methods, [0, 1], scripted_default(), concurrency=5, progress=False)
    whole = run_sweep(tmp_path / "whole", traces, methods, [0, 1], scripted_default(), concurrency=16, progress=False)
    strip = lambda r: r.model_dump(exclude={*TIMING_FIELDS})  # noqa: E731
    got = {r.key: strip(r) for r in read_records(split / "results.jsonl")}
    assert len(got) == 6 * 3 * 2
    assert got == {r.key: strip(r) for r in whole.records}


def test_each_case_of_a_file_of_several_runs_has_its_own_id():
    """A TELBench JSON Lines file holds several cases: each is `<file id>/<case id>` (it was the file's
    id for every case, so a sweep of one such file refused to start)."""
    from localfa.bench.sweep import load_traces

    fixture = Path(__file__).parents[1] / "fixtures" / "telbench" / "cases.jsonl"
    assert [t.id for t in load_traces([str(fixture)])] == ["cases/tb-001", "cases/tb-002"]
    assert [t.id for t in load_traces([str(fixture.parent)])] == ["cases/tb-001", "cases/tb-002"]
