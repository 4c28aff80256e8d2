"""The KernelBench sweep's --help fits 80 columns and says what every option does, as every verb's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_sweeps_help_fits_80_columns_and_every_option_has_a_help_text():
    ran = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kernelbench_sweep.py"), "--help"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
    )
    assert ran.returncode == 0, ran.stderr
    assert max(len(line) for line in ran.stdout.splitlines()) <= 80, ran.stdout
    options = ran.stdout.split("\noptions:\n", 1)[1]
    # an option line whose help is missing ends with its metavar, with no words after it or below it
    entries = re.split(r"\n(?=  -)", options.strip("\n"))
    for entry in entries:
        head, *rest = entry.splitlines()
        words = re.sub(r"^\s*(-[-\w]+( [A-Z_{},]+)?(, )?)+", "", head).strip()
        assert words or rest, f"no help for {head.strip()}"
