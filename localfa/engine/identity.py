"""What identifies an engine's answers: the model's identity and every setting that changes an
answer without changing the weights. The response cache replays an answer only under the same
identity (`localfa.engine.factory.cache_identity`), a server reports these settings at
/localfa/fingerprint (`localfa.serving.launch`), and the run manifest records them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from localfa.limits import Limits


def package_version(dist: str) -> str | None:
    """An installed distribution's version, or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# Generation-config keys that vLLM applies as sampling defaults (a server does, for every field a
# request leaves out): a change changes answers.
SAMPLING_DEFAULT_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "max_new_tokens",
    "do_sample",
)
ANSWER_SETTINGS = (
    "max_model_len",
    "dtype",
    "structured_outputs_backend",
    "vllm_version",
    "chat_template",
    "sampling_defaults",
    "enable_thinking",
    "extra_args",
    "limits",
)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def chat_template_hash(model_dir: str | Path | None) -> str | None:
    """Hash of the model's chat template (chat_template.jinja / .json, else tokenizer_config.json's)."""
    if not model_dir:
        return None
    root = Path(model_dir)
    parts: list[str] = []
    for name in ("chat_template.jinja", "chat_template.json"):
        if (root / name).is_file():
            parts.append((root / name).read_text(encoding="utf-8", errors="replace"))
    template = (_read_json(root / "tokenizer_config.json") or {}).get("chat_template")
    if template is not None:
        parts.append(json.dumps(template, sort_keys=True))
    if not parts:
        return None
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:16]


def sampling_defaults(model_dir: str | Path | None) -> dict[str, Any] | None:
    """The sampling fields of the model's generation_config.json (None when it has none)."""
    if not model_dir:
        return None
    cfg = _read_json(Path(model_dir) / "generation_config.json")
    if cfg is None:
        return None
    return {k: cfg[k] for k in SAMPLING_DEFAULT_KEYS if k in cfg}


def answer_settings(described: dict[str, Any], model_info: dict[str, Any] | None) -> dict[str, Any]:
    """Engine and model settings that change answers without changing the weights.

    Read from the engine's `describe()` (in-process vLLM: ``engine_args``; a server: what it
    reports at /localfa/fingerprint) and from the model folder; a value the backend does not
    have is None. Thinking, a profile's extra engine arguments and the trace limits
    (`localfa.limits`) change answers too.
    """
    args = described.get("engine_args") or {}
    so = args.get("structured_outputs_config") or {}
    info = model_info or {}
    path = info.get("path")
    # A reasoning parser and a thinking budget change answers (where the grammar starts, how long
    # the model thinks); named only where set, so the identity of an engine without them is as before.
    thinking = {k: described[k] for k in ("reasoning_parser", "thinking_tokens") if described.get(k)}
    return {
        **thinking,
        "max_model_len": described.get("max_model_len"),
        "dtype": args.get("dtype", described.get("dtype")),
        "structured_outputs_backend": so.get("backend", described.get("structured_outputs_backend")),
        "vllm_version": described.get("vllm_version"),
        "chat_template": info.get("chat_template") or described.get("chat_template") or chat_template_hash(path),
        "sampling_defaults": info.get("sampling_defaults") or described.get("sampling_defaults") or sampling_defaults(path),
        "enable_thinking": bool((described.get("chat_template_kwargs") or {}).get("enable_thinking", False)),
        "extra_args": described.get("extra_args") or {},
        "limits": asdict(Limits.from_env()),
    }


def answer_identity(backend: str, engine: Any) -> str:
    """What must match for a cached answer to be replayed: the backend, the model's identity
    (content hash, or what a server reports) and every answer setting, hashed."""
    info = engine.model_info or {}
    model = info.get("sha256") or info.get("identity") or info.get("name")
    settings = answer_settings(engine.describe(), info)
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{backend}:{model}:{digest}"
