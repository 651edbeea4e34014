"""Engine settings and serving profiles (TOML under serving/profiles/)."""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any


@dataclass
class EngineSettings:
    """What a vLLM engine (in-process or `vllm serve`) is started with."""

    model: str | None = None  # local folder; None = the embedded model
    dtype: str = "auto"
    max_model_len: int = 8192
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_prefix_caching: bool = True
    structured_outputs_backend: str = "guidance"
    enforce_eager: bool | None = None  # None: eager on CPU (compiling costs ~80 s a start), graphs on GPU
    cpu_kv_cache_gib: int = 2
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    async_scheduling: bool | None = None  # None: on for CPU (overlaps grammar masks with the model), vLLM's default on GPU
    enable_chunked_prefill: bool | None = None  # None: off on CPU (seeded split prefills crash there), on for GPU
    seed: int = 0
    # Chat templates that think by default (Qwen3 and similar) get thinking switched off through
    # the template's own switch; a profile may turn it on.
    enable_thinking: bool = False
    # A model that thinks (Qwen3 and the like): vLLM's reasoning parser for it (e.g. "qwen3"). With
    # one, vLLM applies a request's grammar only after the thinking section ends (structured
    # outputs' `enable_in_reasoning` stays off), so the model reasons freely, then answers in the
    # grammar. `thinking_tokens`: each request's thinking budget in tokens (vLLM's
    # `thinking_token_budget`, which forces the end of thinking when it runs out); it is added to
    # the request's own `max_tokens` and kept out of the window the methods fit their prompts in.
    reasoning_parser: str = ""
    thinking_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # `[methods.NAME]` tables: option values sized for this profile's model (see MethodDefaults).
    methods: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def thinking_budget(self) -> int:
        """Each request's thinking budget in tokens: `thinking_tokens`, where a reasoning parser is set."""
        return max(0, int(self.thinking_tokens)) if self.reasoning_parser else 0


# The profile whose `[methods.*]` tables apply to the embedded model when no profile is named.
EMBEDDED_PROFILE = "cpu-embedded"


@dataclass(frozen=True)
class MethodDefaults:
    """Method option values a profile sets for its model.

    Method defaults are sized for a strong model (8B-70B, 32k+ window); a tiny model needs smaller
    bounds, and those belong to the model's profile, not to the method. Options resolve as: the
    method's default < this profile's table < what the user's spec says.
    """

    profile: str | None = None
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_method(self, name: str) -> dict[str, Any]:
        return dict(self.tables.get(name, {}))


def profile_dir() -> Path:
    return Path(str(resources.files("localfa.serving.profiles")))


def list_profiles() -> list[str]:
    return sorted(p.stem for p in profile_dir().glob("*.toml"))


def load_profile(name_or_path: str) -> EngineSettings:
    """Settings from a profile name (serving/profiles/NAME.toml) or a TOML file path."""
    path = Path(name_or_path)
    if not path.is_file():
        path = profile_dir() / f"{name_or_path}.toml"
    if not path.is_file():
        raise FileNotFoundError(f"{name_or_path}: no such profile (known: {', '.join(list_profiles())})")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from exc
    engine = data.get("engine", data)
    known = {f.name for f in fields(EngineSettings)} - {"methods"}
    unknown = sorted(set(engine) - known - {"engine", "methods"})
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    methods = data.get("methods", {})
    if not isinstance(methods, dict) or not all(isinstance(v, dict) for v in methods.values()):
        raise ValueError(f"{path}: [methods] must hold one table per method, e.g. [methods.falat]")
    return EngineSettings(**{k: v for k, v in engine.items() if k in known}, methods=methods)
