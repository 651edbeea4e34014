"""What fails across a sweep: taxonomies, the categorise pass (oracle ceiling), summaries, comparisons."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from localfa.cli import main
from localfa.insights.compare import newcombe, wilson
from localfa.insights.taxonomy import BUILTIN, TaxonomyError, load_taxonomy
from localfa.results import ResultRecord
from tests.insights.sample import FAULTS, write_sample


def _records(run: Path) -> list[ResultRecord]:
    from localfa.bench.store import read_run_records

    return read_run_records(run)


@pytest.fixture(scope="module")
def categorised_run(tmp_path_factory) -> Path:
    """A sweep of the categorised sample on the oracle at p = 1, categorised with AgentRx."""
    root = tmp_path_factory.mktemp("cat")
    write_sample(root / "data")
    run = root / "run"
    rc = main(["bench", str(root / "data"), "--methods", "all-at-once,step-by-step", "--engine", "oracle", "--out", str(run)])
    assert rc == 0
    rc = main(
        [
            "bench",
            str(root / "data"),
            "--methods",
            "all-at-once,step-by-step",
            "--engine",
            "oracle",
            "--out",
            str(run),
            "--categorise",
            "agentrx",
        ]
    )
    assert rc == 0
    return run


def test_builtin_taxonomies_load_with_distinct_names_and_sources():
    for name in BUILTIN:
        tax = load_taxonomy(name)
        assert len(tax.names) == len(set(tax.names)) >= 9
        assert tax.source != "unstated" and tax.licence != "unstated"
    assert "Invalid Invocation" in load_taxonomy("agentrx").names
    assert len(load_taxonomy("mast").names) == 14


def test_user_taxonomy_and_its_errors_name_file_and_field(tmp_path):
    good = tmp_path / "ours.toml"
    good.write_text('name = "ours"\n[[category]]\nname = "A"\ndefinition = "first"\n[[category]]\nname = "B"\ndefinition = "second"\n')
    assert load_taxonomy(str(good)).names == ["A", "B"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[category]]\nname = "A"\ndefinition = "x"\n[[category]]\nname = "A"\ndefinition = "y"\n')
    with pytest.raises(TaxonomyError, match=r"bad\.toml: category\.name: names repeat: A"):
        load_taxonomy(str(bad))
    bad.write_text('[[category]]\nname = ""\ndefinition = "x"\n')
    with pytest.raises(TaxonomyError, match=r"category\[0\]\.name"):
        load_taxonomy(str(bad))
    with pytest.raises(TaxonomyError, match="not a built-in taxonomy"):
        load_taxonomy(str(tmp_path / "missing.toml"))


def test_bench_refuses_a_bad_taxonomy_before_any_engine(tmp_path, capsys):
    write_sample(tmp_path / "data", 1)
    rc = main(
        ["bench", str(tmp_path / "data"), "--engine", "oracle", "--methods", "random", "--out", str(tmp_path / "r"), "--categorise", "nope"]
    )
    assert rc == 2
    assert "error: nope: not a built-in taxonomy" in capsys.readouterr().err
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_every_record_carries_its_category_and_matches_the_label_at_p1(categorised_run):
    records = _records(categorised_run)
    assert len(records) == 2 * len(FAULTS)
    for r in records:
        assert r.taxonomy == "agentrx" and r.category and r.category_reason
        assert r.category == r.label.categories[0], (r.trace, r.method, r.category)
        assert r.details["step_kind"] == "action"
        assert r.usage["calls"] >= 1  # the method's own cost, not the pass's


def test_categorise_is_not_asked_again_on_resume(categorised_run, capsys):
    data = categorised_run.parent / "data"
    lines_before = (categorised_run / "results.jsonl").read_text().count("\n")
    rc = main(
        [
            "bench",
            str(data),
            "--methods",
            "all-at-once,step-by-step",
            "--engine",
            "oracle",
            "--out",
            str(categorised_run),
            "--categorise",
            "agentrx",
        ]
    )
    assert rc == 0
    assert "categorised 0 records" in capsys.readouterr().err
    assert (categorised_run / "results.jsonl").read_text().count("\n") == lines_before


def test_a_wrong_oracle_gives_other_categories(tmp_path):
    """The pass has a ceiling like a method: on a right step at p = 0 every category is another one."""
    write_sample(tmp_path / "data")
    run = tmp_path / "run"
    main(["bench", str(tmp_path / "data"), "--methods", "all-at-once", "--engine", "oracle", "--out", str(run)])
    from localfa.engine.factory import make_engine
    from localfa.insights.categorise import categorise_run
    from localfa.traces.load import load_trace

    traces = [load_trace(p) for p in sorted((tmp_path / "data").glob("*.json"))]
    engine = make_engine("oracle:p=0", say=lambda _: None)
    done = categorise_run(run, traces, load_taxonomy("agentrx"), engine)
    assert done.categorised == len([r for r in _records(run) if r.step is not None])
    for r in _records(run):
        if r.category:
            assert r.category != r.label.categories[0]


def test_summarize_counts_groups_exemplars_and_files(categorised_run, capsys):
    assert main(["summarize", str(categorised_run)]) == 0
    out = capsys.readouterr().out
    assert "## consensus (6 diagnoses)" in out
    assert "| Invention of New Information | 2 | 0.333 |" in out
    assert "| Solver |" in out and "| action |" in out and "| middle |" in out
    assert "## Groups of like diagnoses" in out
    lines = [json.loads(x) for x in (categorised_run / "summary.jsonl").read_text().splitlines()]
    kinds = {x["type"] for x in lines}
    assert kinds == {"diagnosis", "count", "group"}
    groups = [x for x in lines if x["type"] == "group"]
    assert groups and all(1 <= len(g["exemplars"]) <= 3 for g in groups)
    report = (categorised_run / "report.html").read_text()
    assert 'id="what-failed"' in report and 'href="summary-view.html#t0"' in report
    view = (categorised_run / "summary-view.html").read_text()
    assert 'id="t0"' in view


def test_groups_are_deterministic_and_gather_like_reasons():
    from localfa.insights.summary import Diagnosed, group_reasons

    def d(i: int, reason: str) -> Diagnosed:
        return Diagnosed(f"t{i}", "m", 0, 1, "A", 5, None, reason, "action")

    items = [d(i, "the agent misread the table row count from the tool output") for i in range(5)]
    items += [d(10 + i, "invented a museum founding year with no source at all") for i in range(4)]
    items += [d(20, "unrelated timeout of the search service")]
    g1, ungrouped = group_reasons(items)
    g2, _ = group_reasons(items)
    assert [(g.size, g.label) for g in g1] == [(g.size, g.label) for g in g2]
    assert [g.size for g in g1] == [5, 4] and ungrouped == 1
    assert {e.trace for e in g1[0].exemplars} <= {f"t{i}" for i in range(5)} and len(g1[0].exemplars) == 3


def test_newcombe_interval_matches_the_published_example():
    # Newcombe (1998), Statistics in Medicine 17:873, Table II example (56/70 vs 48/80): 0.0524 to 0.3339
    lo, hi = newcombe(48, 80, 56, 70)
    assert lo == pytest.approx(0.0524, abs=5e-4) and hi == pytest.approx(0.3339, abs=5e-4)
    assert wilson(0, 10)[0] == 0.0


def test_compare_two_sweeps_prints_accuracy_moved_verdicts_and_shifts(categorised_run, tmp_path, capsys):
    """Run B: the same sample on the wrong oracle (p = 0, its own categories): every verdict
    moves from right to wrong, accuracy falls by 1, and every category shift has an interval."""
    data = categorised_run.parent / "data"
    run_b = tmp_path / "b"
    main(
        [
            "bench",
            str(data),
            "--methods",
            "all-at-once,step-by-step",
            "--engine",
            "oracle:p=0",
            "--out",
            str(run_b),
            "--categorise",
            "agentrx",
        ]
    )
    capsys.readouterr()
    assert main(["summarize", str(categorised_run), str(run_b), "--jsonl", str(tmp_path / "shift.jsonl")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"A = {categorised_run} (12 records), B = {run_b} (12 records): 6 traces in both."
    step_row = next(x for x in lines if x.startswith("all-at-once "))
    assert step_row.split() == ["all-at-once", "6", "step", "1.000", "0.000", "-1.000", "[-1.00,", "-1.00]"]
    assert "Verdicts that moved: 12 of 12 method and trace pairs (12 broke):" in lines
    broke = [x for x in lines if x.startswith("  broke ")]
    assert len(broke) == 12 and all("(label step 2): step 2 " in x for x in broke)
    assert all(len(x) <= 100 for x in lines[1 : lines.index("Verdicts that moved: 12 of 12 method and trace pairs (12 broke):")])
    categories = lines[lines.index(next(x for x in lines if x.startswith("Categories"))) :]
    assert any(re.match(r"consensus +.+ +6 +6 +\d\.\d{3} +\d\.\d{3} +[+-]\d\.\d{3} \[[+-]\d\.\d\d, [+-]\d\.\d\d\]", x) for x in categories)
    rows = [json.loads(x) for x in (tmp_path / "shift.jsonl").read_text().splitlines()]
    assert {r["type"] for r in rows} == {"accuracy", "moved", "shift"}
    acc = next(r for r in rows if r["type"] == "accuracy" and r["method"] == "all-at-once")
    assert (acc["step_a"], acc["step_b"], acc["step_diff"], acc["traces"]) == (1.0, 0.0, -1.0, 6)
    shifts = [r for r in rows if r["type"] == "shift"]
    assert shifts and all(r["ci95"][0] <= r["shift"] <= r["ci95"][1] for r in shifts)
    consensus = [r for r in shifts if r["method"] == "consensus"]
    assert consensus and all(r["shift"] == pytest.approx(r["share_b"] - r["share_a"]) for r in consensus)


def test_compare_without_labels_or_categories_says_so_and_lists_the_moves(tmp_path, capsys):
    example = Path(__file__).resolve().parents[2] / "examples" / "failed_run.json"
    runs = []
    for seed in ("0", "1"):
        run = tmp_path / f"s{seed}"
        main(["bench", str(example), "--methods", "random", "--engine", "scripted", "--seeds", seed, "--out", str(run), "--no-progress"])
        runs.append(run)
    capsys.readouterr()
    assert main(["summarize", *map(str, runs)]) == 0
    out = capsys.readouterr().out
    assert "Accuracy: no trace is labelled in both runs, so there is none to compare." in out
    assert ("Verdicts that moved: 1 of 1" in out) or ("Verdicts: none moved (1 method and trace pairs" in out)
    assert "Categories" not in out


def test_counts_show_an_other_row_and_step_kinds_come_from_the_traces(tmp_path, capsys):
    """Issue 56.3: 20 categories show 12 and one "other" row that adds up; before any categorise
    pass the step kind is read from the traces, not "unknown"."""
    from localfa.insights.render import summary_markdown
    from localfa.insights.summary import summarize

    records = [
        ResultRecord(trace=f"t{i}", method="m", seed=0, step=1, agent="A", category=f"cat{i:02d}", reasoning=f"word{i} reason{i}")
        for i in range(20)
    ]
    md = summary_markdown(summarize(records, kinds={f"t{i}": ["action", "observation"] for i in range(20)}))
    assert "| other (8 more) | 8 | 0.400 |" in md
    assert "| observation | 20 | 1.000 |" in md and "unknown" not in md
    write_sample(tmp_path / "data", 3)
    run = tmp_path / "run"
    assert main(["bench", str(tmp_path / "data"), "--methods", "all-at-once", "--engine", "oracle", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["summarize", str(run)]) == 0
    out = capsys.readouterr().out
    assert "| action | 3 | 1.000 |" in out and "| unknown |" not in out
