"""Pick and build an engine from command-line choices; the embedded model by default."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from localfa.engine.cache import CachingEngine, ResponseCache
from localfa.engine.errors import EngineError
from localfa.engine.settings import EngineSettings, load_profile
from localfa.engine.types import Engine

ENGINES = ("vllm", "transformers", "openai", "scripted")


def best_local_backend() -> str:
    """vLLM if it is installed (GPU or CPU build), else transformers + Outlines."""
    if importlib.util.find_spec("vllm") is not None:
        return "vllm"
    if importlib.util.find_spec("transformers") is not None and importlib.util.find_spec("outlines") is not None:
        return "transformers"
    raise EngineError(
        "no local engine installed: install the CPU stack (bash scripts/setup_cpu.sh) or "
        "vLLM on a GPU host, or use --engine openai --base-url URL"
    )


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def scripted_default(delay_s: float = 0.0) -> Any:
    """A scripted engine that answers every grammar with a valid example (seeded per request)."""
    from localfa.engine.examples import example_text
    from localfa.engine.scripted import ScriptedEngine

    def answer(req: Any) -> str:
        if delay_s:
            time.sleep(delay_s)
        return example_text(req.grammar, req.sampling.seed)

    return ScriptedEngine(answer)


def make_engine(
    engine: str | None = None,
    model: str | None = None,
    profile: str | None = None,
    base_urls: list[str] | None = None,
    api_key: str | None = None,
    cache_dir: str | None = None,
    max_model_len: int | None = None,
    say: Callable[[str], None] = _say,
) -> Engine:
    """Build the engine; wrap it in the response cache when `cache_dir` is given.

    Every engine gets `model_info` (path and content hash of the weights) for the manifest.
    """
    from localfa.engine.model import model_fingerprint, resolve_model

    settings = load_profile(profile) if profile else EngineSettings()
    if model is not None:
        settings.model = model
    if max_model_len:
        settings.max_model_len = max_model_len
    chosen = engine or ("openai" if base_urls else best_local_backend())
    if chosen not in ENGINES:
        raise EngineError(f"unknown engine {chosen!r} (known: {', '.join(ENGINES)})")
    model_info: dict[str, Any]
    if chosen == "scripted":
        built: Any = scripted_default(float(os.environ.get("LOCALFA_SCRIPTED_DELAY_S", "0") or 0))
        model_info = {"path": None, "sha256": None, "name": "scripted"}
    elif chosen == "openai":
        from localfa.engine.openai_backend import OpenAIEngine

        built = OpenAIEngine(base_urls or [], api_key=api_key or os.environ.get("LOCALFA_API_KEY"))
        model_info = {"path": None, "sha256": None, "name": built.model}
        say(f"localfa: engine openai at {', '.join(built.base_urls)} (model {built.model})")
    else:
        model_dir = resolve_model(settings.model)
        model_info = {**model_fingerprint(model_dir), "name": model_dir.name}
        label = "embedded " + model_dir.name if settings.model is None else str(model_dir)
        how = "" if engine else " (best installed backend)"
        say(f"localfa: engine {chosen}{how}, model {label}")
        if chosen == "vllm":
            from localfa.engine.vllm_backend import VLLMEngine

            built = VLLMEngine(model_dir, settings)
        else:
            from localfa.engine.transformers_backend import TransformersEngine

            built = TransformersEngine(model_dir, max_model_len=max_model_len)
    built.model_info = model_info
    if cache_dir:
        identity = f"{chosen}:{model_info.get('sha256') or model_info.get('name')}"
        wrapped = CachingEngine(built, ResponseCache(Path(cache_dir) / "responses.sqlite"), identity)
        wrapped.model_info = model_info
        return wrapped
    return built
