"""A CUDA solution on a machine without CUDA is the machine's `environment` error, never the solution's.

Before: on this CPU machine a load_inline solution with CUDA sources was compile_error ("CUDA_HOME
environment variable is not set"), exit 1, reward 0, stored against the candidate, with "built in
1.6 s" printed beside it. Decided now from the parent's facts: the CUDA builds the solution truly
asked for (the builder's record of its calls), where nvcc is, whether torch was built with CUDA,
and the evaluation's device.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelproof import api, exits
from kernelproof.build import BuildResult, cuda
from kernelproof.evaluate import machine
from kernelproof.options import EvalOptions
from kernelproof.solution import read_solution
from kernelproof.verdict import Reason, ReasonCode

DATA = Path(__file__).resolve().parents[1] / "data"
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


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine without CUDA")
def test_a_cuda_build_asked_for_on_the_first_forward_is_an_environment_error_not_stored(tmp_path):
    """Asked for while the solution runs (the worker's request, built by the parent's service):
    decided from the service's record, whatever the solution did with the refusal."""
    lazy = CUDA_SOLUTION.replace("ext = load_inline(", "def build():\n    return load_inline(").replace(
        "        return torch.relu(x)", "        build()\n        return torch.relu(x)"
    )
    assert "build()\n        return" in lazy
    db = tmp_path / "r.sqlite"
    v = api.evaluate(
        TASK, _write(tmp_path, "lazy.py", lazy), EvalOptions(device="cpu", db=str(db), correctness_only=True)
    )
    assert v.codes == ["environment"] and "kp_machine_cuda" in v.reasons[0].message, v.reasons
    from kernelproof.store import Store

    assert Store(str(db)).count() == 0


def test_without_nvcc_nothing_is_built_and_the_toolkit_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda, "nvcc_path", lambda environ=None: None)
    assert "no CUDA toolkit" in (machine.cannot_build(("load_cuda",)) or "")
    sol = _write(tmp_path, "cuda_sol.py", CUDA_SOLUTION)
    v = api.evaluate(TASK, sol, EvalOptions(device="cpu", db="", correctness_only=True))
    assert v.codes == ["environment"] and v.build is None  # not reported as built
    message = v.reasons[0].message
    assert "no CUDA toolkit" in message and "nvcc" in message and "load_inline:kp_machine_cuda" in message


def test_a_requested_cuda_build_is_refused_the_cpu_device_even_with_a_toolkit():
    built = BuildResult(True, 1.0, "", "cuda", cuda=("load_inline:kp_machine_cuda",))
    assert "need a CUDA device" in (machine.cannot_run(built.cuda, "cpu") or "")
    assert machine.cannot_run(built.cuda, "cuda:0") is None
    assert machine.unmet(built, "cpu") is not None


def test_a_build_that_asked_for_no_cuda_lacks_nothing_whatever_its_text():
    """The decision is the build's record, never the text: a build that asked for no CUDA, or no
    build at all, lacks nothing here, even for a source full of CUDA words."""
    for result in (None, BuildResult(True, 1.0, "", "cuda"), BuildResult(False, 0.5, "error: x", "cuda")):
        assert machine.unmet(result, "cpu") is None


def test_empty_cuda_sources_ask_for_no_cuda_build():
    """A C++ extension built for the CPU names the CUDA arguments it leaves empty."""
    for args in (
        {"cuda_sources": []},
        {"cuda_sources": [""]},
        {"cuda_sources": ["  "], "with_cuda": None},
        {},
    ):
        assert not cuda.asks_for_cuda(args)
    assert cuda.asks_for_cuda({"cuda_sources": ["__global__ void k() {}"]})
    assert cuda.asks_for_cuda({"cuda_sources": [], "with_cuda": True})


