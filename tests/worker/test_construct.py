"""Where a worker builds ModelNew and the task's Model: on the GPU first, as written where that fails.

The parent's weights replace a model's own, so building it with the device as torch's default only
saves the CPU's generator (10-20 s for a 32768 x 32768 Linear); a constructor that cannot run there
is built again on the CPU, under the same seed, and the CPU decides whether it fails.
"""

from __future__ import annotations

import pytest
import torch

from kernelproof.worker import program


class Plain(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(n, n)


class CpuOnly(torch.nn.Module):
    """Draws its table from a CPU generator: cannot be built with a GPU as the default device."""

    def __init__(self, n: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.table = torch.nn.Parameter(torch.randn(n, generator=g))
        self.noise = torch.nn.Parameter(torch.randn(n))


class Broken(torch.nn.Module):
    built = 0

    def __init__(self) -> None:
        super().__init__()
        Broken.built += 1
        raise ValueError("no such layer")


def test_on_the_cpu_it_is_built_as_written_under_the_seed() -> None:
    model = program.construct(Plain, [8], torch.device("cpu"), init_seed=5)
    torch.manual_seed(5)
    expected = Plain(8)
    assert model.linear.weight.device.type == "cpu"
    assert torch.equal(model.linear.weight, expected.linear.weight)


def test_a_constructor_the_gpu_cannot_run_is_built_again_on_the_cpu_under_the_same_seed() -> None:
    """On a machine without a GPU the first attempt fails too: the CPU's build is the one kept,
    with the values the seed gives it, not values drawn after the failed attempt."""
    model = program.construct(CpuOnly, [16], torch.device("cuda"), init_seed=7)
    torch.manual_seed(7)
    expected = CpuOnly(16)
    assert model.table.device.type == "cpu"
    assert torch.equal(model.noise, expected.noise)


def test_a_constructor_that_fails_everywhere_fails_with_the_cpu_s_exception() -> None:
    Broken.built = 0
    with pytest.raises(ValueError, match="no such layer"):
        program.construct(Broken, [], torch.device("cuda"), init_seed=0)
    assert Broken.built == 2  # the GPU's attempt, then the CPU's, which decides


def test_a_candidate_whose_constructor_fails_gets_runtime_error(tmp_path) -> None:
    path = tmp_path / "solution.py"
    path.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        raise KeyError('w')\n"
    )
    model, failed = program.load_candidate(str(path), [], device=torch.device("cuda"), init_seed=1)
    assert model is None and failed is not None
    assert failed.code.value == "runtime_error" and "KeyError" in failed.message


@pytest.mark.gpu
def test_on_a_gpu_the_parameters_are_made_on_the_device() -> None:
    device = torch.device("cuda", torch.cuda.current_device())
    model = program.construct(Plain, [64], device, init_seed=0)
    assert model.linear.weight.device == device
    cpu_only = program.construct(CpuOnly, [16], device, init_seed=0)
    assert cpu_only.table.device.type == "cpu"  # built again as written


@pytest.mark.gpu
def test_a_baseline_reference_is_built_on_the_device(tmp_path) -> None:
    path = tmp_path / "task.py"
    path.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.w = torch.nn.Linear(n, n)\n"
    )
    device = torch.device("cuda", torch.cuda.current_device())
    model = program.load_reference(str(path), [32], None, device, init_seed=0)
    assert model.w.weight.device == device
