"""Engine options shared by every command that talks to a model (diagnose, bench)."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer

from localfa.engine.factory import ENGINES

if TYPE_CHECKING:
    from localfa.engine.factory import EngineOptions
    from localfa.engine.types import Engine

EngineOpt = Annotated[
    Optional[str], typer.Option("--engine", help="Backend: " + ", ".join(ENGINES) + " (default: best installed local backend)")
]
ModelOpt = Annotated[
    Optional[str],
    typer.Option("--model", help="Local Hugging Face model folder (or .gguf file); default: the embedded SmolLM2-135M-Instruct"),
]
ProfileOpt = Annotated[Optional[str], typer.Option("--profile", help="Engine profile name (serving/profiles) or TOML path")]
BaseUrlOpt = Annotated[
    Optional[list[str]], typer.Option("--base-url", help="URL of a running `localfa serve` / `vllm serve` (repeat to spread over several)")
]
ApiKeyOpt = Annotated[Optional[str], typer.Option("--api-key", envvar="LOCALFA_API_KEY", help="API key for --base-url servers")]
CacheDirOpt = Annotated[Optional[str], typer.Option("--cache-dir", help="Response cache folder: a re-run replays answers exactly")]
MaxLenOpt = Annotated[Optional[int], typer.Option("--max-model-len", help="Context window to start the engine with")]


@dataclass
class EngineChoice:
    """The engine flags as given; `build()` turns setup errors into one `error:` line."""

    engine: str | None = None
    model: str | None = None
    profile: str | None = None
    base_urls: list[str] | None = None
    api_key: str | None = field(default=None, repr=False)  # never printed
    cache_dir: str | None = None
    max_model_len: int | None = None
    scoring_only: bool = False  # not a flag: the command sets it from its methods (EngineOptions)

    def options(self) -> "EngineOptions":
        from localfa.engine.factory import EngineOptions

        return EngineOptions(
            self.engine,
            self.model,
            self.profile,
            list(self.base_urls or []),
            self.api_key,
            self.cache_dir,
            self.max_model_len,
            self.scoring_only,
        )

    def build(self) -> "Engine":
        """Build the engine, turning setup errors into one `error:` line and exit status 2."""
        from localfa.cli.errors import fail
        from localfa.engine.errors import EngineError
        from localfa.engine.factory import build_engine

        try:
            return build_engine(self.options())
        except (EngineError, FileNotFoundError, ValueError) as exc:
            fail(self.model or self.profile or self.engine or "engine", str(exc))


# The engine flags, in --help order: (parameter name, annotation); EngineChoice takes them in order.
ENGINE_PARAMS: tuple[tuple[str, Any], ...] = (
    ("engine", EngineOpt),
    ("model", ModelOpt),
    ("profile", ProfileOpt),
    ("base_url", BaseUrlOpt),
    ("api_key", ApiKeyOpt),
    ("cache_dir", CacheDirOpt),
    ("max_model_len", MaxLenOpt),
)


def with_engine_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the ENGINE OPTIONS; it receives them as one `engine_choice: EngineChoice`.

    Every command that talks to a model declares the flags once, here: typer reads the wrapper's
    signature, which is the command's own (minus `engine_choice`) plus the engine flags.
    """
    signature = inspect.signature(command, eval_str=True)  # typer reads a given __signature__ as it is
    own = [p for p in signature.parameters.values() if p.name != "engine_choice"]
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation) for name, annotation in ENGINE_PARAMS
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        choice = EngineChoice(*(kwargs.pop(name) for name, _ in ENGINE_PARAMS))
        return command(*args, engine_choice=choice, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=[*own, *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**{k: v for k, v in command.__annotations__.items() if k != "engine_choice"}, **dict(ENGINE_PARAMS)}
    return wrapper