def test_a_cpu_extension_and_plain_torch_do_not_look_like_cuda(tmp_path):
    """The cheap guess (which kernelbench samples are built first) passes over CPU extensions."""
    for name, text in (
        ("cpu_ext.py", CPU_EXTENSION),
        (
            "cpu_ext_empty_cuda.py",
            CPU_EXTENSION.replace("load_inline(", "load_inline(cuda_sources=[], with_cuda=False, "),
        ),
        ("cpu_ext_none_cuda.py", CPU_EXTENSION.replace("load_inline(", "load_inline(cuda_sources=None, ")),
        ("plain.py", (DATA / "solutions" / "plain_torch.py").read_text()),
    ):
        assert not machine.looks_like_cuda(read_solution(_write(tmp_path, name, text)))


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


def test_a_workers_environment_claim_is_never_kept_whatever_the_solution_names(tmp_path):
    """What this machine lacks is decided by the parent before the worker runs; a worker's reply is
    written in the candidate's process. Its `environment` is the solution's runtime_error, on every
    device and for every backend (interpreted Triton included), its message kept and labelled."""
    triton = read_solution(str(DATA / "solutions" / "scale_relu_triton.py"))
    plain = read_solution(_write(tmp_path, "claims.py", CLAIMS_NO_DRIVER))
    hard_coded = read_solution(
        _write(tmp_path, "to_cuda.py", CLAIMS_NO_DRIVER.replace("(x)", '(x.to("cuda"))'))
    )
    cpu_extension = read_solution(_write(tmp_path, "cpu_ext.py", CPU_EXTENSION))
    for sol in (triton, plain, hard_coded, cpu_extension):
        for device in ("cpu", "cuda:0"):
            judged = machine.judged_on_this_machine(NO_DRIVER, sol, device)
            assert judged.code is ReasonCode.RUNTIME_ERROR, (sol.path, device)
            assert judged.message.startswith(NO_DRIVER.message) and judged.detail == NO_DRIVER.detail
            assert "the parent alone decides" in judged.message
    other = Reason(ReasonCode.WRONG_SHAPE, "a call returned (2, 3)")
    assert machine.judged_on_this_machine(other, plain, "cuda:0") is other  # nothing else is judged here


def test_a_gpu_solutions_failure_on_the_cpu_keeps_its_code_and_gets_the_parents_note(tmp_path):
    """The note names the device the parent chose; it changes no code and excuses nothing."""
    triton = read_solution(str(DATA / "solutions" / "scale_relu_triton.py"))
    plain = read_solution(_write(tmp_path, "plain.py", (DATA / "solutions" / "plain_torch.py").read_text()))
    raised = Reason(ReasonCode.RUNTIME_ERROR, "forward raised AssertionError: Input must be a CUDA tensor")
    noted = machine.judged_on_this_machine(raised, triton, "cpu")
    assert noted.code is ReasonCode.RUNTIME_ERROR and "--device cuda" in noted.message
    assert noted.message.startswith(raised.message) and "ran on 'cpu'" in noted.message
    assert machine.judged_on_this_machine(raised, triton, "cuda:0") is raised  # a CUDA device: no note
    assert machine.judged_on_this_machine(raised, plain, "cpu") is raised  # it names no GPU
    wrong = Reason(ReasonCode.MISMATCH, "case 0: relative error 0.5")
    assert machine.judged_on_this_machine(wrong, triton, "cpu") is wrong  # only what it raised


def test_a_plain_torch_solution_that_claims_no_driver_fails_as_its_own_runtime_error(tmp_path):
    sol = _write(tmp_path, "claims.py", CLAIMS_NO_DRIVER)
    v = api.evaluate(
        TASK, sol, EvalOptions(device="cpu", db="", seed=3, seeds_per_case=1, correctness_only=True)
    )
    assert v.verdict.value == "fail" and v.codes == ["runtime_error"], v.reasons
    assert "0 active drivers" in v.reasons[0].message and "--device cuda" not in v.reasons[0].message
    assert exits.of_verdict(v) == 1
