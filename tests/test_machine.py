"""A CUDA solution on a machine without CUDA is the machine's `environment` error, never the solution's.

Before: on this CPU machine a load_inline solution with CUDA sources was compile_error ("CUDA_HOME
environment variable is not set"), exit 1, reward 0, stored against the candidate, with "built in
1.6 s" printed beside it. Decided now from the parent's facts: the triage's backend and sources,
where nvcc is, whether torch was built with CUDA, and the evaluation's device.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelproof import api, exits
from kernelproof.evaluate import machine
from kernelproof.options import EvalOptions
from kernelproof.solution import read_solution

DATA = Path(__file__).parent / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")

CUDA_SOLUTION = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
__global__ void scale_relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
"""
ext = load_inline(name="kp_machine_cuda", cpp_sources="", cuda_sources=SRC, functions=[])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x) * self.scale + self.bias
'''

CPU_EXTENSION = CUDA_SOLUTION.replace("cuda_sources=SRC, ", "").replace("__global__ void", "void")


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine without CUDA")
def test_a_cuda_solution_on_this_cpu_machine_is_an_environment_error_not_stored(tmp_path):
    sol = _write(tmp_path, "cuda_sol.py", CUDA_SOLUTION)
    db = tmp_path / "r.sqlite"
    v = api.evaluate(TASK, sol, EvalOptions(device="cpu", db=str(db), correctness_only=True))
    assert v.codes == ["environment"] and v.verdict.value == "error", v.reasons
    assert "CUDA" in v.reasons[0].message
    assert v.build is None or v.build.ok  # never a failed build blamed on the candidate
    assert exits.of_verdict(v) == 2 and v.reward == 0.0
    from kernelproof.store import Store

    assert Store(str(db)).count() == 0


def test_without_nvcc_nothing_is_built_and_the_toolkit_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "nvcc_path", lambda: None)
    sol = _write(tmp_path, "cuda_sol.py", CUDA_SOLUTION)
    missing = machine.missing_toolkit(read_solution(sol))
    assert missing is not None and "no CUDA toolkit" in missing and "nvcc" in missing
    v = api.evaluate(TASK, sol, EvalOptions(device="cpu", db="", correctness_only=True))
    assert v.codes == ["environment"] and v.build is None  # not reported as built


def test_a_cuda_solution_is_refused_the_cpu_device_even_with_a_toolkit(tmp_path):
    sol = read_solution(_write(tmp_path, "cuda_sol.py", CUDA_SOLUTION))
    assert machine.needs_cuda(sol)
    assert "need a CUDA device" in (machine.missing_device(sol, "cpu") or "")
    assert machine.missing_device(sol, "cuda:0") is None


def test_a_cpu_extension_and_plain_torch_need_no_cuda(tmp_path):
    """A C++ extension built for the CPU is real CPU code: the machine lacks nothing for it."""
    for name, text in (
        ("cpu_ext.py", CPU_EXTENSION),
        ("plain.py", (DATA / "solutions" / "plain_torch.py").read_text()),
    ):
        sol = read_solution(_write(tmp_path, name, text))
        assert not machine.needs_cuda(sol)
        assert machine.missing_toolkit(sol) is None and machine.missing_device(sol, "cpu") is None
