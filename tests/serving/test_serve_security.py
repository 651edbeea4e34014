"""`localfa serve` off loopback: a key or an explicit --insecure; the key travels in the server's
environment, never its argv; --print-command masks it; clients read LOCALFA_API_KEY."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from localfa.engine.errors import EngineUnavailableError
from localfa.engine.settings import load_profile
from localfa.serving.launch import API_KEY_ENV, is_loopback, server_command, server_env, shown_command

REPO = Path(__file__).resolve().parents[2]
KEY = "k-3f9a1c7e-not-a-real-secret"


def localfa_process(*args: str) -> subprocess.CompletedProcess:
    """The real entry point in a fresh process (exit status as a shell sees it), no key around."""
    env = {k: v for k, v in os.environ.items() if k != "LOCALFA_API_KEY"}
    return subprocess.run([sys.executable, "-m", "localfa", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def localfa(monkeypatch):
    """`localfa ARGS` in-process (vLLM's platform probe stubbed: it takes ~20 s to import here)."""
    from typer.testing import CliRunner

    from localfa.cli import build_app
    from localfa.serving import launch

    monkeypatch.setattr(launch, "is_cpu_platform", lambda: True)
    monkeypatch.delenv("LOCALFA_API_KEY", raising=False)
    runner = CliRunner()
    app = build_app()

    def run(*args: str, env: dict[str, str] | None = None):
        return runner.invoke(app, list(args), env=env)

    return run


@pytest.mark.parametrize(
    "host,expected",
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.1.2.3", False),
        ("192.168.0.7", False),
        ("no-such-host.invalid", False),
    ],
)
def test_loopback_is_judged_by_address(host, expected):
    assert is_loopback(host) is expected


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3"])
def test_non_loopback_without_a_key_is_refused_print_command_included(host):
    for extra in ([], ["--print-command"]):
        out = localfa_process("serve", "--host", host, *extra)
        assert out.returncode == 2, out
        assert "non-loopback" in out.stderr and "--insecure" in out.stderr
        assert "api_server" not in out.stdout  # nothing was printed, nothing was started


def test_insecure_warns_and_goes_on(localfa):
    out = localfa("serve", "--host", "0.0.0.0", "--insecure", "--print-command")
    assert out.exit_code == 0, out.output
    assert "WITHOUT an API key" in out.stderr
    assert "--host 0.0.0.0" in out.stdout and API_KEY_ENV not in out.stdout


def test_print_command_masks_the_key_from_the_environment_or_the_option(localfa):
    for args, env in ((["--host", "0.0.0.0"], {"LOCALFA_API_KEY": KEY}), (["--host", "0.0.0.0", "--api-key", KEY], {})):
        out = localfa("serve", *args, "--print-command", env=env)
        assert out.exit_code == 0, out.output
        assert KEY not in out.output
        assert out.stdout.startswith(f"{API_KEY_ENV}=*** ")
        assert "--api-key" not in out.stdout
    assert "visible to other users" in out.stderr  # the option form gets a note


def test_the_key_goes_to_the_environment_never_the_argv(embedded_model_dir):
    settings = load_profile("cpu-embedded")
    cmd = server_command(settings, embedded_model_dir, "0.0.0.0", 8000, True)
    assert KEY not in " ".join(cmd) and "--api-key" not in cmd
    env = server_env(settings, KEY)
    assert env[API_KEY_ENV] == KEY and "LOCALFA_API_KEY" not in env
    assert shown_command(cmd, KEY).split()[0] == f"{API_KEY_ENV}=***"
    assert shown_command(cmd, None).split()[0] == sys.executable


class _KeyedModels(http.server.BaseHTTPRequestHandler):
    """/v1/models for the right bearer key only, as vLLM's middleware does."""

    def do_GET(self) -> None:  # noqa: N802
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"data": [{"id": "fake", "root": "fake", "max_model_len": 2048}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def keyed_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeyedModels)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_openai_backend_reads_the_key_from_localfa_api_key(keyed_server, monkeypatch):
    from localfa.engine.factory import make_engine

    monkeypatch.delenv("LOCALFA_API_KEY", raising=False)
    with pytest.raises(EngineUnavailableError, match="401"):
        make_engine("openai", base_urls=[keyed_server])
    monkeypatch.setenv("LOCALFA_API_KEY", KEY)
    engine = make_engine("openai", base_urls=[keyed_server])
    assert engine.model == "fake"
    engine.close()
    with pytest.raises(EngineUnavailableError, match="401"):  # an explicit --api-key wins over the variable
        make_engine("openai", base_urls=[keyed_server], api_key="wrong")
