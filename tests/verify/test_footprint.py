"""The memory one case needs, read on the meta device: too_large before anything is allocated.

KernelBench's level-1 elementwise tasks at their published sizes (6.4 GB a tensor) ended, on a
machine too small for them, as internal_error "can't allocate memory" after allocating; on an H200
a too_large took about 70 s. Here a task far beyond any machine is refused from its shapes alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from address_space import capped

from kernelproof import api
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verify import footprint

DATA = Path(__file__).resolve().parents[1] / "data"
SOL = str(DATA / "solutions" / "plain_torch.py")

HUGE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x) * self.scale + self.bias


batch_size = {batch}
features = 96


def get_inputs():
    return [torch.randn(batch_size, features, device="cpu")]


def get_init_inputs():
    return [features]
"""


def _task(tmp_path, batch: int) -> str:
    path = tmp_path / f"scale_relu_{batch}.py"
    path.write_text(HUGE.format(batch=batch))
    return str(path)


def test_the_estimate_counts_inputs_weights_outputs_and_the_oracles_float64_ones(tmp_path):
    task = load_task(_task(tmp_path, 64))
    est = footprint.estimate_variant(task, "default")
    assert isinstance(est, footprint.Estimate)
    inp, w, out = 64 * 96 * 4, 2 * 96 * 4, 64 * 96 * 4
    assert (est.input_bytes, est.weight_bytes, est.output_bytes) == (inp, w, out)
    assert est.parent_bytes() == inp + w + out + 2 * (w + out)  # float64 weights and outputs: twice fp32
    assert est.case_bytes() == est.parent_bytes() + inp + w + out
    # what the device's admission reserves: the whole evaluation, parent and worker together
    assert est.evaluation_bytes() == (3 * (inp + w) + 5 * out) + (w + 3 * inp + 3 * out)
    need = footprint.case_need(task, ("default",), "cpu")
    assert (need.case_bytes, need.evaluation_bytes) == (est.case_bytes(), est.evaluation_bytes())


def test_a_task_beyond_this_machine_is_too_large_without_allocating(tmp_path):
    """2**40 rows of 96 floats (384 TiB a tensor): get_inputs on the CPU would never return. An
    address-space limit of 8 GiB for the duration makes any real allocation of it fail loudly."""
    task = _task(tmp_path, 2**40)
    need = footprint.case_need(load_task(task), ("default",), "cpu")
    assert need.too_large and need.case_bytes > 2**50
    with capped(8 * 2**30):
        need = footprint.case_need(load_task(task), ("default",), "cpu")
    assert need.too_large
    v = api.evaluate(
        task, SOL, EvalOptions(device="cpu", db=str(tmp_path / "r.sqlite"), correctness_only=True)
    )
    assert v.codes == ["too_large"] and v.verdict.value == "error", v.reasons
    message = v.reasons[0].message
    assert f"needs at least {need.case_bytes / 1e9:.1f} GB ({need.case_bytes} bytes)" in message
    assert "this machine has" in message and "available" in message
    assert "KERNELPROOF" in message and "docs/tasks.md" in message  # how to run it smaller
    assert v.correctness is None  # nothing ran
    from kernelproof.store import Store

    assert Store(str(tmp_path / "r.sqlite")).count() == 0  # never stored


def test_a_task_that_fits_is_not_refused(tmp_path):
    need = footprint.case_need(load_task(_task(tmp_path, 64)), ("default",), "cpu")
    assert need.case_bytes is not None and not need.too_large
    by_path = footprint.case_need_of(_task(tmp_path, 64), "cpu")  # the same, from the path
    assert (by_path.case_bytes, by_path.variant) == (need.case_bytes, need.variant)


def test_a_task_that_does_not_load_has_no_estimate(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("def get_inputs(:\n")
    need = footprint.case_need_of(str(path), "cpu")
    assert need.case_bytes is None and not need.too_large and "does not load" in need.why_unknown


@pytest.mark.parametrize(
    "forward",
    [
        "return x[x > 0].sum()",  # a data-dependent shape: meta cannot say
        "return x * float(x.sum().item())",  # a value read back on the host
    ],
)
def test_a_reference_that_cannot_run_on_meta_is_unknown_never_too_large(tmp_path, forward):
    text = HUGE.format(batch=2**40).replace("return torch.relu(x) * self.scale + self.bias", forward)
    path = tmp_path / "data_dependent.py"
    path.write_text(text)
    need = footprint.case_need(load_task(path), ("default",), "cpu")
    assert need.case_bytes is None and not need.too_large
    assert "meta device" in need.why_unknown


def test_cpu_memory_available_is_known_on_linux():
    assert (footprint.available_bytes("cpu") or 0) > 0


def test_what_an_evaluation_reserves_is_never_below_the_floor_of_one_case():
    """The evaluation's count assumes float32 (the float64 oracle at twice the outputs); in float16,
    with large weights, the floor of one case is the larger, and the reservation follows it."""
    half = footprint.Estimate(
        variant="default",
        input_bytes=10,
        input_float_elems=5,
        weight_bytes=1000,
        weight_float_elems=500,
        output_bytes=10,
        output_float_elems=5,
    )
    assert footprint.evaluation_bytes(10, 1000, 10) < half.case_bytes() == 6080
    assert half.evaluation_bytes() == half.case_bytes()


def test_the_shipped_task_beyond_any_device_is_too_large(tmp_path):
    """The task the H200 run times (benchmarks/memory_trace.py): refused from the meta device's
    sizes (get_inputs at full size would ask for 1.6 TB), nothing run, nothing stored."""
    task = str(DATA / "tasks" / "beyond_any_device.py")
    need = footprint.case_need_of(task, "cpu")
    assert need.too_large and need.case_bytes >= 2 * 2**32 * 96 * 4
    v = api.evaluate(
        task, SOL, EvalOptions(device="cpu", db=str(tmp_path / "r.sqlite"), correctness_only=True)
    )
    assert v.codes == ["too_large"] and v.correctness is None, v.reasons
    assert f"needs at least {need.case_bytes / 1e9:.1f} GB" in v.reasons[0].message
