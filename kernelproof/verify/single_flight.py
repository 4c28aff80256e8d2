"""One computation per key at a time in this process: the second caller waits for the first.

Why: the per-task work an evaluation shares with the other candidates of its task (the audit of a
variant: whether the task can tell a right answer from a wrong one) is cached by key once done,
but the candidates of one task usually arrive together (a training batch, a GRPO group) and, with
several evaluations in flight, each missed the cache and did the work again. With a key's lock
held around "look up, else compute and keep", the later callers find what the first kept. Nothing
is skipped: a caller that waited is served exactly as a caller that came after the work was kept
(and its checks of a served result still run).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager


class KeyedLocks:
    """A lock per key, made on first use and dropped when no caller holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, threading.Lock] = {}
        self._users: dict[Hashable, int] = {}

    @contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
            self._users[key] = self._users.get(key, 0) + 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                self._users[key] -= 1
                if not self._users[key]:
                    del self._users[key], self._locks[key]

    def __len__(self) -> int:
        """Keys held or waited for now."""
        with self._guard:
            return len(self._locks)
