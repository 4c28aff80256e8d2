"""The local executor: evaluations admitted per device, workers pre-spawned, baselines persistent.

Never two timed evaluations on one GPU at once (they would time each other), nor any other work
of ours on it while one is timed: each device has a gate (host/gate.py) that evaluations
enter shared for untimed GPU work and exclusively for timing. ``evaluate_many`` runs
``per_device`` threads per device (one by default: evaluations one after another) and hands out
pairs as they free up, so verdicts stream back as they finish. A candidate worker is used for one evaluation and thrown
away (I8); the next one is already started, so torch's import and CUDA's initialisation are off
the critical path. Baseline workers run the task's own code, so they persist per (task, variant,
baseline) and serve every later evaluation of that task (agent loops, RL rollouts).
"""

from __future__ import annotations

import atexit
import contextvars
import dataclasses
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path

import torch

from kernelproof.build import (
    BuildCache,
    BuilderPool,
    BuildOptions,
    BuildResult,
    default_cache_root,
    device_arch,
)
from kernelproof.errors import UsageError
from kernelproof.evaluate.build import PendingBuild, needs_build
from kernelproof.evaluate.workers import WorkerSource
from kernelproof.executors.device_memory import DeviceMemory, MemoryState, Unlimited
from kernelproof.executors.device_memory import for_device as memory_for
from kernelproof.host.admission import Admission, SlotState
from kernelproof.host.gate import DeviceGate
from kernelproof.host.process import SpawnSpec, WorkerDied, WorkerProcess
from kernelproof.measure.quiet import quiet_probe
from kernelproof.options import EvalOptions
from kernelproof.solution import SolutionFile, read_solution

MAX_BASELINE_WORKERS = 8  # persistent baseline processes kept per pool (least recently used go first)
# Started workers kept waiting per device. A worker takes longer to start on a GPU machine (torch,
# CUDA, CUPTI: about 10 s on the H200 host) than an evaluation takes to reach its timing (6-7 s),
# so each candidate spare gets two evaluations to start in, paused while the GPU is timed. With
# `per_device` evaluations in flight, workers are taken that many times as often: as many more spares.
CANDIDATE_SPARES = {"cuda": 2, "cpu": 1}


@dataclasses.dataclass(frozen=True)
class DeviceState:
    """One device of a pool at one moment: its admission's slots and its memory's reservations
    (None: nothing of that kind made for it yet). Read for the service's gauges: where an
    evaluation's seconds go between its arrival and its verdict is otherwise invisible from outside."""

    device: str
    slots: SlotState | None
    memory: MemoryState | None


def resolve_devices(device: str) -> list[str]:
    """Devices an evaluation may use: "auto" is every visible GPU, else the CPU.

    The one place a ``--device`` is checked (UsageError): its form, and that the GPU it names exists.
    """
    if device == "auto":
        if torch.cuda.is_available():
            return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        return ["cpu"]
    if device == "cpu":
        return [device]
    index = device[len("cuda:") :] if device.startswith("cuda:") else None
    if device != "cuda" and not (index and index.isdigit()):
        raise UsageError(f"--device must be auto, cpu, cuda or cuda:N, not {device!r}")
    if not torch.cuda.is_available():
        raise UsageError(f"--device {device} was asked for, but no CUDA device is visible")
    if index is None:
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if int(index) >= torch.cuda.device_count():
        raise UsageError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    return [f"cuda:{int(index)}"]


