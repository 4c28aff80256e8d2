"""A timed worker keeps its last batch alive while it draws the next only where that batch is small.

On an H200, KernelBench level 1's 6.4 GB tasks held two batches in each timed worker at once (49 GiB
in the candidate's, 37 GiB and a failed 6 GiB allocation in eager's), where the timed rounds'
reservation counts one: eager was dropped mid-run, and an honest kernel timed alone against eager
and torch.compile was called too_large. A large batch now goes before the next is drawn; a small
one is kept (B1's fresh addresses), and the reservation counts it.
"""

from __future__ import annotations

import pytest
import torch

from kernelproof import inputs
from kernelproof.verify import footprint
from kernelproof.worker import state as state_module
from kernelproof.worker import timed_calls
from kernelproof.worker.state import WorkerState, held_bytes


class _Drawn(Exception):
    """Raised where a timed request would draw its first inputs."""


def _state_with_batch(elements: int) -> WorkerState:
    state = WorkerState("candidate", "", (), None)
    x, y = torch.ones(elements), torch.zeros(elements)
    state.keep = [([x], y)]
    state.timed = [[y]]
    return state


def test_held_bytes_is_the_larger_of_the_storages_and_the_shapes_each_counted_once() -> None:
    x = torch.ones(256)
    assert held_bytes([(x, x), [x], 3, None]) == 256 * 4  # one tensor, one storage: once
    assert held_bytes([x[:10]]) == 256 * 4  # a small view holds its whole storage
    # an output written into its input (a view of it): one storage, but two tensors by their shapes,
    # as the parent's reservation counts a call's inputs and outputs
    assert held_bytes([(x, x.view(16, 16))]) == 2 * 256 * 4
    assert held_bytes([[x[:10]], (torch.zeros(64),)]) == 256 * 4 + 64 * 4
    assert held_bytes([]) == 0


def test_a_large_batch_goes_and_a_small_one_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "KEPT_BATCH_BYTES", 1000)
    small = _state_with_batch(100)  # 800 bytes: inputs and outputs
    small.let_go_of_a_large_batch()
    assert small.keep and small.timed
    large = _state_with_batch(200)  # 1,600 bytes
    large.let_go_of_a_large_batch()
    assert large.keep == [] and large.timed == []


def test_a_time_request_lets_a_large_batch_go_before_it_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "KEPT_BATCH_BYTES", 1000)
    state = _state_with_batch(200)
    state.channel = lambda said: {}
    seen: list[list] = []

    def batch(st, n, seed):
        seen.append(list(st.keep))
        raise _Drawn

    monkeypatch.setattr(timed_calls, "_Batch", batch)
    header = {"op": "time", "calls": 2, "seed": 1, "slots": []}
    with pytest.raises(_Drawn):
        timed_calls.time_calls(state, header, [])
    assert seen == [[]]


def test_a_steady_request_lets_a_large_batch_go_before_it_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "KEPT_BATCH_BYTES", 1000)
    state = _state_with_batch(200)
    seen: list[list] = []

    def draw(*args, **kwargs):
        seen.append(list(state.keep))
        raise _Drawn

    monkeypatch.setattr(timed_calls, "timed_input_batch", draw)
    with pytest.raises(_Drawn):
        timed_calls.steady(state, {"op": "steady", "calls": 4, "seed": 1, "slots": []}, [])
    assert seen == [[]]


def test_the_reservation_counts_a_kept_small_batch_and_not_a_large_one() -> None:
    small = footprint.timed_worker_share(1000, 0, 1000, programs=2, calls=5)
    assert small == 2 * (5 * 2000) * 2  # each program: its batch and the last one, kept
    big = inputs.KEPT_BATCH_BYTES  # one call's inputs and outputs past the bound
    assert footprint.timed_worker_share(big, 10, big, programs=3, calls=2) == 3 * (10 + 2 * 2 * big)


def test_held_bytes_counts_a_tensor_without_a_plain_storage_by_its_size() -> None:
    sparse = torch.eye(8).to_sparse()  # no storage to read: 64 elements of 4 bytes, as its size says
    assert held_bytes([sparse, (sparse,)]) == 256
    assert held_bytes([torch.ones(10), sparse]) == 40 + 256
