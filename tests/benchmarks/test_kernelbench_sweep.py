"""benchmarks/kernelbench_sweep.py on a two-task KernelBench-shaped folder, on the CPU: the table
is written while the sweep runs (a call cut by its own timeout still leaves it), and a rerun is
served what is stored."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

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


def test_a_sweep_writes_its_table_as_it_goes_and_a_rerun_is_served(
    tmp_path, monkeypatch, sweep_module, capsys
):
    kb = tmp_path / "kb"
    (kb / "level1").mkdir(parents=True)
    (kb / "level1" / "1_Relu_Scale.py").write_text(TASK.format(dim=32))
    (kb / "level1" / "2_Relu_Scale_Wide.py").write_text(TASK.format(dim=96))
    (kb / sweep_module.COMMIT_FILE).write_text(sweep_module.PINNED_COMMIT + "\n")
    out, db = tmp_path / "out", tmp_path / "store" / "kb.sqlite"
    db.parent.mkdir()
    written: list[int] = []
    real_write = sweep_module._write

    def spy(out_, tag, rows, tasks, wall, arrivals, order_s=0.0):
        real_write(out_, tag, rows, tasks, wall, arrivals, order_s)
        written.append(len(json.loads((out_ / f"kernelbench-sweep-{tag}.json").read_text())["rows"]))

    monkeypatch.setattr(sweep_module, "_write", spy)
    argv = ["kernelbench_sweep.py", str(kb), "--levels", "1", "--device", "cpu", "--per-device", "1"]
    argv += ["--db", str(db), "--out", str(out), "--timeout", "120"]
    monkeypatch.setattr(sys, "argv", argv)

    assert sweep_module.main() == 0
    assert "listed and ordered 2 tasks in" in capsys.readouterr().out
    assert written[:2] == [1, 2]  # after each verdict, not only at the end
    doc = json.loads((out / "kernelbench-sweep-level1.json").read_text())
    assert [r["outcome"] for r in doc["rows"]] == ["pass", "pass"] and doc["tasks"] == 2
    assert not any(r["stored"] for r in doc["rows"])
    arrived = [r["arrived_s"] for r in doc["rows"]]
    assert arrived == sorted(arrived) and 0 <= arrived[0] <= doc["wall_s"] + 0.1
    assert doc["order_s"] >= 0  # listing and ordering, before the first evaluation's clock starts
    assert "level1/2_Relu_Scale_Wide.py | pass" in (out / "kernelbench-sweep-level1.md").read_text()
    costs = json.loads((out / "kernelbench-sweep-costs-level1.json").read_text())
    assert costs["levels"]["level1"]["tasks"] == 2 and costs["evaluated"] == 2
    assert {r["task"] for r in costs["slowest"]} == {"level1/1_Relu_Scale.py", "level1/2_Relu_Scale_Wide.py"}
    for shown in costs["slowest"]:  # setup's sub-steps and the worker side, each a step of the verdict
        for step in ("setup/audit/reference", "setup/audit/oracle", "setup/footprint", "worker_start"):
            assert shown["steps"][step]["s"] >= 0 and shown["steps"][step]["n"] >= 1, step
        cases = shown["steps"]["correctness/case_worker"]["n"]
        assert cases >= 1 and shown["steps"]["correctness/case_compare"]["n"] == cases
    assert costs["median"]["task"] in {r["task"] for r in costs["slowest"]}
    md = (out / "kernelbench-sweep-costs-level1.md").read_text()
    assert "| level1 | 2 | 0 |" in md and "(median)" in md and "setup/audit" in md

    assert sweep_module.main() == 0  # resumed: every verdict served from the store
    doc = json.loads((out / "kernelbench-sweep-level1.json").read_text())
    assert [r["stored"] for r in doc["rows"]] == [True, True]
    costs = json.loads((out / "kernelbench-sweep-costs-level1.json").read_text())
    assert costs["evaluated"] == 0 and costs["levels"]["level1"]["served"] == 2  # not ranked as costs


def _row(task: str, seconds: float, stored: bool = False, **steps: float) -> dict:
    return {
        "task": task,
        "seconds": seconds,
        "stored": stored,
        "steps": {k: {"s": v, "n": 1} for k, v in steps.items()},
    }


def test_the_cost_table_ranks_evaluated_tasks_and_times_each_level(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    costs = importlib.import_module("_costs")
    rows = [_row(f"level1/{i}_T.py", float(i), setup=i * 0.75, correctness=i * 0.25) for i in range(1, 16)]
    rows += [_row("level2/1_Served.py", 99.0, stored=True), _row("level2/2_X.py", 3.0, setup=1.0)]
    arrivals = {r["task"]: 1.0 + k for k, r in enumerate(rows)}
    doc = costs.cost_table(rows, 20.0, arrivals)
    assert [r["task"] for r in doc["slowest"]][:2] == ["level1/15_T.py", "level1/14_T.py"]
    assert len(doc["slowest"]) == costs.SLOWEST and doc["evaluated"] == 16  # the served one is not ranked
    assert doc["median"]["task"] == "level1/7_T.py"  # the lower median of 1..15 s and 3 s
    assert doc["levels"]["level1"] == {
        "tasks": 15,
        "served": 0,
        "in_flight_s": 15.0,  # the spans [k + 1 - i, k + 1] all start at 0: the longest, 15 s
        "evaluation_s": 120.0,
        "median_s": 8.0,
    }
    # the served row has no span in this run; 2_X ran from 14 s to its verdict at 17 s
    assert doc["levels"]["level2"]["in_flight_s"] == 3.0 and doc["levels"]["level2"]["served"] == 1
    assert list(doc["steps_total_s"]) == ["setup", "correctness"] and doc["steps_total_s"]["setup"] == 91.0
    md = costs.markdown(doc)
    assert "| level1/7_T.py (median) | 7.0 | 5.25 | 1.75 |" in md
    # every level-1 row's steps cover its seconds; 2_X's 3 s have 1 s of setup: 2 s in no step
    assert doc["in_no_step_s"] == 2.0 and "| (in no step) | 2.0 |" in md


def test_seconds_in_no_step_count_only_the_outermost_steps(monkeypatch):
    """A nested step is part of its parent's seconds: counting it again would hide a gap."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    costs = importlib.import_module("_costs")
    rows = [_row("level1/a.py", 10.0, setup=4.0, **{"setup/audit": 3.0, "timing": 2.0})]
    assert costs.cost_table(rows, 10.0, {"level1/a.py": 10.0})["in_no_step_s"] == 4.0