def default_build_workers() -> int:
    """Builder processes when not asked: one per 4 cores (each runs up to 3 compiler jobs), at least 1."""
    return max(1, (os.cpu_count() or 1) // 4)


class LocalPool(WorkerSource):
    """Workers for one process's evaluations, and the builder pool their CUDA and native solutions share.

    `build_options` fixes the builders' options (the target architecture, say); by default the
    architecture is read from the evaluation's device.
    """

    def __init__(self, prespawn: bool = True, build_options: BuildOptions | None = None):
        self.prespawn = prespawn
        self.build_options = build_options
        # (role, device) -> started, unused workers, oldest first
        self._spare: dict[tuple[str, str], list[WorkerProcess]] = {}
        self._starting: dict[tuple[str, str], int] = {}  # spares whose process is being created
        self._paused: dict[str, list[WorkerProcess]] = {}  # device -> spares stopped while it is timed
        self._baselines: dict[tuple, WorkerProcess] = {}  # key -> its idle baseline worker (one at most)
        self._leased: dict[WorkerProcess, tuple] = {}  # baseline workers in an evaluation's hands -> key
        self._order: list[tuple] = []  # keys with idle workers, least recently released first
        self._lock = threading.Lock()
        self._slots: dict[tuple[str, int], Admission] = {}
        self._gates: dict[str, DeviceGate] = {}
        self._memory: dict[str, DeviceMemory | Unlimited] = {}
        self._builders: dict[tuple, BuilderPool] = {}
        self._pending: dict[tuple, PendingBuild] = {}  # builds submitted ahead of their evaluation
        self._spawning: dict[str, list[threading.Thread]] = {}  # device -> spare starts under way

    def admission(self, device: str, slots: int = 1) -> Admission:
        """The device's admission at `slots` evaluations at once (``per_device``), one per device
        and setting for every evaluation of this pool (kernelproof/host/admission.py).

        Only a throttle: what keeps timing honest is the device's :meth:`gate`, which every
        evaluation passes whatever its admission."""
        with self._lock:
            return self._slots.setdefault((device, slots), Admission(slots))

    def device_slots(self, device: str, slots: int = 1) -> AbstractContextManager[None]:
        """One slot of the device's admission, for one evaluation (``with pool.device_slots(...)``)."""
        return self.admission(device, slots).slot()

    def memory(self, device: str) -> DeviceMemory | Unlimited:
        """The device's memory admission, one per device for every evaluation of this pool."""
        with self._lock:
            budget = self._memory.get(device)
            if budget is None:
                budget = self._memory[device] = memory_for(device)
            return budget

    def device_states(self) -> list[DeviceState]:
        """Each device this pool has admitted evaluations to, as it stands now."""
        with self._lock:
            slots = {device: admission for (device, _), admission in self._slots.items()}
            memory = dict(self._memory)
        return [
            DeviceState(
                device,
                slots[device].state() if device in slots else None,
                memory[device].state() if device in memory else None,
            )
            for device in sorted(set(slots) | set(memory))
        ]

    def device_alone(self, device: str, slots: int) -> AbstractContextManager[None]:
        """Admission to a device with no other evaluation on it: new ones wait, and those in flight
        (running or waiting for a build) finish first."""
        return self.admission(device, slots).alone()

    def gate(self, device: str) -> DeviceGate:
        """The device's gate, one per device for every evaluation of this pool; it may lend a hung
        candidate's worker to a waiting timing (host/gate.py)."""
        with self._lock:
            gate = self._gates.get(device)
            if gate is None:
                gate = self._gates[device] = DeviceGate(quiet=quiet_probe(device))
            return gate

    def candidate(self, device: str, timed: bool = True) -> WorkerProcess:
        """A started candidate worker. Workers start now for what comes next, while this evaluation
        sets up and checks correctness: candidate workers for the next evaluations and, when this
        one will be timed and none waits, a baseline worker for its timing. None may be starting
        while the GPU is timed, where a process creating a CUDA context would disturb the
        measurement: :meth:`settle` stops those still starting first."""
        w = self._take("candidate", device)
        if self.prespawn:
            self._start_spares_for(device, timed)
        return w

    def _start_spares_for(self, device: str, timed: bool) -> None:
        """The spares this device's next evaluations take: candidates for as many as are admitted
        at once, and a baseline where they will be timed."""
        depth = CANDIDATE_SPARES["cpu" if device == "cpu" else "cuda"]
        with self._lock:  # the most evaluations admitted on this device at once
            depth *= max((n for d, n in self._slots if d == device), default=1)
        self._start_spares("candidate", device, depth)
        if timed:
            self._start_spares("baseline", device, 1)

    def warm(self, device: str, slots: int) -> int:
        """Start the spares this device's first evaluations would take, and wait until they are up
        (a long-lived service, before it listens): its first batch then finds its workers started,
        as every later batch does. `slots`: the evaluations admitted on it at once. Returns how many
        spares are up (none without ``prespawn``)."""
        self.admission(device, slots)  # the spares' depth follows it
        if not self.prespawn:
            return 0
        self._start_spares_for(device, timed=True)
        with self._lock:
            threads = list(self._spawning.get(device, []))
        for t in threads:
            t.join()
        with self._lock:
            spares = [w for (_, d), ws in self._spare.items() if d == device for w in ws]
        up = 0
        for w in spares:
            try:
                w.wait_ready()
                up += 1
            except WorkerDied:
                pass  # whoever takes it replaces it (_take)
        return up

    def settle(self, device: str) -> None:
        """Return once no worker is starting on this device: called before timing.

        A spare's start (torch's import, CUDA's initialisation, a context on the GPU) runs while an
        evaluation sets up and checks correctness; when those were quicker than the start, it would
        still be running when the rounds begin. A spare still starting is stopped (SIGSTOP) until
        :meth:`resume`, so the evaluation does not wait for a worker that only a later evaluation
        needs. A baseline spare that this evaluation's timing does need is resumed when taken
        (:meth:`baseline`) and finishes starting before its program loads, before any round.
        """
        with self._lock:
            threads = self._spawning.pop(device, [])
        for t in threads:  # process creation only: quick
            t.join()
        with self._lock:
            spares = [w for (_, d), ws in self._spare.items() if d == device for w in ws]
        for w in spares:
            if not w.ready_now():
                w.pause()
                with self._lock:
                    self._paused.setdefault(device, []).append(w)

    def resume(self, device: str) -> None:
        """Let the spares :meth:`settle` stopped go on starting (after timing)."""
        with self._lock:
            paused = self._paused.pop(device, [])
        for w in paused:
            w.resume()

    def _start_spares(self, role: str, device: str, depth: int) -> None:
        """Start spares of this role until `depth` are waiting or starting."""
        with self._lock:
            key = (role, device)
            missing = depth - len(self._spare.get(key, [])) - self._starting.get(key, 0)
            if missing <= 0:
                return
            self._starting[key] = self._starting.get(key, 0) + missing
            threads = [
                threading.Thread(target=self._spawn_spare, args=(role, device), daemon=True)
                for _ in range(missing)
            ]
            self._spawning.setdefault(device, []).extend(threads)
        for t in threads:
            t.start()

    def _take(self, role: str, device: str) -> WorkerProcess:
        """The oldest started worker waiting for this role and device (its interpreter, torch and
        CUDA context up or coming up: seconds each on a GPU machine), else a new one."""
        with self._lock:
            waiting = self._spare.get((role, device)) or []
            w = waiting.pop(0) if waiting else None
        if w is not None:
            w.resume()  # stopped only while its device was timed; a no-op otherwise
        if w is None or w.proc.poll() is not None:
            if w is not None:
                w.close()
            w = WorkerProcess(SpawnSpec(role, device))
        return w

    def _spawn_spare(self, role: str, device: str) -> None:
        w = None
        try:
            w = WorkerProcess(SpawnSpec(role, device))
        finally:  # one step, so no count in _start_spares misses it or sees it twice
            with self._lock:
                self._starting[(role, device)] -= 1
                if w is not None:
                    self._spare.setdefault((role, device), []).append(w)

    def baseline(self, key: tuple, device: str) -> WorkerProcess:
        """A persistent baseline worker for (task, variant, baseline, device, ...), leased to the
        caller until :meth:`release_baseline`.

        An evaluation loads its baselines' programs in a shared turn and times them later, alone
        (evaluate/device_turns.py); in between, another evaluation's shared turn may ask for a
        baseline too. A leased worker is therefore never handed out, reloaded or closed: the other
        evaluation gets an idle worker of the same key, or a new one. Only the current task's idle
        baselines stay alive on a device: each holds the task's weights and its program on the GPU
        (its last batch and allocator's cache let go when it rests: :meth:`release_baseline`),
        memory no evaluation's reservation counts once it has ended.
        """
        with self._lock:
            w = self._baselines.pop(key, None)
            if w is not None and w.proc.poll() is None:
                self._leased[w] = key
                return w
            evict = [w] if w is not None else []  # died idle
            evict += [
                self._baselines.pop(k) for k in list(self._baselines) if k[3] == device and k[0] != key[0]
            ]
            self._order = [k for k in self._order if k in self._baselines]
            while len(self._order) >= MAX_BASELINE_WORKERS:
                evict.append(self._baselines.pop(self._order.pop(0)))
        for old in evict:
            old.close()
        w = self._take("baseline", device)  # a new task's first baseline starts from a waiting worker
        with self._lock:
            self._leased[w] = key
        return w

    def release_baseline(self, worker: WorkerProcess, keep: bool = True) -> None:
        """The lease of :meth:`baseline` ended: the worker lets go of its last batch and its
        allocator's cache (the ``rest`` request: kernelproof/worker/message_loop.py), then waits,
        idle, for its key's next timing. At most one waits per key; it is closed instead where one
        already waits, where it died or did not rest, or where `keep` is False (an evaluation
        larger than its share of the device)."""
        with self._lock:
            key = self._leased.pop(worker, None)
            if key is None:
                return  # discarded, or never leased here
            wanted = keep and worker.proc.poll() is None and key not in self._baselines
        if wanted and _rested(worker):
            with self._lock:
                if key not in self._baselines:
                    self._baselines[key] = worker
                    self._order = [k for k in self._order if k != key] + [key]
                    return
        worker.close()

    def discard_baseline(self, key: tuple, worker: WorkerProcess | None = None) -> None:
        """Close a baseline worker that failed (`worker`, leased), or every idle one of `key`."""
        with self._lock:
            if worker is not None:
                self._leased.pop(worker, None)
            else:
                worker = self._baselines.pop(key, None)
            self._order = [k for k in self._order if k in self._baselines]
        if worker is not None:
            worker.close()

    # -- builds ------------------------------------------------------------------------------
    def builder_pool(self, device: str, options: EvalOptions) -> BuilderPool:
        """The builder pool for this device's architecture and these options (one per process, reused)."""
        opts = self.build_options or BuildOptions()
        arch = opts.arch if opts.arch is not None else device_arch(device)
        root = Path(options.build_cache) if options.build_cache else default_cache_root()
        workers = options.build_workers or default_build_workers()
        key = (str(root), arch, workers, options.timeout_s)
        with self._lock:
            pool = self._builders.get(key)
            if pool is None:
                pool = BuilderPool(
                    BuildCache(root),
                    workers,
                    device=device,
                    timeout_s=options.timeout_s,
                    options=dataclasses.replace(opts, arch=arch),
                )
                self._builders[key] = pool
        return pool

    def build(self, solution: SolutionFile, device: str, options: EvalOptions) -> PendingBuild:
        """The build of the solution's bytes as its evaluation read them: one submitted earlier for
        the same bytes (the key is their hash), or one submitted now."""
        pool = self.builder_pool(device, options)
        with self._lock:
            pending = self._pending.pop((id(pool), solution.sha256), None)
        if pending is None or pending.future.cancelled():
            pending = _pending_build(pool, solution)
        return pending

    def prebuild(
        self, solutions: Iterable[str | SolutionFile], device: str, options: EvalOptions
    ) -> dict[str, PendingBuild]:
        """Submit the builds of a batch up front (CUDA and native solutions; others are skipped),
        so they run on the CPU cores while earlier evaluations hold the GPU. Returns them by path.
        Each is built from the bytes read here (or given), under their hash: an evaluation of other
        bytes finds none of them and builds its own."""
        pool = self.builder_pool(device, options)
        out: dict[str, PendingBuild] = {}
        for given in solutions:
            try:
                sol = given if isinstance(given, SolutionFile) else read_solution(given)
            except Exception:  # noqa: BLE001 - a missing file is reported by its own evaluation
                continue
            path = sol.path
            if not needs_build(sol.triage.backend) or sol.triage.syntax_error:
                continue  # (a CUDA build this machine cannot do is refused at once, and recorded)
            key = (id(pool), sol.sha256)
            with self._lock:
                pending = self._pending.get(key)
                if pending is None:
                    pending = _pending_build(pool, sol)
                    self._pending[key] = pending
            out[path] = pending
        return out

    def close(self) -> None:
        with self._lock:
            workers = [w for ws in self._spare.values() for w in ws] + list(self._baselines.values())
            workers += list(self._leased)
            builders = list(self._builders.values())
            self._spare.clear()
            self._paused.clear()
            self._baselines.clear()
            self._leased.clear()
            self._order.clear()
            self._builders.clear()
            self._pending.clear()
        for w in workers:
            w.resume()  # a stopped worker cannot say goodbye
            w.close()
        for b in builders:
            b.shutdown(wait=True, cancel_futures=True)


REST_TIMEOUT_S = 30.0  # a baseline worker's rest: freeing its last batch takes milliseconds


def _rested(worker: WorkerProcess) -> bool:
    """Did the baseline worker let go of its last batch and cache (memory no reservation counts
    once its lease ends)? One that did not, or broke, is closed rather than kept idle."""
    try:
        reply, _ = worker.request({"op": "rest"}, [], REST_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - a worker that cannot rest is closed
        return False
    return bool(reply.get("ok"))


def _pending_build(pool: BuilderPool, solution: SolutionFile) -> PendingBuild:
    return PendingBuild(pool, solution.path, _submit(pool, solution.path, solution.data), solution.data)


def _submit(pool: BuilderPool, path: str, data: bytes) -> Future[BuildResult]:
    """A cache hit at once (never queued behind other builds), else the pool's build of `data`."""
    try:
        hit = pool.cached(path, data)
    except OSError:
        hit = None
    if hit is None:
        return pool.submit(path, data)
    done: Future[BuildResult] = Future()
    done.set_result(hit)
    return done


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
    ready: Callable[[object], bool] | None = None,
) -> Iterator[object]:
    """Run ``work(item, device)`` with one thread per device; yield results as they finish.

    With `ready`, a device takes the first item that is ready (its build is done), else the first
    item: evaluations follow the builds' completion order, and the GPU waits only when none is built.
    Closing the iterator early starts nothing new: it returns once the items in flight are done.
    """
    todo = list(items)
    count = len(todo)
    take = threading.Lock()
    done: queue.Queue = queue.Queue()

    def next_item() -> tuple[bool, object]:
        with take:
            if not todo:
                return False, None
            index = next((i for i, it in enumerate(todo) if ready(it)), 0) if ready else 0
            return True, todo.pop(index)

    def loop(device: str) -> None:
        while True:
            found, item = next_item()
            if not found:
                return
            try:
                done.put(("ok", work(item, device)))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
                done.put(("err", exc))

    with ThreadPoolExecutor(max_workers=max(1, len(devices))) as ex:
        for d in devices:
            # each thread in a copy of the caller's context: a progress sink the caller set
            # (kernelproof/evaluate/phase_progress.py) hears the evaluations' phases
            ex.submit(contextvars.copy_context().run, loop, d)
        try:
            for _ in range(count):
                kind, value = done.get()
                if kind == "err":
                    raise value  # type: ignore[misc]
                yield value
        finally:  # a consumer that stops early (or an error) leaves only the items in flight to finish
            with take:
                todo.clear()
