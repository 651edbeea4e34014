"""`localfa serve`: run a vLLM server for sweeps, from a profile, on loopback by default.

Off loopback the server needs an API key (`--api-key` or `LOCALFA_API_KEY`; the environment
variable keeps it out of `ps` as well) or an explicit `--insecure`. The key reaches vLLM through
its environment, never its argv, and `--print-command` masks it. SIGTERM and SIGHUP stop the
server as Ctrl-C does; if localfa itself dies, the server gets SIGTERM from the kernel (Linux).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from localfa.cli.errors import fail

KEY_ENV = "LOCALFA_API_KEY"


def check_exposure(host: str, api_key: str | None, insecure: bool) -> None:
    """Refuse a non-loopback bind without a key (exit 2); with `--insecure`, warn and go on."""
    from localfa.serving.launch import is_loopback

    if api_key or is_loopback(host):
        return
    if not insecure:
        fail(
            host,
            f"binding to a non-loopback address exposes the model to the network: give an API key "
            f"({KEY_ENV}=... or --api-key), or --insecure to serve without one",
        )
    typer.echo(f"warning: serving on {host} WITHOUT an API key (--insecure): anyone who can reach this port can use the model", err=True)


def serve(
    ctx: typer.Context,
    profile: Annotated[str, typer.Option("--profile", help="Profile name in serving/profiles or a TOML path")] = "cpu-embedded",
    model: Annotated[Optional[str], typer.Option("--model", help="Override the profile's model folder")] = None,
    host: Annotated[str, typer.Option("--host", help="Bind address (loopback unless you mean it)")] = "127.0.0.1",
    port: Annotated[Optional[int], typer.Option("--port", help="Port (default: a free one)")] = None,
    api_key: Annotated[
        Optional[str],
        typer.Option(
            "--api-key",
            envvar=KEY_ENV,
            show_envvar=True,
            help=f"Require this key (prefer the {KEY_ENV} variable: an option is visible in ps)",
        ),
    ] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Allow a non-loopback bind without an API key")] = False,
    log: Annotated[Optional[Path], typer.Option("--log", help="Server log file")] = None,
    print_command: Annotated[bool, typer.Option("--print-command", help="Print the vllm command and exit")] = False,
) -> None:
    """Start `vllm serve` from a profile, wait until healthy, print the URL, serve until stopped."""
    from localfa.engine.errors import EngineError
    from localfa.engine.model import resolve_model
    from localfa.engine.settings import load_profile
    from localfa.serving.launch import (
        StopRequested,
        free_port,
        is_cpu_platform,
        server_command,
        shown_command,
        start_server,
        stop_on_signals,
        stop_server,
        wait_exit,
    )

    check_exposure(host, api_key, insecure)
    try:  # said now, in one line, not by vLLM after a minute of loading
        port = free_port(host, port or 0)
    except (OSError, UnicodeError) as exc:
        fail(host, f"cannot serve on this address here ({getattr(exc, 'strerror', None) or exc}): give --host an address of this machine")
    source = ctx.get_parameter_source("api_key")
    if api_key and source is not None and source.name == "COMMANDLINE":
        typer.echo(f"localfa: note: --api-key is visible to other users in ps; {KEY_ENV} is not", err=True)
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
        cmd = server_command(settings, model_dir, host, port, is_cpu_platform())
        typer.echo(shown_command(cmd, api_key))
        return
    typer.echo(f"localfa: starting vllm serve ({profile}, model {model_dir}) on {host}...", err=True)
    with stop_on_signals():
        try:
            proc, url = start_server(settings, model_dir, host, port, api_key, log)
        except (RuntimeError, TimeoutError) as exc:
            fail(profile, str(exc) + (f" (see {log})" if log else " (rerun with --log FILE)"))
        except (KeyboardInterrupt, StopRequested):
            typer.echo("localfa: stopped before the server was healthy", err=True)
            return
        exited_alone = False
        try:  # from here on a stop signal always reaches the `finally` below
            typer.echo(url, err=False)
            typer.echo(f"localfa: healthy; use --engine openai --base-url {url}   (Ctrl-C or SIGTERM stops it)", err=True)
            wait_exit(proc)  # not reaped yet: stop_server still reaches the workers it left
            exited_alone = True
            stop_server(proc)
            typer.echo(f"localfa: vllm serve exited with status {proc.returncode}", err=True)
        except (KeyboardInterrupt, StopRequested):
            typer.echo("localfa: stopping vllm serve...", err=True)
        finally:
            stop_server(proc)
    if proc.returncode and (proc.returncode > 0 or exited_alone):  # a crash or a kill we did not ask for
        raise SystemExit(1)
