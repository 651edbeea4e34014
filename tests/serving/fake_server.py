"""A stand-in for `vllm serve` (answers /health, keeps a worker child) and a driver that runs the
real `localfa serve` command against it, so process-tree handling is tested in seconds.

    python -m tests.serving.fake_server server PORT     # the fake server (used by the driver)
    python -m tests.serving.fake_server serve ARGS...   # `localfa serve ARGS` with the fake server
"""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def fake_server(port: int) -> None:
    """Serve /health and keep a worker process, as vLLM keeps its engine core."""
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])

    def stop(signum: int, _frame: object) -> None:  # vLLM, too, stops its workers on SIGTERM
        worker.terminate()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        http.server.HTTPServer(("127.0.0.1", port), _Health).serve_forever()
    finally:
        worker.terminate()


def drive(args: list[str]) -> int:
    """Run `localfa serve ARGS` with the fake server in place of vLLM."""
    from localfa.cli import main
    from localfa.serving import launch

    def command(settings, model_dir, host, port, is_cpu):  # noqa: ANN001 - server_command's signature
        return [sys.executable, "-m", "tests.serving.fake_server", "server", str(port)]

    launch.server_command = command
    launch.is_cpu_platform = lambda: True
    return main(["serve", *args])


if __name__ == "__main__":
    if sys.argv[1] == "server":
        fake_server(int(sys.argv[2]))
    else:
        raise SystemExit(drive(sys.argv[2:]))
