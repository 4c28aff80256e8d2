"""get_inputs()'s own values ("task" distribution): drawn on the device where they can be, the same
task run as written on the CPU where they cannot."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from kernelproof.errors import TaskError
from kernelproof.task import load_task
from kernelproof.verify import case_plan, fastpath
from kernelproof.verify.case_plan import build_variant, make_inputs

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, idx):
        return x[idx]


def get_inputs():
    {body}


def get_init_inputs():
    return []
"""


def _ctx(tmp_path, body: str):
    path = tmp_path / "task.py"
    path.write_text(TASK.format(body=body))
    return build_variant(load_task(path), "default", torch.device("cpu"), "eval", 3)


def test_on_the_cpu_the_task_draws_as_written_and_the_seed_decides(tmp_path):
    ctx = _ctx(tmp_path, "return [torch.randn(8, 4), torch.randint(0, 8, (3,))]")
    a, b = make_inputs(ctx, "task", 11), make_inputs(ctx, "task", 11)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[0].device.type == "cpu"
    assert not torch.equal(a[0], make_inputs(ctx, "task", 12)[0])


def test_where_the_device_cannot_draw_them_the_task_runs_on_the_cpu(tmp_path, monkeypatch, seeds_tried):
    """A GPU context whose device fails inside get_inputs() (here: no CUDA at all; on a GPU, numpy
    or a CPU-only op) falls back to the task as written, with the same seed's values."""
    ctx = _ctx(tmp_path, "return [torch.randn(8, 4), torch.randint(0, 8, (3,))]")
    want = make_inputs(ctx, "task", 11)
    tried = seeds_tried
    tried.clear()
    gpu = replace(ctx, device=torch.device("cuda")) if not torch.cuda.is_available() else None
    if gpu is None:
        pytest.skip("a CUDA machine draws there: the fallback is for tasks that fail on it")
    got = case_plan._task_inputs(gpu, 11)
    assert len(tried) == 2  # the device first, then the CPU, each seeded afresh
    assert all(torch.equal(x, y) for x, y in zip(got, want))
    monkeypatch.setattr(fastpath, "ENABLED", False)
    tried.clear()
    case_plan._task_inputs(gpu, 11)
    assert len(tried) == 1  # the speed-up off: the CPU only


def test_a_get_inputs_that_returns_no_list_is_a_task_error_on_every_path(tmp_path):
    ctx = _ctx(tmp_path, "return 3")
    with pytest.raises(TaskError):
        make_inputs(ctx, "task", 1)
    broken = _ctx(tmp_path, "raise ValueError('bad shape')")
    with pytest.raises(TaskError, match="bad shape"):
        make_inputs(broken, "task", 1)


@pytest.mark.gpu
def test_on_a_gpu_the_task_draws_there_and_the_seed_decides(tmp_path):
    ctx = _ctx(tmp_path, "return [torch.randn(8, 4), torch.randint(0, 8, (3,))]")
    gpu = replace(ctx, device=torch.device("cuda"))
    a, b = case_plan._task_inputs(gpu, 11), case_plan._task_inputs(gpu, 11)
    # drawn there, handed back on the CPU as get_inputs() always gave them
    assert a[0].device.type == "cpu" and torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    numpy_task = _ctx(
        tmp_path,
        "import numpy as np; return [torch.from_numpy(np.ones((8, 4), np.float32)), torch.tensor([1])]",
    )
    got = case_plan._task_inputs(replace(numpy_task, device=torch.device("cuda")), 11)
    assert got[0].shape == (8, 4)  # built on the CPU by numpy: taken as it comes


@pytest.mark.gpu
def test_on_a_gpu_setups_draws_stay_there_with_the_same_values(tmp_path):
    """Setup's probe and the audit keep get_inputs()'s tensors on the device (no copy to the host
    and back for every reference run); the values are the seed's, as on the host; the fixed
    tensors the context keeps for the whole evaluation stay on the host."""
    ctx = _ctx(tmp_path, "return [torch.randn(8, 4), torch.randint(0, 8, (3,))]")
    gpu = replace(ctx, device=torch.device("cuda"))
    kept = make_inputs(gpu, "task", 11, on_device=True)
    back = make_inputs(gpu, "task", 11)
    assert [t.device.type for t in kept] == ["cuda", "cuda"]
    assert [t.device.type for t in back] == ["cpu", "cpu"]
    assert all(torch.equal(k.cpu(), b) for k, b in zip(kept, back))
    assert all(t.device.type == "cpu" for t in gpu.fixed.values()) and gpu.fixed


def test_every_draw_of_get_inputs_is_kept_on_the_device(monkeypatch):
    """The probe, the audit and correctness's cases ask for device-resident draws: a case drawn
    from a seed lives on the device too, and the reservation counts the case's inputs there
    (kernelproof/verify/footprint.py, parent_share); the copy to the host and up again cost
    3.6-4.2 s a 6.4 GB tensor on an H200."""
    from pathlib import Path

    from kernelproof import api
    from kernelproof.options import EvalOptions

    asked: list[bool] = []
    real = case_plan._task_inputs

    def spy(ctx, seed, on_device=False):
        import inspect

        caller = inspect.stack()[3].function  # _task_inputs <- _make_inputs <- make_inputs <- caller
        asked.append((caller, on_device))
        return real(ctx, seed, on_device)

    monkeypatch.setattr(case_plan, "_task_inputs", spy)
    from kernelproof.verify import audit

    monkeypatch.setattr(audit, "_CACHE", {})  # the audit runs here, not served from an earlier test's
    data = Path(__file__).resolve().parents[1] / "data"
    v = api.evaluate(
        str(data / "tasks" / "scale_relu.py"),
        str(data / "solutions" / "plain_torch.py"),
        EvalOptions(device="cpu", db="", correctness_only=True, seeds_per_case=1, shape_variants="task"),
    )
    assert v.passed, v.reasons
    by_caller = {}
    for caller, on_device in asked:
        by_caller.setdefault(caller, set()).add(on_device)
    # setup's probe, the audit's draws, and correctness's cases (kernelproof/evaluate/correctness.py)
    assert by_caller == {"_build_models": {True}, "_audit_distribution": {True}, "_finite_case": {True}}, (
        by_caller
    )
