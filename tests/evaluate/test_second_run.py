"""A case's run 2 (the same inputs placed in the previous case's buffers) is judged against the
reference when it comes back as a fingerprint, as a small output's run 2 is compared whole: a
wrong run 2 is ``mismatch`` at every size, not ``nondeterministic`` for a large output only (on
an H200 one pointer-cache exploit got either code by the task's size)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kernelproof.evaluate.correctness import judge_case
from kernelproof.inputs import fingerprint
from kernelproof.verify.case_plan import NO_NOISE

PROJ = 1234


X = torch.randn(4096, generator=torch.Generator().manual_seed(0))
REF = torch.tanh(X)


def _judged(second_run: torch.Tensor):
    ctx = SimpleNamespace(dtype=torch.float32, noise=NO_NOISE, inplace=())
    case = SimpleNamespace(case_id="default/normal/1", variant="default", distribution="normal")
    options = SimpleNamespace(kernelbench_compat=False)
    second = (PROJ, [fingerprint(second_run, PROJ)])
    return judge_case(
        ctx, case, [X], [REF], [torch.tanh(X.double())], [REF.clone()], None, options, None, second
    )


def test_a_run_2_served_from_an_earlier_case_is_a_mismatch():
    earlier = torch.tanh(torch.randn(4096, generator=torch.Generator().manual_seed(7)))
    judged = _judged(earlier)
    assert judged.reason is not None and judged.reason.code.value == "mismatch", judged.reason
    assert "(run 2)" in judged.reason.message and "served by address" in judged.reason.message
    assert not judged.result.passed and judged.result.code == "mismatch"


def test_a_run_2_equal_to_run_1_passes():
    judged = _judged(REF.clone())
    assert judged.reason is None and judged.result.passed
