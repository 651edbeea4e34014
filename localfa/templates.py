"""Prompt templates: one Jinja file per prompt under prompts/, rendered with StrictUndefined."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources

import jinja2


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    from localfa.methods.fencing import DATA_NOTICE, fence, neutralise

    root = resources.files("localfa.prompts")
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: (root / name).read_text(encoding="utf-8")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.globals.update(fence=fence, neutralise=neutralise, data_notice=DATA_NOTICE)  # trace text is data
    return env


@lru_cache(maxsize=None)
def _template(name: str) -> jinja2.Template:
    """The compiled template, looked up once: SAFARI renders two templates every turn."""
    return _env().get_template(name)


def render(name: str, **variables: object) -> str:
    """Render prompts/<name> (e.g. "safari/system.j2"); a missing variable is an error."""
    return _template(name).render(**variables).strip()


def template_hashes() -> dict[str, str]:
    """Content hash of every template, for the run manifest."""
    root = resources.files("localfa.prompts")
    out: dict[str, str] = {}

    def walk(node, prefix: str = "") -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".j2"):
                out[prefix + child.name] = hashlib.sha256(child.read_bytes()).hexdigest()[:16]

    walk(root)
    return out
