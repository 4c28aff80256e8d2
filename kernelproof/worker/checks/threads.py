"""A call leaves no thread behind, and starts none that finished before it returned (I5; class C2).

Work handed to a thread returns from the call at once and finishes outside the timed window. Live
threads are counted before and after; thread starts by solution code are counted by the audit
hook's wrappers, so a thread that was started and joined inside the call is seen too.
"""

from __future__ import annotations

from typing import Any

from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure
from kernelproof.worker.state import WorkerState


def check(state: WorkerState, before: tuple[set[int], int], what: str = "the call") -> dict[str, Any] | None:
    """A failed reply when solution code started threads since ``before``; else None."""
    leaked = state.threads_started(before) if state.candidate else 0
    if leaked:
        return failure(ReasonCode.THREAD_LEAK, f"{what} started or left {leaked} thread(s)")
    return None
