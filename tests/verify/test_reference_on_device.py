"""The task's Model built with the device as torch's default: its parameters initialised there,
the same task built as written on the CPU where that fails.

A Linear of 32768 x 32768 (KernelBench level 2, 55_-59_) took 8-14 s of the CPU's generator each
time the reference or the audit's other-weights model was built, holding the seeding lock every
evaluation's draws wait for.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from kernelproof.errors import TaskError
from kernelproof.task import load_task
from kernelproof.verify import audit, case_plan, fastpath
from kernelproof.verify.case_plan import build_reference, build_variant

TASK = textwrap.dedent(
    """
    import numpy as np
    import torch
    import torch.nn as nn

    SEEN = []


    class Model(nn.Module):
        def __init__(self, n, how):
            super().__init__()
            SEEN.append(torch.get_default_device().type)
            if how == "numpy":  # works as written; with a GPU default, arange lands there and .numpy() fails
                self.register_buffer("shift", torch.from_numpy(torch.arange(n, dtype=torch.float32).numpy().copy()))
            if how == "cpu_generator":
                g = torch.Generator().manual_seed(1)
                self.register_buffer("shift", torch.randn(n, generator=g))
            if how == "broken":
                raise ValueError("bad init")
            self.fc = nn.Linear(n, n)

        def forward(self, x):
            return self.fc(x)


    def get_inputs():
        return [torch.randn(4, 16)]


    def get_init_inputs():
        return [16, HOW]
    """
)


def _task(tmp_path, how: str):
    path = tmp_path / f"task_{how}.py"
    path.write_text(TASK.replace("HOW", repr(how)))
    return load_task(str(path))


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().cpu() for p in model.parameters()]


def test_on_the_cpu_the_model_is_built_as_written_and_the_seed_decides(tmp_path):
    task = _task(tmp_path, "plain")
    a = build_variant(task, "default", torch.device("cpu"), "eval", 5)
    b = build_variant(task, "default", torch.device("cpu"), "eval", 5)
    c = build_variant(task, "default", torch.device("cpu"), "eval", 6)
    assert all(torch.equal(x, y) for x, y in zip(_params(a.reference), _params(b.reference)))
    assert not torch.equal(_params(a.reference)[0], _params(c.reference)[0])
    assert a.module.module.SEEN == ["cpu"]
    # the worker's copy of the weights is the host's own, not a view of the reference's
    assert all(t.device.type == "cpu" for t in a.weight_tensors)
    assert a.weight_tensors[0].data_ptr() != a.reference.fc.weight.data_ptr()


def test_where_the_device_cannot_build_it_the_cpu_does_with_the_same_seed(tmp_path, monkeypatch, seeds_tried):
    """A GPU default whose device fails inside Model() (here: no CUDA at all; on a GPU, numpy or a
    CPU generator) falls back to the task as written: the CPU's values for the same seed."""
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine builds there: the fallback is for models that fail on it")
    task = _task(tmp_path, "plain")
    ctx = build_variant(task, "default", torch.device("cpu"), "eval", 5)
    tried = seeds_tried
    tried.clear()
    model = case_plan._construct(ctx.module, ctx.init_args, 5, torch.device("cuda"))
    assert tried == [5, 5]  # the device first, then the CPU, each seeded afresh
    assert all(torch.equal(x, y) for x, y in zip(_params(model), _params(ctx.reference)))
    monkeypatch.setattr(fastpath, "ENABLED", False)
    tried.clear()
    case_plan._construct(ctx.module, ctx.init_args, 5, torch.device("cuda"))
    assert tried == [5]  # the speed-up off: the CPU only


def test_a_model_that_fails_everywhere_is_a_task_error(tmp_path):
    task = _task(tmp_path, "broken")
    with pytest.raises(TaskError, match="constructing the reference Model failed: ValueError: bad init"):
        build_variant(task, "default", torch.device("cpu"), "eval", 5)


def test_the_other_weights_control_is_the_same_model_with_other_values(tmp_path):
    task = _task(tmp_path, "plain")
    ctx = build_variant(task, "default", torch.device("cpu"), "eval", 5)
    other = audit._other_weights_model(task, ctx, 0)
    assert [p.shape for p in other.parameters()] == [p.shape for p in ctx.reference.parameters()]
    assert not any(torch.equal(x, y) for x, y in zip(_params(other), _params(ctx.reference)))
    same = build_reference(task, ctx.module, ctx.init_args, ctx.device, "eval", (5 + 104729) & 0x7FFFFFFF)
    assert all(torch.equal(x, y) for x, y in zip(_params(other), _params(same)))


@pytest.mark.gpu
def test_on_a_gpu_the_parameters_are_initialised_there(tmp_path):
    task = _task(tmp_path, "plain")
    dev = torch.device("cuda:0")
    a = build_variant(task, "default", dev, "eval", 5)
    b = build_variant(task, "default", dev, "eval", 5)
    assert a.module.module.SEEN == ["cuda"]
    assert a.reference.fc.weight.device.type == "cuda"
    assert all(torch.equal(x, y) for x, y in zip(_params(a.reference), _params(b.reference)))
    bound = 1 / 16**0.5  # nn.Linear's own initialiser, wherever it draws
    assert float(a.reference.fc.weight.abs().max()) <= bound


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["numpy", "cpu_generator"])
def test_on_a_gpu_a_model_built_only_as_written_still_builds(tmp_path, how):
    task = _task(tmp_path, how)
    ctx = build_variant(task, "default", torch.device("cuda:0"), "eval", 5)
    assert ctx.reference.fc.weight.device.type == "cuda"
    assert ctx.module.module.SEEN[-1] == "cpu"  # the device's attempt failed; the CPU built it


GIVEN_WEIGHTS = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, weight):
            super().__init__()
            self.weight = nn.Parameter(weight.clone())

        def forward(self, x):
            return x @ self.weight


    def get_inputs():
        return [torch.randn(4, 8)]


    def get_init_inputs():
        return [torch.randn(8, 8)]
    """
)


def test_a_model_given_its_weights_gets_other_ones_for_the_other_weights_control(tmp_path):
    """get_init_inputs() runs again under the control's seed: with the reference's arguments the
    control would hold the reference's weights, and the audit would call the task degenerate."""
    path = tmp_path / "given_weights.py"
    path.write_text(GIVEN_WEIGHTS)
    task = load_task(str(path))
    ctx = build_variant(task, "default", torch.device("cpu"), "eval", 5)
    other = audit._other_weights_model(task, ctx, 0)
    assert not torch.equal(other.weight.detach(), ctx.reference.weight.detach())
