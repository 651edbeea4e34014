"""The sweep index in a real browser (issue 56.1): headless Chromium, the system's, as
tests/view/test_browser.py drives it.

A generated sweep of 1,000 diagnoses (250 small traces x 2 methods x 2 seeds, labelled, some
with categories, confidences and errors) is viewed with the CLI; the index must draw in under
2 s, filter by a column and by free text, sort, keep its view in the address, and open a row's
trace page at that diagnosis, without a request leaving the machine or a console error.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.view.conftest import localfa
from tests.view.test_browser import Opened, browser  # noqa: F401  (the shared fixture)

TRACES = 250
METHODS = ("all-at-once", "vote:members=random*3")
SEEDS = (0, 1)
AGENTS = ("Planner", "WebSurfer", "Coder", "Verifier")
LOAD_LIMIT_S = 2.0


def _trace(i: int) -> list[dict[str, str]]:
    steps = [{"role": "user", "name": "human", "content": f"Task {i}: find the population of city {i}."}]
    for k in range(6):
        agent = AGENTS[(i + k) % len(AGENTS)]
        steps.append({"role": "assistant", "name": agent, "content": f"{agent} works on city {i}, step {k + 1}."})
    return steps


def _record(i: int, method: str, seed: int, source: str) -> dict:
    step = (i + seed) % 6 + 1
    agent = AGENTS[(i + step - 1) % len(AGENTS)]
    error = "EngineError: the server went away" if i % 97 == 0 and seed == 1 else None
    return {
        "trace": f"synthetic/{i}",
        "source": source,
        "subset": "even" if i % 2 == 0 else "odd",
        "method": method,
        "method_name": method.split(":")[0],
        "seed": seed,
        "budget": "none",
        "step": None if error else step,
        "agent": None if error else agent,
        "reasoning": f"The {agent.lower()} misread the census table for city {i}." if i % 50 else "A needle: zanzibar appears here.",
        "confidence": 0.5 + (i % 5) / 10 if method.startswith("vote") else None,
        "stop_reason": "error" if error else "submitted",
        "usage": {"calls": 1, "prompt_tokens": 400 + i, "completion_tokens": 20, "cached_tokens": 0},
        "wall_s": 0.1,
        "error": error,
        "n_steps": 7,
        "label": {"mistake_agent": AGENTS[i % len(AGENTS)], "mistake_step": 1 + i % 6},
        "category": ("Plan issue", "Tool misuse", "Misreading")[i % 3] if i % 4 == 0 else None,
    }


def _records() -> list[dict]:
    return [_record(i, m, s, "") for i in range(TRACES) for m in METHODS for s in SEEDS]


def generated_sweep(run: Path) -> Path:
    """A run directory of 1,000 records over 250 trace files its manifest lists."""
    traces = run / "traces"
    traces.mkdir(parents=True)
    files, lines = [], []
    for i in range(TRACES):
        path = traces / f"{i}.json"
        path.write_text(json.dumps(_trace(i)))
        files.append(str(path))
        lines += [json.dumps(_record(i, m, s, str(path))) for m in METHODS for s in SEEDS]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    (run / "manifest.json").write_text(json.dumps({"trace_files": files, "methods": {m: {} for m in METHODS}}))
    return run


def _ready(opened: Opened) -> None:
    opened.page.wait_for_selector("body[data-ready='1']", timeout=10_000)


def _status(opened: Opened) -> str:
    return opened.page.locator("#status").inner_text()


def test_the_index_of_1000_diagnoses_opens_in_under_2_s_and_filters(browser, tmp_path):  # noqa: F811
    run = generated_sweep(tmp_path / "run")
    started = time.perf_counter()
    proc = localfa("view", str(run))
    print(f"view wrote the index and {TRACES} trace pages in {time.perf_counter() - started:.1f} s")
    assert "1000 diagnoses of 250 traces" in proc.stderr
    index = run / "view.html"
    assert len(list((run / "view-traces").glob("*.html"))) == TRACES
    assert index.stat().st_size < 400_000  # the rows travel as data, not as 1,000 rendered views

    started = time.perf_counter()
    opened = Opened(browser, index)
    _ready(opened)
    wall_s = time.perf_counter() - started
    page = opened.page
    ready_s = int(page.locator("body").get_attribute("data-ready-ms")) / 1000  # navigation start -> rows drawn, filters live
    print(f"index_ready_seconds={ready_s:.3f} (limit {LOAD_LIMIT_S}); with opening a new tab: {wall_s:.3f} s")
    assert ready_s < LOAD_LIMIT_S
    assert _status(opened).startswith("1,000 of 1,000 diagnoses · 250 traces")
    assert 10 < page.locator("tbody tr[data-p]").count() < 120  # only the rows in view are drawn

    agent_filter = page.locator('tr.filters input[data-key="agent"]')
    agent_filter.fill("verifier")
    expected = sum(1 for r in _records() if r["agent"] == "Verifier")
    assert _status(opened).startswith(f"{expected} of 1,000 diagnoses")
    agents = page.locator('tbody td[data-key="agent"]').all_inner_texts()
    assert agents and set(agents) == {"Verifier"}
    agent_filter.fill("")

    page.locator("#q").fill("zanzibar")
    needles = [r for r in _records() if "zanzibar" in r["reasoning"] and not r["error"]]  # an error row shows its error
    assert _status(opened).startswith(f"{len(needles)} of 1,000 diagnoses · 5 traces")  # traces 0, 50, ..., 200
    traces = set(page.locator('tbody td[data-key="trace"]').all_inner_texts())
    assert traces == {f"synthetic/{i}" for i in range(0, TRACES, 50)}

    page.locator("#q").fill("")
    page.locator('tr.filters input[data-key="tokens"]').fill(">=645")  # prompt 400 + i, completion 20: i >= 225
    assert _status(opened).startswith("100 of 1,000 diagnoses · 25 traces")
    page.locator('tr.titles th[data-key="tokens"]').click()
    page.locator('tr.titles th[data-key="tokens"]').click()  # descending
    assert page.locator('tbody td[data-key="trace"]').first.inner_text() == "synthetic/249"
    assert "sort=-tokens" in page.url and "f.tokens=%3E%3D645" in page.url

    page.locator('tr.filters input[data-key="step_ok"]').fill("yes")
    right = _status(opened)
    assert "step right in" in right and right.split(" of ")[0] == right.split("step right in ")[1].split(" of ")[0]

    page.locator("tbody tr[data-p]").first.click()  # a row opens its trace's page, at its diagnosis
    page.wait_for_load_state("load")
    assert "/view-traces/" in page.url and "#d0-" in page.url
    assert page.locator("h1").inner_text().startswith("synthetic/2")
    page.go_back()
    _ready(opened)
    assert page.locator('tr.filters input[data-key="tokens"]').input_value() == ">=645"  # the view came back
    opened.check_offline_and_clean()


def test_a_small_sweep_index_and_its_trace_page(browser, tmp_path):  # noqa: F811
    """The pictures on docs/viewing.md: a sweep of the Who&When examples on the oracle engine (p =
    0.7, categorised), its index filtered to one method, and a row's trace page."""
    run = tmp_path / "run"
    methods = "all-at-once,step-by-step,vote:members=all-at-once*3"
    localfa(
        "bench", "examples/whowhen", "--methods", methods, "--seeds", "0,1", "--engine", "oracle:p=0.7",
        "--categorise", "agentrx", "--out", str(run), "--no-progress",
    )  # fmt: skip
    localfa("view", str(run))
    opened = Opened(browser, run / "view.html")
    _ready(opened)
    page = opened.page
    assert _status(opened).startswith("24 of 24 diagnoses · 4 traces · step right in ")
    headers = page.locator("tr.titles th:not([hidden])").all_inner_texts()
    assert headers[:3] == ["trace", "method", "seed"] and "subset" not in headers  # the ids already name their subset
    page.locator('tr.filters input[data-key="method"]').fill("=all-at-once")
    assert _status(opened).startswith("8 of 24 diagnoses · 4 traces")
    assert set(page.locator('tbody td[data-key="method"]').all_inner_texts()) == {"all-at-once"}
    opened.screenshot("sweep-index.png", tmp_path)
    page.locator("tbody tr[data-p]").nth(2).locator("td").nth(3).click()
    page.wait_for_load_state("load")
    assert page.locator("h1").inner_text() == "whowhen/algorithm-generated/2" and "#d0-" in page.url
    assert page.locator("article.diag:target").count() == 1  # the row's own diagnosis
    opened.check_offline_and_clean()
    page.evaluate("window.scrollTo(0, 0)")  # the picture shows the page from its top: the way back, the verdicts, the trace
    opened.screenshot("sweep-trace.png", tmp_path)


def test_hostile_rows_stay_text(browser, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    run.mkdir()
    evil = '</script><script>document.title="pwned"</script><img src=x onerror="document.title=1">'
    records = [
        {"trace": "../../etc/passwd", "source": "/etc/passwd", "method": "m", "seed": 0, "agent": evil, "reasoning": evil, "step": 1},
        {"trace": evil, "source": "", "method": evil, "seed": 0, "step": 3, "category": "\u2028x\ud83d"},
    ]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    localfa("view", str(run))
    opened = Opened(browser, run / "view.html")
    _ready(opened)
    page = opened.page
    assert page.title() == "localfa — run"
    assert page.locator("tbody img").count() == 0 and page.locator("body script").count() == 2  # the data block and the script
    assert evil in page.locator('tbody td[data-key="agent"]').all_inner_texts()
    assert sorted(p.name for p in (run / "view-traces").iterdir()) == ["00000.html", "00001.html"]
    opened.check_offline_and_clean()
