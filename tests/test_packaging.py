"""A non-editable install carries prompts, grammars and profiles, and adds only `localfa`."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_wheel_ships_data_under_the_single_top_level_package(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-w", str(tmp_path), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("localfa-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"localfa"}
    for needed in (
        "localfa/prompts/safari/system.j2",
        "localfa/prompts/baselines/all_at_once.j2",
        "localfa/grammars/safari.py",
        "localfa/serving/launch.py",
        "localfa/serving/profiles/cpu-embedded.toml",
        "localfa/cli/diagnose.py",
        "localfa/methods/falat/method.py",
        "localfa/methods/drift/method.py",
    ):
        assert needed in names, needed
    [entry] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert zipfile.ZipFile(wheel).read(entry).decode() == "[console_scripts]\nlocalfa = localfa.cli:main\n"