def test_a_level_under_way_counts_its_evaluations_overlapping_spans_once(monkeypatch):
    """Interleaved levels: each level's seconds under way is the union of its evaluations' spans."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    costs = importlib.import_module("_costs")
    rows = [
        _row("level1/a.py", 10.0),
        _row("level2/b.py", 2.0),
        _row("level1/c.py", 4.0),
        _row("level2/d.py", 3.0),
    ]
    arrivals = {"level1/a.py": 10.0, "level2/b.py": 4.0, "level1/c.py": 20.0, "level2/d.py": 5.0}
    doc = costs.cost_table(rows, 20.0, arrivals)
    assert doc["levels"]["level1"]["in_flight_s"] == 14.0  # [0, 10] and [16, 20]
    assert doc["levels"]["level2"]["in_flight_s"] == 3.0  # [2, 4] and [2, 5] overlap
    assert costs._union([(0.0, 1.0), (0.5, 2.0), (3.0, 4.0)]) == 3.0 and costs._union([]) == 0.0


def test_large_tasks_are_spread_among_the_small_ones_largest_first(monkeypatch, sweep_module):
    """Level 1's large tasks sit next to each other; in that order every slot waits behind them."""
    assert sweep_module.interleave(["L1", "L2"], list("abcde")) == ["L1", "a", "b", "c", "L2", "d", "e"]
    assert sweep_module.interleave([], ["a"]) == ["a"]
    assert sweep_module.interleave(["L1", "L2", "L3"], ["a"]) == ["L1", "a", "L2", "L3"]

    pairs = [(Path(f"level1/{n}.py"), Path(f"sol/{n}.py")) for n in ("1", "2", "3", "4", "5", "6")]
    sizes = {"1": 10, "2": 90, "3": 10, "4": 120, "5": 60, "6": 10}  # GB
    monkeypatch.setattr(sweep_module, "_admitted_bytes", lambda device: 138e9)
    monkeypatch.setattr(sweep_module, "_sizes", lambda tasks: {t: sizes[t.stem] * 10**9 for t in tasks})
    order = [t.stem for t, _ in sweep_module.spread_large(pairs, "cuda", 4)]
    # more than 138/4 = 34.5 GB: 4 (120), 2 (90), 5 (60), largest first, each followed by small ones
    assert order == ["4", "1", "2", "3", "5", "6"]
    assert sorted(order) == sorted(t.stem for t, _ in pairs)  # the same tasks, only reordered
    assert [t.stem for t, _ in sweep_module.spread_large(pairs, "cuda", 1)] == [str(n) for n in range(1, 7)]
    monkeypatch.setattr(sweep_module, "_admitted_bytes", lambda device: None)  # the CPU: as listed
    assert [t.stem for t, _ in sweep_module.spread_large(pairs, "cpu", 4)] == [str(n) for n in range(1, 7)]


def test_the_sizes_come_from_the_meta_device_in_other_processes(tmp_path, sweep_module):
    small, wide = tmp_path / "1_small.py", tmp_path / "2_wide.py"
    small.write_text(TASK.format(dim=32))
    wide.write_text(TASK.format(dim=96))
    broken = tmp_path / "3_broken.py"
    broken.write_text("this is not python")
    sizes = sweep_module._sizes([small, wide, broken])
    inp = out = 8 * 32 * 4  # batch 8, fp32; no weights
    assert sizes[small] == (3 * inp + 5 * out) + (3 * inp + 3 * out)
    assert sizes[wide] == 3 * sizes[small] and sizes[broken] == 0
