"""Fuzz the parent's reading of replies with solutions that write hostile frames everywhere (I10).

One solution file (solutions/fuzz_frames.py) is copied under a name per strategy and place: random
bytes, truncated frames, oversized ones (a terabyte header, a 60 GiB inline tensor declared),
reordered ones, and well-formed replies nobody asked for; written to every descriptor the worker
has, at import, in __init__, in forward and from a thread. Each evaluation must end as
protocol_violation (or, where the frame reaches no reader, pass unaffected); the parent never
raises (an internal_error verdict), and its memory stays far below what any header declared.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from resident import peak_mib, reset_peak

from kernelproof.api import evaluate
from kernelproof.options import EvalOptions

HERE = Path(__file__).resolve().parent
SCALE_RELU = str(HERE.parent / "data" / "tasks" / "scale_relu.py")
STRATEGIES = ("random", "truncated", "oversized", "reordered", "unrequested")
PLACES = ("import", "init", "forward", "thread")
PEAK_GROWTH_MIB = 1024  # the parent's peak may grow by this much at most (a 60 GiB tensor is declared)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_hostile_frames_end_the_worker_and_never_the_parent(tmp_path, strategy, place):
    solution = tmp_path / f"fuzz__{strategy}__{place}.py"
    shutil.copyfile(HERE / "solutions" / "fuzz_frames.py", solution)
    reset_peak()  # the growth of this evaluation, not under an earlier test's peak
    before_mib = peak_mib()
    options = EvalOptions(device="cpu", db="", seed=3, correctness_only=True, seeds_per_case=1, timeout_s=120)
    v = evaluate(SCALE_RELU, str(solution), options)
    grown_mib = peak_mib() - before_mib
    assert "internal_error" not in v.codes, v.reasons
    assert v.passed or v.codes == ["protocol_violation"], v.reasons
    assert grown_mib < PEAK_GROWTH_MIB, grown_mib
