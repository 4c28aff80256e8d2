"""A baseline worker returns its allocator's cache after every request; a candidate's keeps it.

On a GPU an idle baseline worker outlives the evaluation that leased it, and the blocks its
allocator kept from a timed batch were memory no reservation counted (kernelproof/worker/message_loop.py).
"""

from __future__ import annotations

import pytest
import torch

from kernelproof.worker import message_loop
from kernelproof.worker.state import WorkerState


@pytest.fixture
def emptied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(1))
    return calls


@pytest.mark.parametrize("role, expected", [("baseline", 1), ("candidate", 0)])
def test_only_a_baseline_worker_returns_its_cache(role: str, expected: int, emptied: list[int]) -> None:
    message_loop.trim_idle_cache(WorkerState(role, "", (), None))
    assert len(emptied) == expected


def test_the_cache_is_returned_before_the_reply_leaves(
    emptied: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The serve loop trims inside the worker's own turn: before the parent has the reply and can
    start another program's timed window."""
    order: list[str] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: order.append("trim"))
    requests = iter([({"op": "profile", "nonce": 1}, []), ({"op": "bye", "nonce": 2}, [])])
    monkeypatch.setattr(message_loop.protocol, "recv", lambda sock: next(requests))
    monkeypatch.setattr(
        message_loop.protocol, "send", lambda sock, h, t=None: order.append(h.get("op", "hello"))
    )
    monkeypatch.setattr(message_loop, "answer", lambda table, state, op, h, t: ({"ok": True}, []))
    monkeypatch.setattr(message_loop, "environment", lambda state: {})
    message_loop.serve(None, WorkerState("baseline", "", (), None))  # type: ignore[arg-type]
    assert order == ["hello", "trim", "profile", "bye"]
