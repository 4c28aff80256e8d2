"""The local executor: one evaluation at a time per device, workers pre-spawned, baselines persistent.

Never two timed evaluations on one GPU at once (they would time each other). Each device has a
lock; ``evaluate_many`` runs one thread per device and hands out pairs as devices free up, so
verdicts stream back as they finish. A candidate worker is used for one evaluation and thrown
away (I8); the next one is already started, so torch's import and CUDA's initialisation are off
the critical path. Baseline workers run the task's own code, so they persist per (task, variant,
baseline) and serve every later evaluation of that task (agent loops, RL rollouts).
"""

from __future__ import annotations

import atexit
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import torch

from kernelproof.executors.process import SpawnSpec, WorkerProcess
from kernelproof.pipeline import WorkerSource

MAX_BASELINE_WORKERS = 8  # persistent baseline processes kept per pool (least recently used go first)


def resolve_devices(device: str) -> list[str]:
    """Devices an evaluation may use: "auto" is every visible GPU, else the CPU."""
    if device == "auto":
        if torch.cuda.is_available():
            return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        return ["cpu"]
    if device == "cuda":
        if not torch.cuda.is_available():
            from kernelproof.errors import UsageError

            raise UsageError("--device cuda was asked for, but no CUDA device is visible")
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return [device]


class LocalPool(WorkerSource):
    def __init__(self, prespawn: bool = True):
        self.prespawn = prespawn
        self._spare: dict[str, WorkerProcess] = {}
        self._baselines: dict[tuple, WorkerProcess] = {}
        self._order: list[tuple] = []
        self._lock = threading.Lock()
        self.locks: dict[str, threading.Lock] = {}

    def device_lock(self, device: str) -> threading.Lock:
        with self._lock:
            return self.locks.setdefault(device, threading.Lock())

    def candidate(self, device: str) -> WorkerProcess:
        with self._lock:
            w = self._spare.pop(device, None)
        if w is None or w.proc.poll() is not None:
            if w is not None:
                w.close()
            w = WorkerProcess(SpawnSpec("candidate", device))
        if self.prespawn:
            threading.Thread(target=self._spawn_spare, args=(device,), daemon=True).start()
        return w

    def _spawn_spare(self, device: str) -> None:
        w = WorkerProcess(SpawnSpec("candidate", device))
        with self._lock:
            old = self._spare.get(device)
            self._spare[device] = w
        if old is not None:
            old.close()

    def baseline(self, key: tuple, device: str) -> WorkerProcess:
        """A persistent baseline worker for (task, variant, baseline, device, ...).

        Only the current task's baselines stay alive on a device: each holds the task's weights and
        its allocator's cache on the GPU, and a bench over a whole suite would otherwise fill it.
        """
        with self._lock:
            w = self._baselines.get(key)
            if w is not None and w.proc.poll() is None:
                self._order.remove(key)
                self._order.append(key)
                return w
            evict = [
                self._baselines.pop(k) for k in list(self._baselines) if k[3] == device and k[0] != key[0]
            ]
            self._order = [k for k in self._order if k in self._baselines]
            while len(self._order) >= MAX_BASELINE_WORKERS:
                k = self._order.pop(0)
                evict.append(self._baselines.pop(k))
        for old in evict:
            old.close()
        w = WorkerProcess(SpawnSpec("baseline", device))
        with self._lock:
            self._baselines[key] = w
            self._order.append(key)
        return w

    def discard_baseline(self, key: tuple) -> None:
        with self._lock:
            w = self._baselines.pop(key, None)
            if key in self._order:
                self._order.remove(key)
        if w is not None:
            w.close()

    def close(self) -> None:
        with self._lock:
            workers = list(self._spare.values()) + list(self._baselines.values())
            self._spare.clear()
            self._baselines.clear()
            self._order.clear()
        for w in workers:
            w.close()


_DEFAULT: LocalPool | None = None


def default_pool() -> LocalPool:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = LocalPool()
        atexit.register(_DEFAULT.close)
    return _DEFAULT


def run_many(
    items: Iterable[object],
    devices: list[str],
    work: Callable[[object, str], object],
) -> Iterator[object]:
    """Run ``work(item, device)`` with one thread per device; yield results as they finish."""
    todo: queue.Queue = queue.Queue()
    count = 0
    for item in items:
        todo.put(item)
        count += 1
    done: queue.Queue = queue.Queue()

    def loop(device: str) -> None:
        while True:
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put(("ok", work(item, device)))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
                done.put(("err", exc))

    with ThreadPoolExecutor(max_workers=max(1, len(devices))) as ex:
        for d in devices:
            ex.submit(loop, d)
        for _ in range(count):
            kind, value = done.get()
            if kind == "err":
                raise value  # type: ignore[misc]
            yield value
