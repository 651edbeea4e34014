"""The pages in a real browser: headless Chromium (the system's, driven by Playwright).

Each page is opened from disk; every request it makes is recorded and must stay on file:, data:
or about: (nothing leaves the machine), the console must stay free of errors, and what a person
looks for must be there and visible: the highlighted step, the marked evidence, the charts. The
report's wide table must fit a 1280 px window. A screenshot of each page is kept in pytest's tmp
dir, and in $LOCALFA_SCREENSHOT_DIR when set (that is how docs/*.png are made).

Playwright never downloads a browser here: it drives the distribution's `chromium` through its
executable path. Without it the tests fail in CI (CI=true) and are skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.view.conftest import REPO, localfa

ALLOWED_SCHEMES = ("file:", "data:", "about:")
WIDTH = 1280
SETUP_HINT = "run scripts/setup_cpu.sh (it installs Debian's chromium with apt-get and playwright into .venv)"


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path, what = None, "the playwright package is not installed"
    else:
        what = "no chromium executable on PATH"
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{what}: {SETUP_HINT}", pytrace=False)
        pytest.skip(f"{what}: {SETUP_HINT}")
    return path


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"], headless=True)
        yield b
        b.close()


class Opened:
    """A page opened from disk, with every request and console error it produced."""

    def __init__(self, browser, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": WIDTH, "height": 900})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.goto(path.resolve().as_uri(), wait_until="load")

    def check_offline_and_clean(self) -> None:
        outside = [u for u in self.requests if not u.startswith(ALLOWED_SCHEMES)]
        assert outside == [], f"the page made requests off the machine: {outside}"
        assert self.requests and self.requests[0].startswith("file:")
        assert self.errors == [], f"console errors: {self.errors}"

    def screenshot(self, name: str, tmp_path: Path, full_page: bool = False) -> Path:
        shot = tmp_path / name
        self.page.screenshot(path=str(shot), full_page=full_page)
        assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
        if os.environ.get("LOCALFA_SCREENSHOT_DIR"):
            keep = Path(os.environ["LOCALFA_SCREENSHOT_DIR"])
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, keep / name)
        return shot


def _visible_box(page, selector: str) -> dict:
    assert page.locator(selector).count() >= 1, f"{selector} not on the page"
    box = page.locator(selector).first.bounding_box()
    assert box and box["width"] > 0 and box["height"] > 0, f"{selector} is not visible"
    return box


def test_trace_view_in_chromium(browser, scripted_results, tmp_path):
    page_path = tmp_path / "view.html"
    localfa("view", str(scripted_results), "--one-page", "--out", str(page_path))
    opened = Opened(browser, page_path)
    page = opened.page
    rec = json.loads(scripted_results.read_text().splitlines()[0])
    decisive = page.locator(f"#t0-s{rec['step']}")
    assert "decisive" in decisive.get_attribute("class")
    color = decisive.evaluate("e => getComputedStyle(e).borderLeftColor")
    assert color == "rgb(214, 39, 40)"  # the red of the decisive step, not the default grey
    marks = page.locator("#t0-s4 mark.ev")
    assert marks.count() == 2
    assert marks.nth(1).inner_text() == "Greater Sydney, 2021 Census"
    assert marks.first.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(255, 228, 92)"
    _visible_box(page, "#t0-s4 mark.ev")
    assert page.locator("li.unverified .flag").first.inner_text() == "not verbatim in the trace"
    assert page.locator("li.step.labelled").count() == 1  # the Who&When fixture's label
    opened.check_offline_and_clean()
    opened.screenshot("trace-view.png", tmp_path)


def test_report_in_chromium(browser, tmp_path):
    run = tmp_path / "run"
    data = REPO / "tests" / "fixtures" / "traces"
    localfa(
        "bench",
        str(data / "whowhen_algorithm.json"),
        str(data / "whowhen_handcrafted.json"),
        "--engine",
        "scripted",
        "--methods",
        "all-at-once,safari:max_turns=3,binary-search,random,heuristic",
        "--seeds",
        "0,1",
        "--out",
        str(run),
        "--no-progress",
    )
    localfa("report", str(run))
    opened = Opened(browser, run / "report.html")
    page = opened.page
    charts = page.locator("svg.chart")
    assert [charts.nth(i).get_attribute("data-chart") for i in range(charts.count())] == ["bars", "cost", "lines"]
    for kind in ("bars", "cost", "lines"):
        _visible_box(page, f'svg[data-chart="{kind}"]')
    assert page.locator('svg[data-chart="bars"] rect.bar').count() == 5
    assert page.locator('svg[data-chart="lines"] polyline.curve').count() == 5
    assert page.locator('svg[data-chart="cost"] circle.point.front').count() >= 1
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH  # the wide table fits, no h-scroll
    opened.check_offline_and_clean()
    opened.screenshot("report.png", tmp_path, full_page=True)  # per-trace details are folded: not long


@pytest.mark.real
def test_safari_on_the_embedded_model_opens_without_console_errors(browser, real_sweep, tmp_path):
    rec = real_sweep.records("safari")[0]  # SAFARI on the embedded model, with its transcript
    page_path = tmp_path / "page.html"
    # from the sweep's own run folder: a record copied elsewhere names a trace outside its folder,
    # which `view` refuses to read (the run folder's trust rule)
    localfa("view", str(real_sweep.run), "--trace", rec["trace"], "--method", rec["method"], "--one-page", "--out", str(page_path))
    opened = Opened(browser, page_path)
    page = opened.page
    assert "decisive" in page.locator(f"#t0-s{rec['step']}").get_attribute("class")
    turns = [t for t in rec["transcript"] if t["turn"] != "final"]
    assert page.locator("li.turn:not(.final)").count() == len(turns)
    assert page.locator("mark.ev").count() >= sum(rec["details"]["evidence_verbatim"])
    opened.check_offline_and_clean()
    opened.screenshot("trace-view-real.png", tmp_path)
