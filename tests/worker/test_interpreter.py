"""What Triton's interpreter lacks on a CPU machine is the machine's: autotune chooses, no driver is an error."""

from __future__ import annotations

import os
from pathlib import Path

from kernelproof import exits
from kernelproof.api import evaluate
from kernelproof.options import EvalOptions
from kernelproof.verdict import Outcome, ReasonCode
from kernelproof.worker.interpreter import environment_cause

REPO = Path(__file__).resolve().parents[2]

HARD_CODED_CUDA = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x.to("cuda"), approximate="tanh").to(x.device)
"""


def test_a_missing_gpu_driver_is_named_as_the_machines():
    assert "no GPU driver" in environment_cause(
        RuntimeError("0 active drivers ([]). There should only be one.")
    )
    assert environment_cause(AssertionError("Torch not compiled with CUDA enabled"))
    assert environment_cause(ValueError("index 3 is out of bounds")) == ""


def test_environment_is_an_error_exit_not_a_rejection():
    assert exits.for_outcome("error", ["environment"]) == exits.EXIT_USAGE


def test_a_solution_that_needs_a_gpu_is_an_environment_error_on_the_cpu(tmp_path):
    sol = tmp_path / "needs_gpu.py"
    sol.write_text(HARD_CODED_CUDA)
    task = os.path.relpath(REPO / "tests" / "legit" / "tasks" / "gelu_tanh.py")
    opts = EvalOptions(device="cpu", db="", seed=7, correctness_only=True, seeds_per_case=1, timeout_s=300.0)
    v = evaluate(task, str(sol), opts)
    assert v.verdict is Outcome.ERROR, v.reasons
    assert v.reasons[0].code is ReasonCode.ENVIRONMENT and "--device cuda" in v.reasons[0].message
