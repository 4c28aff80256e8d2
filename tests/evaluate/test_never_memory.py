"""A solution's own bug (a TypeError, an IndexError) is never blamed on the device's size.

The parent decides whether a failure was its own lack of memory from its facts (the evaluation's
footprint against what the device admits, the reference run alone); a failure's code says only
whether it can be one. A runtime error could: a CUDA extension's failed allocation raises a
RuntimeError. So on a task beyond the device, a wrong kernel's TypeError became ``too_large`` ("run
it on a device with more memory"), and near the device's edge it paid for the reference's re-run
alone on the whole device. The candidate's worker now says when the exception's class, and every
one it was raised from, is one no lack of memory takes; that word can only keep a failure the
solution's, so the parent takes it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelproof import blame
from kernelproof.api import evaluate
from kernelproof.options import EvalOptions
from kernelproof.submission import read_submitted
from kernelproof.verdict import Outcome, Reason, ReasonCode
from kernelproof.wire.replies import failure, reason_of
from kernelproof.worker import calls, program

TESTS = Path(__file__).resolve().parents[1]
SCALE_RELU = str(TESTS / "data" / "tasks" / "scale_relu.py")
GB = 10**9


def _raised(make):
    try:
        make()
    except BaseException as exc:  # noqa: BLE001
        return exc
    raise AssertionError("nothing raised")


def _value_error_while_out_of_memory():
    try:
        raise RuntimeError("CUDA error: out of memory")
    except RuntimeError:
        raise ValueError("shape check failed")  # noqa: B904  (raised while handling: __context__)


@pytest.mark.parametrize(
    ("exc", "excluded"),
    [
        (TypeError("forward() takes 2 positional arguments but 3 were given"), True),
        (IndexError("index 4 is out of bounds"), True),
        (KeyError("weight"), True),
        (ValueError("expected a contiguous tensor"), True),
        (NameError("name 'y' is not defined"), True),
        (ZeroDivisionError("division by zero"), True),
        (RuntimeError("CUDA error: out of memory"), False),  # an extension's failed allocation
        (MemoryError(), False),  # CuPy's OutOfMemoryError is one
        (NotImplementedError("no CPU path"), False),  # a RuntimeError
        (Exception("CUDA_ERROR_OUT_OF_MEMORY"), False),  # numba's CudaAPIError is a plain Exception
    ],
)
def test_the_worker_excludes_only_classes_no_lack_of_memory_takes(exc, excluded):
    reply = calls.call_failure(exc, "forward", "/nowhere/solution.py")
    assert reply["code"] == ReasonCode.RUNTIME_ERROR.value
    assert program.never_memory(exc) is excluded
    assert reason_of(reply).memory_excluded is excluded


def test_an_exception_raised_while_handling_an_out_of_memory_is_not_excluded():
    exc = _raised(_value_error_while_out_of_memory)
    assert isinstance(exc, ValueError) and isinstance(exc.__context__, RuntimeError)
    assert not program.never_memory(exc)


def test_a_reply_excludes_only_a_runtime_error_and_only_by_an_explicit_true():
    """A crash is a dead worker or torch's OutOfMemoryError: no word of the worker's takes it out."""
    assert not reason_of(failure(ReasonCode.CRASH, "died", memory_excluded=True)).memory_excluded
    forged = {**failure(ReasonCode.RUNTIME_ERROR, "x"), "memory_excluded": "yes"}  # a worker's raw reply
    assert not reason_of(forged).memory_excluded
    assert reason_of(failure(ReasonCode.RUNTIME_ERROR, "x", memory_excluded=True)).memory_excluded


class _Pool:
    """What the blame reads of the pool: the memory the device admits."""

    def __init__(self, capacity_bytes: int) -> None:
        self._memory = SimpleNamespace(capacity_bytes=capacity_bytes)

    def memory(self, device: str):
        return self._memory


def _failed(reason: Reason, footprint_bytes: int):
    v = blame.error_verdict(SCALE_RELU, SCALE_RELU, "cuda:0", reason)
    memory = {"footprint_bytes": footprint_bytes, "correctness_bytes": footprint_bytes}
    return dataclasses.replace(v, verdict=Outcome.FAIL, environment={"memory": memory})


def _never_judged(*_):
    raise AssertionError("the reference's re-run alone was asked for")


@pytest.mark.parametrize("excluded", [False, True])
def test_beyond_the_device_a_bug_stays_the_solutions_and_an_allocation_does_not(excluded):
    reason = Reason(ReasonCode.RUNTIME_ERROR, "case x: forward raised TypeError", memory_excluded=excluded)
    verdict = _failed(reason, footprint_bytes=90 * GB)
    task, options, pool = read_submitted(SCALE_RELU), EvalOptions(device="cpu", db=""), _Pool(78 * GB)
    judged = blame.beyond_the_device(verdict, task, options, "cuda:0", pool, _never_judged)
    if excluded:
        assert judged is verdict
    else:
        assert judged.verdict is Outcome.ERROR and judged.reasons[0].code is ReasonCode.TOO_LARGE


def test_near_the_edge_a_bug_never_pays_for_the_reference_alone():
    reason = Reason(ReasonCode.RUNTIME_ERROR, "case x: forward raised IndexError", memory_excluded=True)
    verdict, pool = _failed(reason, footprint_bytes=100 * GB), _Pool(138 * GB)
    assert not blame.near_the_edge_failure(verdict, "cuda:0", pool)
    task, options = read_submitted(SCALE_RELU), EvalOptions(device="cpu", db="")
    assert blame.beyond_the_device(verdict, task, options, "cuda:0", pool, _never_judged) is verdict
    memory_error = dataclasses.replace(reason, memory_excluded=False)
    assert blame.near_the_edge_failure(dataclasses.replace(verdict, reasons=(memory_error,)), "cuda:0", pool)


WRONG_ARGUMENTS = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        return torch.relu(x, 2.0, "a second argument relu never takes")
"""


def _failed_on_the_cpu(tmp_path, name: str, source: str):
    """The verdict of `source` on the CPU, through the real worker, the parent's reading of its
    reply and the verdict's finishing: a runtime error."""
    sol = tmp_path / name
    sol.write_text(source)
    opts = EvalOptions(device="cpu", db="", seed=3, correctness_only=True, seeds_per_case=1, timeout_s=300.0)
    v = evaluate(SCALE_RELU, str(sol), opts)
    assert v.verdict is Outcome.FAIL and v.reasons[0].code is ReasonCode.RUNTIME_ERROR, v.reasons
    return v


def test_the_pipeline_carries_the_workers_word_to_the_verdicts_reason(tmp_path):
    v = _failed_on_the_cpu(tmp_path, "wrong_arguments.py", WRONG_ARGUMENTS)
    assert "TypeError" in v.reasons[0].message and v.reasons[0].memory_excluded
    assert "memory_excluded" not in v.reasons[0].to_json()


WRONG_CONSTRUCTOR = """
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):  # the task gives it arguments
        super().__init__()

    def forward(self, x):
        return x
"""


def test_a_constructor_called_with_arguments_it_does_not_take_is_excluded_too(tmp_path):
    v = _failed_on_the_cpu(tmp_path, "wrong_constructor.py", WRONG_CONSTRUCTOR)
    assert "constructing ModelNew raised TypeError" in v.reasons[0].message and v.reasons[0].memory_excluded
