"""Arguments that used to end in a traceback or be taken as given (issue 55, case 12): a seed range
of 10**8 (MemoryError), a temperature of NaN or -5, `serve --host ::1` (an IPv4 socket asked to
bind an IPv6 address). Each is one `error:` line and exit status 2, or, for ::1 on a machine with
IPv6, the command it would run."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from localfa.cli import main
from localfa.engine.types import Sampling
from tests.insights.sample import write_sample

LOCALFA = [sys.executable, "-m", "localfa"]


def test_a_huge_seed_range_is_refused_before_it_is_expanded(tmp_path, capsys):
    write_sample(tmp_path / "data", 1)
    rc = main(
        [
            "bench",
            str(tmp_path / "data"),
            "--engine",
            "scripted",
            "--methods",
            "random",
            "--seeds",
            "0-100000000",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert rc == 2 and "at most 10,000 seeds" in capsys.readouterr().err


@pytest.mark.parametrize(
    "spec", ["all-at-once:temperature=nan", "all-at-once:temperature=-5", "safari:top_p=inf", "drift:check_temperature=-1"]
)
def test_a_temperature_no_engine_can_honour_is_refused(tmp_path, capsys, spec):
    write_sample(tmp_path / "data", 1)
    assert main(["diagnose", str(tmp_path / "data" / "1.json"), "--engine", "scripted", "--quiet", "--method", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --method:") and err.count("\n") == 1


def test_sampling_refuses_what_no_engine_can_honour():
    for bad in ({"temperature": float("nan")}, {"temperature": -5.0}, {"top_p": 0.0}, {"top_p": float("inf")}):
        with pytest.raises(ValueError):
            Sampling(**bad)


def test_serve_on_ipv6_loopback_runs_or_says_why_in_one_line():
    p = subprocess.run([*LOCALFA, "serve", "--host", "::1", "--print-command"], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr and "gaierror" not in p.stderr, p.stderr
    if socket.has_ipv6 and p.returncode == 0:
        assert "--host ::1" in p.stdout
    else:
        assert p.returncode == 2 and p.stderr.startswith("error: ::1: cannot serve on this address here")


def test_serve_on_an_address_not_of_this_machine_says_why_in_one_line(monkeypatch, capsys):
    assert main(["serve", "--host", "192.0.2.1", "--insecure", "--print-command"]) == 2  # TEST-NET-1: nobody's address
    assert "cannot serve on this address here" in capsys.readouterr().err

    def no_ipv6(*args, **kwargs):
        raise socket.gaierror(socket.EAI_FAMILY, "Address family for hostname not supported")

    monkeypatch.setattr(socket, "getaddrinfo", no_ipv6)
    assert main(["serve", "--host", "::1", "--print-command"]) == 2
    assert "error: ::1: cannot serve on this address here (Address family" in capsys.readouterr().err
