"""MkDocs hook: the benchmarks page is drawn from the JSON files under docs/benchmarks/.

Each file is what a `scripts/bench_*.py --json FILE` run wrote (`localfa.bench.benchjson`); the
page's `<!-- benchmark-files -->` marker is replaced by one section per file, every field escaped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localfa.bench.benchjson import render_page

MARKER = "<!-- benchmark-files -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    folder = Path(config["docs_dir"]) / "benchmarks"
    return markdown.replace(MARKER, render_page(folder.glob("*.json")))
