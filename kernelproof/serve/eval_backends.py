"""Where the service's evaluations run: the existing executors, reused, never rewritten.

Both take the bytes the service received (:class:`kernelproof.submission.Submission`), never a path
to read: the bytes judged, keyed and stored are the bytes posted.

- :class:`LocalBackend`: :func:`kernelproof.api.evaluate_submission` on this host's devices, ``per_device``
  evaluations in flight on each (the local executor's admission, gate and builders: their
  untimed stretches overlap, their timings never do, as ``evaluate_many`` runs a sweep).
- :class:`RayBackend`: :func:`kernelproof.executors.ray_executor.evaluate_many_ray`, one pair per
  call, from as many service threads as the cluster has slots; the bytes travel to the node and
  the node runs ``api.evaluate`` in its own sandboxed workers. With ``per_device`` N > 1 the
  backend keeps one actor per GPU for its whole life (``DeviceActors``), each evaluating N at
  once through one pool, so the device's gate keeps their timings apart.

Both answer from the results store first (the content hash of task, solution and settings), so a
repeated request costs no evaluation.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from kernelproof import api
from kernelproof.executors.local import DeviceState, LocalPool, resolve_devices
from kernelproof.measure.floor import for_device as launch_floor
from kernelproof.options import EvalOptions
from kernelproof.serve.config import DEFAULT_JOBS_PER_SLOT
from kernelproof.store import as_requested, open_store, served
from kernelproof.submission import Submission
from kernelproof.verdict import Verdict
from kernelproof.verify import footprint


class Backend(Protocol):
    def slots(self) -> list[str]: ...  # one entry (a device name) per evaluation in flight at once

    def stored(self, files: Submission, options: EvalOptions) -> Verdict | None: ...

    def evaluate(self, files: Submission, options: EvalOptions, slot: str) -> Verdict: ...

    def warm(self) -> str: ...  # before the service listens: what its first evaluations would wait for

    def device_states(self) -> list[DeviceState]: ...  # the gauges' source (none where not local)

    def close(self) -> None: ...


class LocalBackend:
    """This host's devices. `jobs_per_slot`: the service's threads for each of a device's
    ``per_device`` slots. A job waits outside its device's slot for its CUDA build
    (kernelproof/api.py builds before the slot is taken) and, standing aside, for the device
    memory of a large task (kernelproof/executors/device_memory.py): with one thread a slot, four
    slots on an H200 held two or three such waits at once while the small jobs queued behind them.
    The device's admission still runs ``per_device`` evaluations at once."""

    def __init__(self, options: EvalOptions, jobs_per_slot: int = DEFAULT_JOBS_PER_SLOT):
        self._devices = resolve_devices(options.device)
        self._per_device = options.per_device
        self._lanes = max(1, jobs_per_slot)
        self._pool = LocalPool()
        self._store = open_store(options.db) if options.db != "" else None

    def slots(self) -> list[str]:
        """The device of each of the service's threads: `jobs_per_slot` a slot."""
        return [d for d in self._devices for _ in range(self._per_device * self._lanes)]

    def stored(self, files: Submission, options: EvalOptions) -> Verdict | None:
        """A verdict the store holds for this evaluation on any of the service's devices (the key
        names the device: a verdict reached on one GPU answers for that GPU's model)."""
        if self._store is None or options.fresh:
            return None
        for device in self._devices:
            key = api.submission_key(files, options, device).digest
            found = served(self._store, key, options.serving_conditions())
            if found is not None:
                return as_requested(found, files.task.path, files.solution.path)
        return None

    def evaluate(self, files: Submission, options: EvalOptions, slot: str) -> Verdict:
        return api.evaluate_submission(files, options.replace(device=slot), pool=self._pool)

    def device_states(self) -> list[DeviceState]:
        return self._pool.device_states()

    def warm(self) -> str:
        """What a service's first evaluations would otherwise wait for, done before it listens:
        the meta device's first run (the imports every setup's footprint step leans on,
        kernelproof/verify/footprint.py ``warm_up``) and each GPU's launch floor (a process of its
        own, seconds), while the devices' spare workers start (torch's import and a CUDA context
        each). Says what it did."""
        started = time.monotonic()
        said: list[str] = []
        up: list[int] = []
        starts = [
            threading.Thread(target=lambda d=d: up.append(self._pool.warm(d, self._per_device)), daemon=True)
            for d in self._devices
        ]
        for t in starts:
            t.start()
        said.append(f"meta device ready in {footprint.warm_up():.1f} s")  # every setup's first step
        for device in self._devices:
            if device.startswith("cuda"):
                floor = launch_floor(device)
                said.append(f"{device} launch floor " + (f"{floor.us:.2f} us" if floor.us else floor.how))
        for t in starts:
            t.join()
        said.append(f"{sum(up)} spare worker(s) up")
        return f"warmed in {time.monotonic() - started:.1f} s: " + "; ".join(said)

    def close(self) -> None:
        self._pool.close()


class RayBackend:
    """Evaluations on a Ray cluster; the service joins it once (``ray.init``) and stays joined."""

    def __init__(self, options: EvalOptions, address: str | None, slots: int = 0):
        from kernelproof.executors.ray_executor import RayOptions, _import_ray

        self._ray = _import_ray()
        if not self._ray.is_initialized():
            kwargs = {"address": address} if address else {"include_dashboard": False}
            self._ray.init(**kwargs)
        self._ray_options = RayOptions(address=address)
        self._actors = None
        if options.per_device > 1:
            from kernelproof.executors.ray_executor import DeviceActors

            self._actors = DeviceActors(self._ray, options, self._ray_options, api.evaluate)
            count = slots or self._actors.capacity
        else:
            cluster = self._ray.cluster_resources()
            gpus, cpus = int(cluster.get("GPU", 0)), int(cluster.get("CPU", 0))
            count = slots or (gpus if gpus and options.device != "cpu" else max(1, cpus))
        self._slots = ["ray"] * count

    def slots(self) -> list[str]:
        return list(self._slots)

    def stored(self, files: Submission, options: EvalOptions) -> Verdict | None:
        return None  # the Ray executor answers from the driver's store itself

    def evaluate(self, files: Submission, options: EvalOptions, slot: str) -> Verdict:
        from kernelproof.executors.ray_executor import evaluate_many_ray

        pairs = [(files.task, files.solution)]  # bytes: the driver reads no file (ray_executor._job)
        return next(
            iter(
                evaluate_many_ray(
                    pairs, options, self._ray_options, evaluate=api.evaluate, actors=self._actors
                )
            )
        )

    def warm(self) -> str:
        return ""  # the cluster's nodes start their own workers

    def device_states(self) -> list[DeviceState]:
        return []  # each node's admission is its own process's (its actors'), not read from here

    def close(self) -> None:
        if self._actors is not None:
            self._actors.close()
