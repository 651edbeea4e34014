"""The engine registry and the one way to build an engine from user choices.

Backends are registered lazily by name (``name -> "module:Class"``), as lm-evaluation-harness
does with models: listing them imports nothing heavy. Adding a backend: write a module with a
`BaseEngine` subclass that has `create(options, say)` (and `available()` if it is a local backend
that may not be installed), add one line to `ENGINES`, and it works in every command.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from localfa.engine.cache import CachingEngine
from localfa.engine.cache_files import CacheFiles
from localfa.engine.errors import EngineError
from localfa.engine.identity import answer_identity
from localfa.engine.settings import EMBEDDED_PROFILE, EngineSettings, MethodDefaults, load_profile
from localfa.engine.types import Engine

ENGINES: dict[str, str] = {
    "vllm": "localfa.engine.vllm_backend:VLLMEngine",
    "transformers": "localfa.engine.transformers_backend:TransformersEngine",
    "openai": "localfa.engine.openai_backend:OpenAIEngine",
    "scripted": "localfa.engine.scripted:ScriptedEngine",
    "oracle": "localfa.oracle.engine:OracleEngine",
    "latency": "localfa.testing.latency:LatencyEngine",  # scripted answers at a GPU's pace (benchmarks)
}
# Local backends, best first: the default when no engine is named.
LOCAL_PREFERENCE = ("vllm", "transformers")
# The backend used when servers are named (--base-url) and no engine is.
SERVER_BACKEND = "openai"


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


@dataclass
class EngineOptions:
    """What the user chose: backend, model, profile, servers, cache; None = the default."""

    engine: str | None = None
    model: str | None = None
    profile: str | None = None
    base_urls: list[str] = field(default_factory=list)
    api_key: str | None = field(default=None, repr=False)  # never printed
    cache_dir: str | None = None
    max_model_len: int | None = None
    # Every method it will serve only scores prompts (prism): the default local backend is then
    # transformers, which also returns attention and, on a CPU, scores far faster than vLLM.
    scoring_only: bool = False

    def settings(self) -> EngineSettings:
        """The profile's settings with the command-line overrides applied. With neither a profile
        nor a model named, the embedded model runs on its own profile's engine settings (float32:
        a CPU without native bf16 emulates it, 3-6x slower), as its method tables already are."""
        name = self.profile or (EMBEDDED_PROFILE if self.model is None else None)
        settings = load_profile(name) if name else EngineSettings()
        if self.model is not None:
            settings.model = self.model
        if self.max_model_len:
            settings.max_model_len = self.max_model_len
        return settings


def method_defaults(options: EngineOptions, backend: str) -> MethodDefaults:
    """The `[methods.*]` tables for the model these options run: the named profile's, or, for
    the embedded model on a local backend, the embedded profile's (its small bounds)."""
    if options.profile:
        return MethodDefaults(options.profile, options.settings().methods)
    if options.model is None and backend in LOCAL_PREFERENCE:
        return MethodDefaults(EMBEDDED_PROFILE, load_profile(EMBEDDED_PROFILE).methods)
    return MethodDefaults()


def engine_class(name: str) -> Any:
    """The backend class registered under `name` (``NAME`` or ``NAME:key=value...``, whose
    parameters the backend's `create` reads), imported on first use."""
    name = name.partition(":")[0]
    target = ENGINES.get(name)
    if target is None:
        raise EngineError(f"unknown engine {name!r} (known: {', '.join(ENGINES)})")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def best_local_backend(scoring_only: bool = False) -> str:
    """The first local backend whose packages are installed (vLLM, else transformers + Outlines;
    for methods that only score prompts, transformers first)."""
    for name in reversed(LOCAL_PREFERENCE) if scoring_only else LOCAL_PREFERENCE:
        if engine_class(name).available():
            return name
    raise EngineError(
        "no local engine installed: install the CPU stack (bash scripts/setup_cpu.sh) or "
        "vLLM on a GPU host, or use --engine openai --base-url URL"
    )


def chosen_backend(options: EngineOptions) -> str:
    """The backend these options name, or the default: servers if any are named, else local."""
    return options.engine or (SERVER_BACKEND if options.base_urls else best_local_backend(options.scoring_only))


def build_engine(options: EngineOptions, say: Callable[[str], None] = _say) -> Engine:
    """Build the chosen engine; wrap it in the response cache when `options.cache_dir` is set."""
    chosen = chosen_backend(options)
    cls = engine_class(chosen)
    if ":" in chosen and not cls.takes_params:
        raise EngineError(f"engine {chosen.partition(':')[0]!r} takes no parameters (got {chosen!r})")
    built: Engine = cls.create(options, say=say, named=options.engine is not None)
    built.method_defaults = method_defaults(options, chosen)
    if options.cache_dir:  # the wrapper copies method_defaults from the engine it wraps
        wrapped = CachingEngine(built, CacheFiles(options.cache_dir), cache_identity(chosen, built))
        return wrapped
    return built


def cache_identity(backend: str, engine: Engine) -> str:
    """What must match for a cached answer to be replayed: backend, model identity and every
    answer setting (`localfa.engine.identity.answer_identity`)."""
    return answer_identity(backend, engine)


def make_engine(
    engine: str | None = None,
    model: str | None = None,
    profile: str | None = None,
    base_urls: list[str] | None = None,
    api_key: str | None = None,
    cache_dir: str | None = None,
    max_model_len: int | None = None,
    say: Callable[[str], None] = _say,
    scoring_only: bool = False,
) -> Engine:
    """Build an engine from keyword choices (the Python API's and the CLI's entry point)."""
    options = EngineOptions(engine, model, profile, list(base_urls or []), api_key, cache_dir, max_model_len, scoring_only)
    return build_engine(options, say=say)
