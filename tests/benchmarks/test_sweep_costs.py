"""benchmarks/sweep_costs.py scales its scratch tasks with the package's own function
(kernelproof.report.scaled_tasks.scaled_source), the one ``--sizes`` uses: no copy of its own."""

from __future__ import annotations

import importlib
from pathlib import Path

from kernelproof.report.scaled_tasks import scaled_source

REPO = Path(__file__).resolve().parents[2]

TASK = """import torch

N = 1 << 12
M = 4096 * 2
K = 3


class Model(torch.nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.rand(M)]


def get_init_inputs():
    return []
"""


def test_the_scratch_tasks_are_the_packages_scaled_sources(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    sweep_costs = importlib.import_module("sweep_costs")
    assert not hasattr(sweep_costs, "shrunk")  # the benchmark keeps no copy of the scaling
    kb = tmp_path / "kb"
    (kb / "level1").mkdir(parents=True)
    (kb / "level1" / "1_Identity.py").write_text(TASK)
    pairs = sweep_costs.scratch_pairs(kb, ["level1"], 16, 0, [], tmp_path / "scratch")
    assert len(pairs) == 1
    task, solution = pairs[0]
    expected = scaled_source(TASK, 16)
    assert task.read_text() == expected
    assert "M = 512" in expected and "N = 1 << 12" in expected  # only integer-literal arithmetic is scaled
    assert solution.read_text().startswith(expected) and "class ModelNew(Model)" in solution.read_text()
