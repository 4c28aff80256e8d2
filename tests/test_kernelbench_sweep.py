"""benchmarks/kernelbench_sweep.py on a two-task KernelBench-shaped folder, on the CPU: the table
is written while the sweep runs (a call cut by its own timeout still leaves it), and a rerun is
served what is stored."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


batch_size = 8
dim = {dim}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [2.0]
"""


@pytest.fixture
def sweep_module(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    return importlib.import_module("kernelbench_sweep")


def test_a_sweep_writes_its_table_as_it_goes_and_a_rerun_is_served(tmp_path, monkeypatch, sweep_module):
    kb = tmp_path / "kb"
    (kb / "level1").mkdir(parents=True)
    (kb / "level1" / "1_Relu_Scale.py").write_text(TASK.format(dim=32))
    (kb / "level1" / "2_Relu_Scale_Wide.py").write_text(TASK.format(dim=96))
    (kb / sweep_module.COMMIT_FILE).write_text(sweep_module.PINNED_COMMIT + "\n")
    out, db = tmp_path / "out", tmp_path / "store" / "kb.sqlite"
    db.parent.mkdir()
    written: list[int] = []
    real_write = sweep_module._write

    def spy(out_, tag, rows, tasks, wall):
        real_write(out_, tag, rows, tasks, wall)
        written.append(len(json.loads((out_ / f"kernelbench-sweep-{tag}.json").read_text())["rows"]))

    monkeypatch.setattr(sweep_module, "_write", spy)
    argv = ["kernelbench_sweep.py", str(kb), "--levels", "1", "--device", "cpu", "--per-device", "1"]
    argv += ["--db", str(db), "--out", str(out), "--timeout", "120"]
    monkeypatch.setattr(sys, "argv", argv)

    assert sweep_module.main() == 0
    assert written[:2] == [1, 2]  # after each verdict, not only at the end
    doc = json.loads((out / "kernelbench-sweep-level1.json").read_text())
    assert [r["outcome"] for r in doc["rows"]] == ["pass", "pass"] and doc["tasks"] == 2
    assert not any(r["stored"] for r in doc["rows"])
    assert "level1/2_Relu_Scale_Wide.py | pass" in (out / "kernelbench-sweep-level1.md").read_text()

    assert sweep_module.main() == 0  # resumed: every verdict served from the store
    doc = json.loads((out / "kernelbench-sweep-level1.json").read_text())
    assert [r["stored"] for r in doc["rows"]] == [True, True]
