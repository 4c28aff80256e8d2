"""benchmarks/fingerprint_cost.py runs on the CPU and its two methods agree (the figures are its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_benchmark_times_both_methods_and_they_agree(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "fingerprint_cost.py"),
            "--device",
            "cpu",
            "--gb",
            "0.08",
            "--repeats",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads((tmp_path / "fingerprint-cost.json").read_text())
    assert [r["what"] for r in doc["rows"]][:3] == [
        "one read of the output (x.sum())",
        "elementwise (the previous method)",
        "fingerprint (kernelproof.inputs)",
    ]
    assert doc["elements"] > 16_000_000  # past one chunk: the chunked path is the one timed
    assert all(r["ms"] > 0 for r in doc["rows"])
    assert doc["relative_difference"] < 1e-9
