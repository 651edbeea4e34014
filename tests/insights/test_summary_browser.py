"""The "What failed" section of report.html and the exemplars' view, in a real browser."""

from __future__ import annotations

from localfa.cli import main
from tests.insights.sample import write_sample
from tests.view.test_browser import Opened, _visible_box, browser  # noqa: F401 - the module's fixture


def test_report_section_has_chart_groups_and_working_exemplar_links(browser, tmp_path):  # noqa: F811
    write_sample(tmp_path / "data")
    run = tmp_path / "run"
    args = ["bench", str(tmp_path / "data"), "--methods", "all-at-once,step-by-step", "--engine", "oracle", "--out", str(run)]
    assert main([*args, "--categorise", "agentrx", "--no-progress"]) == 0
    assert main(["summarize", str(run)]) == 0
    opened = Opened(browser, run / "report.html")
    opened.check_offline_and_clean()
    page = opened.page
    _visible_box(page, "#what-failed svg.chart")
    assert page.locator("#what-failed rect.bar").count() == 4  # the sample's four categories
    assert page.locator("#what-failed tr.group").count() >= 3
    link = page.locator("#what-failed tr.group a").first
    href = link.get_attribute("href")
    assert href and href.startswith("summary-view.html#t")
    opened.screenshot("summary-report.png", tmp_path, full_page=True)
    link.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(href.split("/")[-1])
    anchor = href.split("#", 1)[1]
    _visible_box(page, f"section#{anchor}")
    assert page.locator(f"section#{anchor} li.step.labelled").count() == 1
