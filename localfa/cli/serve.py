"""`localfa serve`: run a vLLM server for sweeps, from a profile, on loopback by default."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from localfa.cli.errors import fail



def serve(
    profile: Annotated[str, typer.Option("--profile", help="Profile name in serving/profiles or a TOML path")] = "cpu-embedded",
    model: Annotated[Optional[str], typer.Option("--model", help="Override the profile's model folder")] = None,
    host: Annotated[str, typer.Option("--host", help="Bind address (loopback unless you mean it)")] = "127.0.0.1",
    port: Annotated[Optional[int], typer.Option("--port", help="Port (default: a free one)")] = None,
    api_key: Annotated[Optional[str], typer.Option("--api-key", envvar="LOCALFA_API_KEY", help="Require this key")] = None,
    log: Annotated[Optional[Path], typer.Option("--log", help="Server log file")] = None,
    print_command: Annotated[bool, typer.Option("--print-command", help="Print the vllm command and exit")] = False,
) -> None:
    """Start `vllm serve` from a profile, wait until healthy, print the URL, serve until Ctrl-C."""
    from localfa.engine.errors import EngineError
    from localfa.engine.model import resolve_model
    from localfa.engine.settings import load_profile
    from localfa.serving.launch import free_port, is_cpu_platform, server_command, start_server, stop_server

    try:
        settings = load_profile(profile)
    except (FileNotFoundError, ValueError) as exc:
        fail(profile, str(exc))
    if model:
        settings.model = model
    try:
        model_dir = resolve_model(settings.model)
    except EngineError as exc:
        fail(settings.model or "model", str(exc))
    if print_command:
        typer.echo(" ".join(server_command(settings, model_dir, host, port or free_port(host), is_cpu_platform(), api_key)))
        return
    typer.echo(f"localfa: starting vllm serve ({profile}, model {model_dir}) on {host}...", err=True)
    try:
        proc, url = start_server(settings, model_dir, host, port, api_key, log)
    except (RuntimeError, TimeoutError) as exc:
        fail(profile, str(exc) + (f" (see {log})" if log else " (rerun with --log FILE)"))
    typer.echo(url, err=False)
    typer.echo(f"localfa: healthy; use --engine openai --base-url {url}   (Ctrl-C stops it)", err=True)
    try:
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop_server(proc)
