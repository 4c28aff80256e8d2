"""The parent's process-wide torch state, held by one evaluation at a time.

torch's numeric flags (TF32, cuDNN) and its default random generators belong to the process, and
with ``per_device`` above 1 several evaluations set up their tasks in threads of one parent. Left
unguarded, one evaluation's TF32 pin (its downgrade check) is in force while another computes its
float32 reference, which then carries TF32's error and widens the tolerance a TF32 candidate is
judged by; two pins that overlap restore each other's values and leave TF32 on after both; and one
evaluation's ``torch.manual_seed`` lands between another's seed and its draw, so a seed no longer
names its case. Every block that sets or relies on that state holds :data:`LOCK`: pinned flags
(flags.pinned) and seeded draws (:func:`seeded`). It is reentrant: a seeded block may run a pinned
forward.

Every reference and oracle run of the parent holds it (its flags are pinned), so evaluations in
flight wait for one another here: :func:`held` hands the seconds each wait took to an observer of
the evaluation's own context (kernelproof/verify/steps.py records them as a ``lock_wait`` step
under the step that waited), so a sweep's cost table shows how much of its time is this queue.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator

import torch

LOCK = threading.RLock()

# Bound once, as the worker binds it (worker/loading.py): torch rebinds torch.manual_seed when
# torch._dynamo is first imported, and the worker, which imports this module through numeric_flags.py,
# identity-checks every name its harness reads from a module.
_manual_seed = torch.manual_seed


_wait_observer: contextvars.ContextVar[Callable[[float], None] | None] = contextvars.ContextVar(
    "kernelproof_lock_waits", default=None
)


def observe_waits(observer: Callable[[float], None] | None) -> contextvars.Token:
    """Hand the seconds this context waits for :data:`LOCK` to `observer` (reset with the token)."""
    return _wait_observer.set(observer)


def stop_observing(token: contextvars.Token) -> None:
    _wait_observer.reset(token)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """:data:`LOCK` for the block; the seconds waited for it go to this context's observer."""
    observer = _wait_observer.get()
    if observer is None:
        with LOCK:
            yield
        return
    t0 = time.perf_counter()
    with LOCK:
        observer(time.perf_counter() - t0)
        yield


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's default generators and hold them for the block: what it draws follows `seed`."""
    with held():
        _manual_seed(seed)
        yield
