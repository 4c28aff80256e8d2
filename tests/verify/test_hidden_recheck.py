"""The hidden re-check of a timed output judges it by its own case's bounds, not another case's.

An honest gelu failed every timed run on the CPU with stale_output: "relative error 3.7e-08 ...
12 of 4096 elements outside the elementwise bound", a bound taken from a correctness case whose
inputs were a thousand times smaller. The elementwise bound scales with the reference's error on
the inputs being checked.
"""

from __future__ import annotations

from pathlib import Path

import torch

from kernelproof.inputs import timed_inputs
from kernelproof.measure import session
from kernelproof.task import load_task
from kernelproof.verify.case_plan import build_variant, make_inputs, reference_and_oracle, run_model
from kernelproof.verify.oracle_compare import tolerance_for

TASK = Path(__file__).resolve().parents[2] / "suite" / "level1" / "09_gelu.py"


class _Worker:
    """Answers a fetch with the output it was given."""

    def __init__(self, outputs):
        self.outputs = outputs

    def request_outputs(self, header, tensors, like, timeout_s):
        return {"ok": True}, self.outputs


def test_an_honest_timed_output_passes_under_its_own_bounds_where_a_small_case_bound_fails_it():
    task = load_task(TASK)
    ctx = build_variant(task, task.meta.cpu[0], torch.device("cpu"), "eval", 3)
    small = make_inputs(ctx, "small", 5)  # a case a thousand times smaller: a tiny elementwise bound
    ref_s, orc_s = reference_and_oracle(ctx, small)
    tol_small = tolerance_for(ref_s[0], orc_s[0], ctx.dtype)
    seeds = [11]
    x = timed_inputs(ctx.slots, ctx.fixed, ctx.scalars, seeds[0], ctx.device)[0]
    honest = x * 0.5 * (1.0 + torch.erf(x * 0.7071067811865476))  # gelu rounded another way
    ref = run_model(ctx.reference, [x], ctx.precision)[0]
    from kernelproof.verify.oracle_compare import compare

    orc = run_model(ctx.oracle, [x.double()], "fp32")[0]
    assert not compare(honest, orc, ref, tol_small).passed  # judged by the small case: refused
    bad = session._hidden_recheck(ctx, _Worker([honest]), 0, seeds, tol_small, 60.0)
    assert bad is None, bad.message
