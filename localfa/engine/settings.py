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
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    known = {f.name for f in fields(EngineSettings)}
    unknown = sorted(set(engine) - known)
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return EngineSettings(**engine)
