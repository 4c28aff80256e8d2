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
from kernelproof.verdict import Reason, ReasonCode

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
        # published CPU extensions name the CUDA arguments they leave empty
        (
            "cpu_ext_empty_cuda.py",
            CPU_EXTENSION.replace("load_inline(", "load_inline(cuda_sources=[], with_cuda=False, "),
        ),
        ("cpu_ext_none_cuda.py", CPU_EXTENSION.replace("load_inline(", "load_inline(cuda_sources=None, ")),
        ("plain.py", (DATA / "solutions" / "plain_torch.py").read_text()),
    ):
        sol = read_solution(_write(tmp_path, name, text))
        assert not machine.needs_cuda(sol)
        assert machine.missing_toolkit(sol) is None and machine.missing_device(sol, "cpu") is None


# A plain-torch solution that needs no GPU, raising the words of a missing driver from its forward.
CLAIMS_NO_DRIVER = (
    (DATA / "solutions" / "plain_torch.py")
    .read_text()
    .replace(
        "        return torch.relu(x)",
        '        raise RuntimeError("0 active drivers ([]). There should only be one.")\n        return torch.relu(x)',
    )
)
NO_DRIVER = Reason(
    ReasonCode.ENVIRONMENT,
    "a call: this machine has no GPU driver or device, which the solution needs here "
    "(RuntimeError: 0 active drivers ([]). There should only be one.); run it on a GPU (--device cuda)",
    "Traceback ...",
)


def test_a_workers_environment_claim_stands_only_on_the_parents_facts(tmp_path):
    """The worker decides `environment` from an exception's text, which the solution writes. On a
    CUDA device (whose driver the parent uses), or from a solution that can need no GPU driver, the
    claim is the solution's own runtime_error, its message kept."""
    triton = read_solution(str(DATA / "solutions" / "scale_relu_triton.py"))
    plain = read_solution(_write(tmp_path, "claims.py", CLAIMS_NO_DRIVER))
    hard_coded = read_solution(
        _write(tmp_path, "to_cuda.py", CLAIMS_NO_DRIVER.replace("(x)", '(x.to("cuda"))'))
    )
    assert machine.judged_lack(NO_DRIVER, triton, "cpu") == NO_DRIVER  # interpreted Triton without a driver
    assert machine.judged_lack(NO_DRIVER, hard_coded, "cpu") == NO_DRIVER  # it names a CUDA device
    cpu_extension = read_solution(_write(tmp_path, "cpu_ext.py", CPU_EXTENSION))
    for sol, device in ((triton, "cuda:0"), (plain, "cpu"), (plain, "cuda:0"), (cpu_extension, "cpu")):
        judged = machine.judged_lack(NO_DRIVER, sol, device)
        assert judged.code is ReasonCode.RUNTIME_ERROR, (sol.path, device)
        assert judged.message.startswith(NO_DRIVER.message) and judged.detail == NO_DRIVER.detail
    other = Reason(ReasonCode.WRONG_SHAPE, "a call returned (2, 3)")
    assert machine.judged_lack(other, plain, "cuda:0") is other  # nothing else is judged here


def test_a_plain_torch_solution_that_claims_no_driver_fails_as_its_own_runtime_error(tmp_path):
    sol = _write(tmp_path, "claims.py", CLAIMS_NO_DRIVER)
    v = api.evaluate(
        TASK, sol, EvalOptions(device="cpu", db="", seed=3, seeds_per_case=1, correctness_only=True)
    )
    assert v.verdict.value == "fail" and v.codes == ["runtime_error"], v.reasons
    assert "0 active drivers" in v.reasons[0].message and "triage" in v.reasons[0].message
    assert exits.of_verdict(v) == 1


CUDA_CHECKS = """
import torch

def asserted(x):
    assert x.is_cuda, "Input must be a CUDA tensor"

def raised(x):
    if x.device.type != "cuda":
        raise ValueError("Input must be a CUDA tensor")

def unrelated(x):
    assert x.dim() == 3, "expected a 3-d input"

def deeper(x):
    return torch.zeros(2) + torch.zeros(3)
"""


def test_a_solutions_own_cuda_only_check_names_the_machines_lack_and_its_line(tmp_path):
    """Published GPU kernels check their inputs (`assert x.is_cuda`): on the CPU that check, raised at
    the solution's own line, is what the machine lacks, never an error in the solution."""
    from kernelproof.worker.interpreter import environment_cause

    path = _write(tmp_path, "checks.py", CUDA_CHECKS)
    namespace: dict = {}
    exec(compile(CUDA_CHECKS, path, "exec"), namespace)

    def cause(name: str, file: str = path) -> str:
        try:
            namespace[name](__import__("torch").ones(2))
        except Exception as exc:  # noqa: BLE001
            return environment_cause(exc, file)
        raise AssertionError(f"{name} did not raise")

    assert "CUDA tensors only" in cause("asserted") and "line 5: `assert x.is_cuda" in cause("asserted")
    assert "line 9: `raise ValueError" in cause("raised")
    assert cause("unrelated") == ""  # a check of something else stays the solution's
    assert cause("deeper") == ""  # raised inside torch: not a check of the solution's
    assert cause("asserted", file=str(tmp_path / "other.py")) == ""  # not the solution's file
    plain = read_solution(_write(tmp_path, "plain_check.py", CUDA_CHECKS + "\nclass ModelNew: pass\n"))
    assert machine.needs_gpu_driver(plain)  # so the parent keeps the claim on the CPU
