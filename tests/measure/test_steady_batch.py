"""A back-to-back batch: every call on values of its own, checks picked after the reply."""

from __future__ import annotations

import random

import torch

from kernelproof.inputs import STEADY_WARMUP_CALLS, InputSlot, fingerprint, fingerprints, timed_input_batch
from kernelproof.measure import steady_batch


def _slot(index: int, shape: tuple[int, ...]) -> InputSlot:
    return InputSlot(index=index, kind="float", shape=list(shape), dtype="float32", domain="any")


def test_no_two_calls_of_a_batch_see_the_same_values_and_the_draw_is_reproducible():
    slots = [_slot(0, (4, 3)), _slot(1, (3,))]
    fixed = {}
    sets = timed_input_batch(slots, fixed, {}, seed=5, calls=6, device="cpu")
    again = timed_input_batch(slots, fixed, {}, seed=5, calls=6, device="cpu")
    assert len(sets) == 6
    for i in range(6):
        assert all(torch.equal(a, b) for a, b in zip(sets[i], again[i]))
        for j in range(i):
            assert not torch.equal(sets[i][0], sets[j][0]) and not torch.equal(sets[i][1], sets[j][1])
    assert sets[0][0].data_ptr() != sets[1][0].data_ptr()


def test_a_batch_of_fingerprints_matches_one_at_a_time():
    outs = [torch.randn(5, 7) for _ in range(9)]
    many = fingerprints(outs, 17, chunk_bytes=3 * 35 * 8)  # three rows a chunk
    for got, t in zip(many, outs):
        want = fingerprint(t, 17)
        assert abs(got[0] - want[0]) < 1e-9 and abs(got[1] - want[1]) < 1e-9
    bad = outs[3].clone()
    bad[0, 0] = float("inf")
    assert fingerprints([bad], 17)[0][0] != fingerprints([bad], 17)[0][0]  # NaN: a wrong output


def test_the_last_call_and_others_are_picked_after_the_reply():
    picks = steady_batch.picks(random.Random(3), 50)
    assert picks[-1] == 49 and len(picks) == steady_batch.STEADY_CHECKS + 1 and len(set(picks)) == len(picks)
    seen = {p for seed in range(40) for p in steady_batch.picks(random.Random(seed), 50)[:-1]}
    assert len(seen) > 30  # spread over the batch, not a fixed few
    assert steady_batch.picks(random.Random(0), 1) == [0]


def test_a_batch_is_as_long_as_its_inputs_and_outputs_fit():
    class Ctx:
        device = torch.device("cpu")
        slots = [_slot(0, (1024, 1024))]  # 4 MiB a call
        output_nbytes = [4 << 20]

    budget = steady_batch.BATCH_BYTES["cpu"]
    assert steady_batch.calls_that_fit(Ctx(), 10_000) == budget // (8 << 20) - STEADY_WARMUP_CALLS
    assert steady_batch.calls_that_fit(Ctx(), 10) == 10

    class Huge(Ctx):
        output_nbytes = [budget // 4]  # four calls' outputs would fill it

    assert steady_batch.calls_that_fit(Huge(), 10_000) == 0  # too few to be worth a figure
