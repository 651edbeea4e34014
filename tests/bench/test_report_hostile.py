"""The report of a forged results file: markup in a method label, a subset, an agent, evidence,
reasoning and the manifest's model name reaches neither page as markup. report.html carries the
trace view's content security policy; the markdown report escapes HTML in every cell and line."""

from __future__ import annotations

from localfa.bench.report import html_report, markdown_report
from localfa.view.style import CSP
from tests.bench.test_report import rec

MARKUP = '<img src="https://evil.invalid/x.png"><script>alert(1)</script>|'


def records():
    return [
        rec("t1", f"all-at-once:{MARKUP}", 2, 2, agent=MARKUP, subset=MARKUP, evidence=[MARKUP], reasoning=MARKUP),
        rec("t2", f"all-at-once:{MARKUP}", 1, 2, error=MARKUP),
    ]


MANIFEST = {"model": {"name": MARKUP}, "engine": {"backend": MARKUP}, "methods": {f"all-at-once:{MARKUP}": {}}}


def test_the_html_report_escapes_and_forbids_every_request():
    page = html_report(records(), MANIFEST, run_dir="run", n_boot=0)
    assert f'content="{CSP}"' in page and "form-action 'none'" in CSP and "base-uri 'none'" in CSP
    body = page.split("<body>", 1)[1]
    assert "<img" not in body and "<script" not in body
    assert "&lt;img" in body


def test_the_markdown_report_escapes_html():
    md = markdown_report(records(), MANIFEST, substring=True, n_boot=0)
    assert "<img" not in md and "<script" not in md
    assert "&lt;img" in md and "alert(1)&lt;/script&gt;\\|" in md  # a pipe cannot break a cell either
