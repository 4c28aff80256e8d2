"""What a task's reference does, found once per task in this process and served to its candidates.

Setup asks the reference two questions at the probe's inputs before any case: does it write to an
argument the task does not declare in place (``inplace``), and do its outputs depend on the random
number generator, or only differ by rounding between runs (``randomness``: the noise every
comparison allows). The answers belong to the task (its content, shape variant, mode, device
type and precision contract), not to a candidate: a forward's dropout, atomics and in-place
writes do not change with the weights an evaluation draws. Asked per evaluation they were six
reference and oracle runs of the task's largest tensors each time: on an H200, 26 s of the 390 s
that level 1's twelve 6.4 GB tasks spent on their own over 62 candidates (results/h200-2026-12-06-h).

One answer per key at a time (kernelproof/verify/single_flight.py): candidates of one task that
arrive together wait for the first one's answer. An answer that raised (out of memory) is not
kept, so the next evaluation asks again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, TypeVar

from kernelproof.verify.single_flight import KeyedLocks

if TYPE_CHECKING:
    from kernelproof.task import Task
    from kernelproof.verify.case_plan import VariantContext

T = TypeVar("T")

_KEPT: dict[Hashable, object] = {}
_IN_FLIGHT = KeyedLocks()


def once(question: str, task: Task, ctx: VariantContext, answer: Callable[[], T]) -> T:
    """The answer to ``question`` about this task's reference, computed by ``answer`` the first time
    (per task content, variant, mode, device type and precision contract) and kept."""
    key = (question, task.sha256, ctx.variant, ctx.mode, ctx.device.type, ctx.contract_key)
    with _IN_FLIGHT.hold(key):
        if key not in _KEPT:
            _KEPT[key] = answer()
        return _KEPT[key]  # type: ignore[return-value]


def forget() -> None:
    """Every kept answer dropped (tests; a long-lived process that reloads its tasks)."""
    _KEPT.clear()
