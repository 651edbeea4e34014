"""A results file is input like a trace: a hostile one cannot inject markup into the page, make it
fetch, post or navigate anything, nor make `localfa view` read a file outside the run.

The results file here is a real `diagnose --out` (scripted engine) with hostile records added:
markup and a meta refresh in every text field (agent, method, reasoning, evidence, error, detail
keys and values, `details.spans` of DRIFT's renderer), a span of 10**12 steps, and `source`s that
name a secret file outside the run and ``../../../../etc/passwd``. Checked on the HTML, then in
Chromium (the fixture of `test_browser`): no element, request or navigation the page did not make.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localfa.view.records import TraceFiles
from tests.view.conftest import localfa
from tests.view.test_browser import Opened, browser  # noqa: F401 - the fixture, reused

SECRET = "TOPSECRET-4711"
EVIL = "https://evil.invalid"
MARKUP = (
    f'<meta http-equiv="refresh" content="0;url={EVIL}/refresh"><base href="{EVIL}/"><img src="{EVIL}/img.png">'
    f'<script>fetch("{EVIL}/js")</script><iframe src="{EVIL}/frame"></iframe><form action="{EVIL}/post"><button>go</button></form>'
    f'<link rel="stylesheet" href="{EVIL}/css"><a href="javascript:alert(1)">x</a>"\'><svg onload=alert(1)>'
)
# Elements the page never makes itself: any of them on the page came from the results file.
FOREIGN = "script,iframe,img,form,base,link,object,embed,button,input,video,audio,svg,a[href^=javascript],meta[http-equiv=refresh]"


def hostile_run(tmp_path: Path) -> tuple[Path, Path]:
    """(results file, the folder of the run's one real trace); a secret file sits outside the run."""
    data = tmp_path / "data"
    data.mkdir()
    trace = data / "run.json"
    history = [{"role": "assistant", "name": ["Planner", "Coder"][i % 2], "content": f"step {i}: counted"} for i in range(6)]
    trace.write_text(json.dumps({"question": "rows?", "history": history, "mistake_agent": "Coder", "mistake_step": "3"}))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    secret = outside / "secret.json"
    secret.write_text(json.dumps([{"role": "user", "content": SECRET}, {"role": "assistant", "name": "A", "content": SECRET}]))
    results = tmp_path / "run" / "diag.jsonl"
    results.parent.mkdir()
    localfa("diagnose", str(trace), "--method", "all-at-once", "--engine", "scripted", "--quiet", "--out", str(results))
    (good,) = [json.loads(line) for line in results.read_text().splitlines()]

    def hostile(trace_id: str, source: str, method: str) -> dict:
        rec = dict(good, trace=trace_id, source=source, method=method, method_name=method.split(":")[0])
        rec.update(agent=MARKUP, reasoning=MARKUP, evidence=[MARKUP], error=None, spans=[[0, 10**12], [2, 3]])
        rec["details"] = {
            MARKUP: MARKUP,
            "spans": [[MARKUP, 3], [1, MARKUP], MARKUP, [0, 10**12]],
            "error_spans": [0, 1, 2, 3, MARKUP],
            "first_error_span": 0,
            "tracer": {"marks": [{"span": 0, "claim": MARKUP, "role": MARKUP}, MARKUP]},
            "t_hat": MARKUP,
        }
        return rec

    records = [
        good,
        hostile(good["trace"], good["source"], "drift"),  # the real trace, drawn by DRIFT's renderer
        hostile("secret", str(secret), "safari"),
        hostile("passwd", "../../../../../../../../etc/passwd", f"falat:{MARKUP}"),
        hostile("relative", "../elsewhere/secret.json", "all-at-once"),
    ]
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    return results, data


def _no_markup_from_the_records(html: str) -> None:
    head, body = html.split("<body>", 1)
    assert "form-action 'none'" in head and "base-uri 'none'" in head and "default-src 'none'" in head
    for tag in ("<meta", "<base", "<img", "<script", "<iframe", "<form", "<link", "<svg", "<button", 'href="javascript'):
        assert tag not in body, f"{tag} reached the page unescaped"
    assert SECRET not in html  # the file outside the run was not read
    assert "root:" not in html


def test_a_hostile_results_file_reaches_the_page_only_as_text(tmp_path):
    results, _ = hostile_run(tmp_path)
    page = tmp_path / "page.html"
    localfa("view", str(results), "--one-page", "--out", str(page))
    html = page.read_text()
    _no_markup_from_the_records(html)
    assert "not one of this run&#x27;s trace files" in html  # the secret and /etc/passwd were refused, and said so
    assert html.count('<li id="t0-s') == 6  # the run's own trace is read (its manifest lists it): 6 steps, not 10**12


def test_a_hostile_results_file_reaches_the_index_and_trace_pages_only_as_text(tmp_path):
    results, _ = hostile_run(tmp_path)
    index = tmp_path / "index.html"
    localfa("view", str(results), "--out", str(index))
    pages = sorted((tmp_path / "index-traces").iterdir())
    assert [p.name for p in pages] == ["00000.html", "00001.html", "00002.html", "00003.html"]  # named by number, never by id
    for page in pages:
        _no_markup_from_the_records(page.read_text())
    html = index.read_text()
    body = html.split("<body>", 1)[1]
    data = body.split('<script type="application/json" id="rows">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data and "&" not in data  # nothing in the rows can end their block
    assert body.count("<script") == 2 and SECRET not in html and "root:" not in html


def test_only_the_runs_own_files_or_a_named_folder_are_read(tmp_path):
    results, data = hostile_run(tmp_path)
    runs_own = TraceFiles.of_run(results)
    assert runs_own.allows(data / "run.json")
    assert not runs_own.allows(tmp_path / "elsewhere" / "secret.json") and not runs_own.allows(Path("/etc/passwd"))
    named = TraceFiles.of_run(results, [tmp_path / "elsewhere"])
    assert named.allows(tmp_path / "elsewhere" / "secret.json") and not named.allows(Path("/etc/passwd"))
    page = tmp_path / "named.html"
    localfa("view", str(results), "--one-page", "--out", str(page), "--traces", str(tmp_path / "elsewhere"))
    assert SECRET in page.read_text()  # the folder named is read


def test_hostile_results_in_chromium(browser, tmp_path):  # noqa: F811 - the fixture
    results, _ = hostile_run(tmp_path)
    page_path = tmp_path / "page.html"
    localfa("view", str(results), "--one-page", "--out", str(page_path))
    navigations: list[str] = []
    opened = Opened(browser, page_path)
    page = opened.page
    page.on("framenavigated", lambda f: navigations.append(f.url))
    page.wait_for_timeout(1500)  # a meta refresh of 0 s would have fired by now
    assert page.url == page_path.resolve().as_uri() and navigations == []
    assert page.evaluate(f"document.querySelectorAll({json.dumps(FOREIGN)}).length") == 0
    metas = page.evaluate(
        "[...document.querySelectorAll('meta')].map(m => m.getAttribute('http-equiv') || m.getAttribute('name') || 'charset')"
    )
    assert sorted(metas) == ["Content-Security-Policy", "charset", "generator", "viewport"]  # only the page's own
    assert len(page.frames) == 1
    assert SECRET not in page.evaluate("document.body.innerText")
    assert MARKUP[:40] in page.evaluate("document.body.innerText")  # the markup is there, as text
    assert "root:" not in page.content()
    opened.check_offline_and_clean()  # every request stayed on file: / data: / about:
    assert all(u.startswith("file:") for u in opened.requests) and len(opened.requests) == 1


@pytest.mark.parametrize("field", ["agent", "method", "source"])
def test_markup_in_a_record_field_is_escaped(tmp_path, field):
    results, _ = hostile_run(tmp_path)
    rec = json.loads(results.read_text().splitlines()[0])
    rec[field] = MARKUP
    results.write_text(json.dumps(rec) + "\n")
    page = tmp_path / "one.html"
    localfa("view", str(results), "--out", str(page))
    assert "<img" not in page.read_text().split("<body>", 1)[1]


def test_a_record_nested_too_deep_is_a_note_or_one_error_line(tmp_path):
    results, _ = hostile_run(tmp_path)
    good = results.read_text().split("\n")[0]
    deep = good[:-1] + ', "details": {"x": ' + "[" * 900 + "]" * 900 + "}}"  # loads, cannot be written back
    results.write_text(good + "\n" + deep.replace('"trace": ', '"trace": "deep", "was": ', 1) + "\n")
    page = tmp_path / "deep.html"
    localfa("view", str(results), "--out", str(page))
    assert "this record cannot be shown" in page.read_text()
    results.write_text(good + "\n" + '{"trace": "t", "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    p = subprocess.run([sys.executable, "-m", "localfa", "view", str(results), "--out", str(page)], capture_output=True, text=True)
    assert p.returncode == 2 and "line 2 is not a diagnosis record" in p.stderr and "Traceback" not in p.stderr, p.stderr
