"""On a CPU machine Triton's interpreter needs no driver: autotune chooses, and a solution's words decide nothing."""

from __future__ import annotations

import os
from pathlib import Path

from kernelproof import exits
from kernelproof.api import evaluate
from kernelproof.options import EvalOptions
from kernelproof.verdict import Outcome, ReasonCode
from kernelproof.worker import calls

REPO = Path(__file__).resolve().parents[2]

HARD_CODED_CUDA = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x.to("cuda"), approximate="tanh").to(x.device)
"""


def test_the_words_of_a_missing_driver_are_the_solutions_runtime_error():
    """The worker names no `environment`: the text is the solution's to write (I10, I11)."""
    for exc in (
        RuntimeError("0 active drivers ([]). There should only be one."),
        AssertionError("Torch not compiled with CUDA enabled"),
        ValueError("Input must be a CUDA tensor"),
    ):
        reply = calls.call_failure(exc, "a call", "")
        assert reply["code"] == ReasonCode.RUNTIME_ERROR.value, reply


def test_environment_is_an_error_exit_not_a_rejection():
    assert exits.for_outcome("error", ["environment"]) == exits.EXIT_USAGE


def test_a_plain_torch_solution_that_moves_to_cuda_fails_on_the_cpu_with_the_parents_note(tmp_path):
    """No build was asked for, so the machine lacks nothing the parent knows of: the solution ran
    and failed; the parent's note names the device it chose."""
    sol = tmp_path / "needs_gpu.py"
    sol.write_text(HARD_CODED_CUDA)
    task = os.path.relpath(REPO / "tests" / "legit" / "tasks" / "gelu_tanh.py")
    opts = EvalOptions(device="cpu", db="", seed=7, correctness_only=True, seeds_per_case=1, timeout_s=300.0)
    v = evaluate(task, str(sol), opts)
    assert v.verdict is Outcome.FAIL and exits.of_verdict(v) == 1, v.reasons
    assert v.reasons[0].code is ReasonCode.RUNTIME_ERROR and "--device cuda" in v.reasons[0].message
