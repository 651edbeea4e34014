"""The documentation site's generated parts (issue 39.2): each method's options table is drawn
from its `Options` dataclass and the serving profiles, and every method's page asks for one."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

from localfa.methods.registry import METHODS, method_class

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_method_with_options_has_its_table_on_a_page():
    asked = {m for page in (DOCS / "methods").glob("*.md") for m in re.findall(r"<!-- method-options: ([\w-]+) -->", page.read_text())}
    assert asked <= set(METHODS)
    shown = {method_class(m).Options for m in asked}
    with_options = {m for m in METHODS if dataclasses.is_dataclass(method_class(m).Options)}
    assert [m for m in sorted(with_options) if method_class(m).Options not in shown] == []


def test_the_options_table_holds_every_option_and_the_profiles_values():
    table = _hook("method_options").options_table("falat")
    for f in dataclasses.fields(method_class("falat").Options):
        assert f"`{f.name}" in table
    assert "`cpu-embedded` profile" in table  # the embedded model's profile sets FALAT's bounds


def test_the_markers_are_replaced_when_the_site_is_built():
    hook = _hook("method_options")
    out = hook.on_page_markdown("a\n\n<!-- method-options: drift -->\n", None, None, None)
    assert "<!--" not in out and "| `tracer` |" in out
