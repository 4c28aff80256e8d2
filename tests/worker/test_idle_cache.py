"""A baseline worker between evaluations lets go of its last batch and its allocator's cache; a
candidate's worker lets go of what its cases kept when it loads for its timed rounds.

On a GPU an idle baseline worker outlives the evaluation that leased it, and the batch it kept
(B1's buffers, the outputs a fetch reads) and the blocks its allocator cached were memory no
reservation counted (kernelproof/worker/message_loop.py, ``rest``). A candidate's cases' buffers
sat beside its timed batch (kernelproof/worker/loading.py, ``_let_go``).
"""

from __future__ import annotations

import pytest
import torch

from kernelproof.verdict import ReasonCode
from kernelproof.worker import loading, message_loop
from kernelproof.worker.state import WorkerState


def _with_a_batch(role: str, device: str) -> WorkerState:
    state = WorkerState(role, "", (), None)
    state.device = torch.device(device)
    state.keep = [([torch.ones(4)], [torch.zeros(4)])]
    state.timed = [[torch.zeros(4)]]
    return state


def test_a_resting_baseline_drops_its_batch_and_empties_its_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    emptied: list[int] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(1))
    state = _with_a_batch("baseline", "cuda")
    reply, out = message_loop.rest(state, {"op": "rest"}, [])
    assert reply == {"ok": True} and out == []
    assert state.keep == [] and state.timed == [] and emptied == [1]


def test_on_the_cpu_a_baseline_rests_without_a_device_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: pytest.fail("no device cache on the CPU"))
    state = _with_a_batch("baseline", "cpu")
    assert message_loop.rest(state, {"op": "rest"}, [])[0] == {"ok": True}
    assert state.keep == [] and state.timed == []


def test_a_candidate_is_never_rested() -> None:
    """B1 keeps a candidate's earlier buffers alive so that no output is served by address: a rest
    would let it reuse them. A candidate's worker ends with its evaluation instead."""
    state = _with_a_batch("candidate", "cpu")
    reply, _ = message_loop.rest(state, {"op": "rest"}, [])
    assert reply["ok"] is False and reply["code"] == ReasonCode.INTERNAL_ERROR.value
    assert state.keep and state.timed


def test_rest_is_a_request_the_worker_answers() -> None:
    assert message_loop.handlers()["rest"] is message_loop.rest


class _Stop(Exception):
    pass


def _loaded(monkeypatch: pytest.MonkeyPatch, state: WorkerState, header: dict) -> None:
    """``load`` up to the point where it configures the device (the rest needs a solution)."""

    def configure(state, h):
        raise _Stop

    monkeypatch.setattr(loading, "_configure", configure)
    with pytest.raises(_Stop):
        loading.load(state, {"op": "load", **header}, [])


def test_a_candidate_loading_for_its_timed_rounds_lets_go_of_its_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    emptied: list[int] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(1))
    state = _with_a_batch("candidate", "cuda")
    state.earlier_inputs = [torch.ones(4)]
    state.model = state.fn = torch.nn.Identity()
    _loaded(monkeypatch, state, {"let_go": True})
    assert state.keep == [] and state.timed == [] and state.earlier_inputs == []
    assert state.model is None and state.fn is None and emptied == [1]


def test_between_correctness_loads_a_candidate_keeps_its_earlier_buffers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run 2 of a case reuses the last case's first-run buffers (B1): a load among the cases keeps them."""
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: pytest.fail("nothing let go among the cases"))
    state = _with_a_batch("candidate", "cuda")
    state.earlier_inputs = [torch.ones(4)]
    _loaded(monkeypatch, state, {})
    assert state.keep and state.timed and state.earlier_inputs
