"""Evaluations on a Ray cluster: never two timings on one GPU at once, results kept by the driver.

With ``per_device`` 1 each (task, solution) pair becomes one Ray task that asks for a whole GPU
(``num_gpus=1``; one CPU on a cluster without GPUs), so Ray never runs two evaluations on one
device. With ``per_device`` N > 1 each GPU (or CPU) gets one long-lived Ray actor holding a
:class:`~kernelproof.executors.local.LocalPool` and running N evaluations at once: the device's
gate (shared for untimed GPU work, exclusive for timing), its admission and its memory
reservations then live in one process, as they do for the local executor, so the evaluations on
a GPU overlap only where the local executor lets them and their timings never do. The task
and solution travel as bytes (nodes need not share a file system). The node runs
:func:`kernelproof.api.evaluate` with its own store off (the candidate still runs in the node's
untrusted workers, I1/I8) and returns the verdict document. The driver writes each verdict to its
store as it arrives, so a crash of the driver or the cluster keeps every result finished so far, and
resubmits an evaluation whose Ray worker or node died. Verdicts are yielded as they finish, in the
same shape as :func:`kernelproof.api.evaluate_many`.

Ray is the optional ``ray`` extra and is imported only when this executor runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from kernelproof.code_identity import this_source
from kernelproof.options import EvalOptions
from kernelproof.store import as_requested, keep, served
from kernelproof.submission import Submitted
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode, Verdict, from_json

RAY_HINT = 'the Ray executor needs Ray: pip install -e ".[ray]" (from the kernelproof checkout)'
# Errors that mean the evaluation's process or node went away, not that the evaluation failed:
# the same evaluation is submitted again (names looked up so older Ray versions still load).
_LOST_NAMES = (
    "WorkerCrashedError",
    "NodeDiedError",
    "RayActorError",
    "ObjectLostError",
    "OwnerDiedError",
    "LocalRayletDiedError",
    "OutOfMemoryError",
)

Evaluator = Callable[[Any, Any, EvalOptions], Verdict]


class VerdictStore(Protocol):
    """What the driver needs of a store (``kernelproof.store.Store`` has it)."""

    def get(self, key: str) -> Verdict | None: ...

    def put(self, key: str, verdict: Verdict, *, options_sha256: str = "", limits: Any = None) -> Any: ...


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None  # None: start a private local Ray; "auto": the running `ray start --head`
    max_retries: int = 3  # resubmissions of one evaluation whose worker or node died
    max_in_flight: int | None = None  # evaluations submitted at once; None: twice the cluster's slots
    # (a slot: one GPU, or one CPU, times ``per_device``)
    resource: str = "auto"  # "gpu" | "cpu" | "auto" (gpu when the cluster has GPUs and device is not cpu)
    runtime_env: dict[str, Any] | None = None  # Ray runtime environment for the nodes (env_vars, ...)


@dataclass(frozen=True)
class _Job:
    index: int  # position in the input
    task: str  # task path as given
    solution: str  # solution path as given
    task_bytes: bytes
    solution_bytes: bytes
    key: str  # the store's key for this evaluation on this cluster
    attempts: int = 0  # submissions so far


def evaluate_many_ray(
    pairs: Iterable[tuple[str | Path | Submitted, str | Path | Submitted]],
    options: EvalOptions | None = None,
    ray_options: RayOptions | None = None,
    *,
    store: VerdictStore | None = None,
    evaluate: Evaluator,
    actors: DeviceActors | None = None,
) -> Iterator[Verdict]:
    """Evaluate every pair on the Ray cluster; yield verdicts as they finish.

    With ``options.per_device`` above 1 the pairs go to one actor per device
    (:class:`DeviceActors`, started here and stopped at the end unless ``actors`` is given: a
    service keeps one set for all its calls), and ``evaluate`` is called with the actor's pool
    (``pool=``), as :func:`kernelproof.api.evaluate` takes it.

    ``store`` (default: the results store at ``options.db``; none when ``options.db == ""``)
    receives every verdict as it arrives and, unless ``options.fresh``, serves pairs it already
    holds, so re-running an interrupted batch only evaluates what is missing. ``evaluate`` runs on
    the node (:func:`kernelproof.api.evaluate`, which the caller passes: executors sit below the api). An evaluation whose worker or node died
    ``max_retries + 1`` times is yielded as an ``error`` verdict (``missing_result``) and not
    stored. An exception raised by the evaluator itself is a harness bug and propagates.
    """
    ray = _import_ray()
    options = options or EvalOptions()
    ropts = ray_options or RayOptions()
    if store is None:
        store = open_store(options.db)
    started_here = _connect(ray, ropts)
    own_actors = actors is None and options.per_device > 1
    try:
        if own_actors:
            actors = DeviceActors(ray, options, ropts, evaluate)
        dispatch = (
            _ActorDispatch(actors) if actors is not None else _TaskDispatch(ray, options, ropts, evaluate)
        )
        yield from _run(ray, pairs, options, ropts, store, dispatch)
    finally:
        if own_actors and actors is not None:
            actors.close()
        if started_here:
            ray.shutdown()


class _TaskDispatch:
    """One Ray task per evaluation, asking for a whole GPU (or one CPU): one at a time per device."""

    def __init__(self, ray: Any, options: EvalOptions, ropts: RayOptions, evaluate: Evaluator):
        resources, self.device, self.slots, self.accelerators = _placement(ray, options, ropts)
        self._remote = ray.remote(_evaluate_on_node).options(
            max_retries=0, retry_exceptions=False, **resources
        )
        self._evaluate = evaluate

    def submit(self, names: tuple[str, str], job: _Job, options: EvalOptions) -> Any:
        return self._remote.remote(names, job.task_bytes, job.solution_bytes, options, self._evaluate)

    def finished(self, ref: Any, lost: bool) -> None:
        pass  # nothing outlives a task


class _ActorDispatch:
    """Evaluations handed to the device actors, each to the one with the fewest in flight."""

    def __init__(self, actors: DeviceActors):
        self._actors = actors
        self.device, self.slots, self.accelerators = actors.device, actors.capacity, actors.accelerators

    def submit(self, names: tuple[str, str], job: _Job, options: EvalOptions) -> Any:
        return self._actors.submit(names, job.task_bytes, job.solution_bytes, options)

    def finished(self, ref: Any, lost: bool) -> None:
        self._actors.finished(ref, lost)


def _run(
    ray: Any, pairs: Iterable, options: EvalOptions, ropts: RayOptions, store: VerdictStore | None, dispatch
) -> Iterator[Verdict]:
    node_options = options.replace(db="", device=dispatch.device)
    lost = lost_errors(ray)
    limit = ropts.max_in_flight or max(1, 2 * dispatch.slots)
    jobs = (_job(i, t, s, node_options, dispatch.accelerators) for i, (t, s) in enumerate(pairs))
    pending: dict[Any, _Job] = {}
    stored: list[Verdict] = []  # verdicts served by the store, yielded before waiting on Ray

    def submit(job: _Job) -> None:
        job = dataclasses.replace(job, attempts=job.attempts + 1)
        names = (Path(job.task).name, Path(job.solution).name)
        pending[dispatch.submit(names, job, node_options)] = job

    def fill() -> None:
        while len(pending) < limit:
            job = next(jobs, None)
            if job is None:
                return
            fresh = options.fresh or store is None
            cached = None if fresh else served(store, job.key, options.serving_conditions())
            if cached is not None:
                stored.append(_restore_paths(cached, job))
            else:
                submit(job)

    fill()
    try:
        while pending or stored:
            while stored:
                yield stored.pop(0)
            if not pending:
                fill()
                continue
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(ref)
            try:
                doc = ray.get(ref)
            except lost as err:
                dispatch.finished(ref, lost=True)  # a dead actor is replaced before the retry
                if job.attempts <= ropts.max_retries:
                    submit(job)
                    continue
                yield _lost_verdict(job, node_options, err)
            except ray.exceptions.RayTaskError as err:
                dispatch.finished(ref, lost=False)
                raise err.as_instanceof_cause() from None
            else:
                dispatch.finished(ref, lost=False)
                verdict = _restore_paths(from_json(doc), job)
                keep(store, job.key, verdict, options)  # the local executor's rule (store.keep)
                yield verdict
            fill()
    finally:
        for ref in pending:
            dispatch.finished(ref, lost=False)
            try:
                if isinstance(dispatch, _TaskDispatch):
                    ray.cancel(ref, force=True)
                else:  # an actor's call cannot be forced: a queued one is dropped, a running one finishes
                    ray.cancel(ref)
            except Exception:  # noqa: BLE001 - already finished, or its actor already gone
                pass


def lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors that mean the evaluation's process or node went away (not that it failed)."""
    return tuple(getattr(ray.exceptions, n) for n in _LOST_NAMES if hasattr(ray.exceptions, n))


class DeviceEvaluator:
    """A Ray actor's body: one device's evaluations, ``per_device`` at once, in one process.

    Why one process per device: the device gate (host/gate.py), its admission (host/admission.py)
    and its memory reservations (executors/device_memory.py) are a process's ``LocalPool``; two Ray
    tasks on one GPU would each have their own and could time at once. Every evaluation of the
    device passes through this actor's pool, so untimed stretches overlap and timings never do
    (the candidate still runs in the pool's sandboxed workers, I1/I8).
    """

    def __init__(self, evaluate: Evaluator):
        from kernelproof.executors.local import LocalPool

        self._evaluate = evaluate
        self._pool = LocalPool()

    def evaluate(
        self, names: tuple[str, str], task_bytes: bytes, solution_bytes: bytes, options: EvalOptions
    ) -> dict[str, Any]:
        """The shipped files written into a private folder, evaluated with this device's pool."""
        with tempfile.TemporaryDirectory(prefix="kernelproof-ray-") as tmp:
            task = Path(tmp) / "task" / names[0]
            solution = Path(tmp) / "solution" / names[1]
            for path, data in ((task, task_bytes), (solution, solution_bytes)):
                path.parent.mkdir()
                path.write_bytes(data)
            return self._evaluate(task, solution, options, pool=self._pool).to_json()  # type: ignore[call-arg]

    def close(self) -> None:
        self._pool.close()


class DeviceActors:
    """One long-lived :class:`DeviceEvaluator` actor per GPU of the cluster (per CPU without GPUs),
    each running ``options.per_device`` evaluations at once (Ray's ``max_concurrency``).

    The driver's side: it hands each evaluation to the actor with the fewest in flight and, when
    an actor's evaluation comes back lost (the actor's process or node died), kills and re-creates
    that actor once, so the calls retried after it find a live one. Thread-safe: a service calls
    it from many threads.
    """

    def __init__(self, ray: Any, options: EvalOptions, ropts: RayOptions, evaluate: Evaluator):
        resources, self.device, count, self.accelerators = _placement(ray, options, ropts)
        self.per_device = options.per_device
        self.capacity = count * self.per_device
        self._ray = ray
        self._actor_class = ray.remote(DeviceEvaluator).options(
            max_concurrency=self.per_device, max_restarts=0, max_task_retries=0, **resources
        )
        self._evaluate = evaluate
        self._lock = threading.Lock()
        self._actors = [self._actor_class.remote(evaluate) for _ in range(count)]
        self._generation = [0] * count  # re-creations of each actor
        self._in_flight = [0] * count
        self._calls: dict[Any, tuple[int, int]] = {}  # ref -> (actor index, its generation then)

    def submit(
        self, names: tuple[str, str], task_bytes: bytes, solution_bytes: bytes, options: EvalOptions
    ) -> Any:
        with self._lock:
            index = min(range(len(self._actors)), key=self._in_flight.__getitem__)
            self._in_flight[index] += 1
            ref = self._actors[index].evaluate.remote(names, task_bytes, solution_bytes, options)
            self._calls[ref] = (index, self._generation[index])
        return ref

    def finished(self, ref: Any, lost: bool) -> None:
        """The call is over; ``lost``: the actor died under it (the first such report re-creates it)."""
        dead = None
        with self._lock:
            index, generation = self._calls.pop(ref, (None, None))
            if index is None:
                return
            self._in_flight[index] -= 1
            if lost and self._generation[index] == generation:
                dead = self._actors[index]
                self._actors[index] = self._actor_class.remote(self._evaluate)
                self._generation[index] += 1
        if dead is not None:
            self._ray.kill(dead, no_restart=True)

    def close(self) -> None:
        """Let each actor close its pool (its workers and builders), then end it."""
        with self._lock:
            actors, self._actors = self._actors, []
        closing = [a.close.remote() for a in actors]
        if closing:
            self._ray.wait(closing, num_returns=len(closing), timeout=30)
        for a in actors:
            self._ray.kill(a, no_restart=True)


def _evaluate_on_node(
    names: tuple[str, str], task_bytes: bytes, solution_bytes: bytes, options: EvalOptions, evaluate
) -> dict[str, Any]:
    """Runs on the node: write the shipped files into a private folder, evaluate, return the document."""
    with tempfile.TemporaryDirectory(prefix="kernelproof-ray-") as tmp:
        task = Path(tmp) / "task" / names[0]
        solution = Path(tmp) / "solution" / names[1]
        for path, data in ((task, task_bytes), (solution, solution_bytes)):
            path.parent.mkdir()
            path.write_bytes(data)
        return evaluate(task, solution, options).to_json()


def _placement(
    ray: Any, options: EvalOptions, ropts: RayOptions
) -> tuple[dict[str, float], str, int, list[str]]:
    """Ray resources per evaluation, the node's device, the cluster's slots and its GPU types."""
    cluster = ray.cluster_resources()
    gpus, cpus = int(cluster.get("GPU", 0)), int(cluster.get("CPU", 0))
    accelerators = sorted(k.split(":", 1)[1] for k in cluster if k.startswith("accelerator_type:"))
    kind = ropts.resource
    if kind == "auto":
        kind = "gpu" if gpus > 0 and options.device != "cpu" else "cpu"
    if kind == "gpu":
        if gpus == 0:
            raise ValueError("the Ray cluster has no GPU; use resource='cpu' with device 'cpu'")
        # Ray sets CUDA_VISIBLE_DEVICES to the one GPU it granted: "cuda" is that GPU.
        return {"num_gpus": 1, "num_cpus": 1}, "cuda", gpus, accelerators
    if kind != "cpu":
        raise ValueError(f"unknown Ray resource {kind!r}; choose gpu, cpu or auto")
    return {"num_gpus": 0, "num_cpus": 1}, "cpu", max(cpus, 1), []


def _connect(ray: Any, ropts: RayOptions) -> bool:
    """Join (or start) a Ray cluster unless this process already has one; True if started here."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"address": ropts.address, "runtime_env": ropts.runtime_env}
    if ropts.address is None:
        kwargs["include_dashboard"] = False
    ray.init(**kwargs)
    return True


def _job(
    index: int,
    task: str | Path | Submitted,
    solution: str | Path | Submitted,
    options: EvalOptions,
    accelerators: list[str],
) -> _Job:
    """One pair's job: files named by a path are read here, once; a file given as bytes
    (:class:`~kernelproof.submission.Submitted`, a service's submission) is never read from disk."""
    (task, task_bytes), (solution, solution_bytes) = _read(task), _read(solution)
    key = ray_evaluation_key(task_bytes, solution_bytes, options, accelerators)
    return _Job(index, task, solution, task_bytes, solution_bytes, key)


def _read(file: str | Path | Submitted) -> tuple[str, bytes]:
    if isinstance(file, Submitted):
        return file.path, file.data
    return str(file), Path(file).read_bytes()


def ray_evaluation_key(
    task_bytes: bytes, solution_bytes: bytes, options: EvalOptions, accelerators: list[str]
) -> str:
    """Identity of an evaluation on a cluster: file contents, settings, the cluster's GPU types.

    Computed on the driver without touching a device; it differs from the local executor's key
    (which names the local device), so a cluster's results are served only to the cluster.
    """
    h = hashlib.sha256()
    for data in (task_bytes, solution_bytes):
        h.update(hashlib.sha256(data).digest())
    fields = options.cache_key_fields()
    h.update(
        json.dumps(
            {
                "executor": "ray",
                "settings": fields,
                "accelerators": accelerators,
                "kernelproof_source": this_source(),  # the judging code, as the driver has it
            },
            sort_keys=True,
        ).encode()
    )
    return h.hexdigest()


def _restore_paths(verdict: Verdict, job: _Job) -> Verdict:
    """The node saw temporary copies, or the store served it: give the verdict the paths the user
    gave (a served one keeps its first paths as history, see store.as_requested)."""
    return as_requested(verdict, job.task, job.solution)


def _lost_verdict(job: _Job, options: EvalOptions, err: Exception) -> Verdict:
    message = (
        f"the Ray worker evaluating this pair was lost {job.attempts} times "
        f"({type(err).__name__}); no verdict was delivered"
    )
    return Verdict(
        verdict=Outcome.ERROR,
        reasons=(Reason(ReasonCode.MISSING_RESULT, message, str(err)[:2000]),),
        task=FileRef(job.task, hashlib.sha256(job.task_bytes).hexdigest()),
        solution=FileRef(job.solution, hashlib.sha256(job.solution_bytes).hexdigest()),
        correctness=None,
        timing=None,
        speedup={},
        roofline=None,
        coverage=None,
        environment={"executor": "ray"},
        reward=0.0,
        settings={"device": options.device, "executor": "ray", "attempts": job.attempts},
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def open_store(db: str | None) -> VerdictStore | None:
    """The driver's results store, by the one rule (kernelproof.store.db_path): "" is none."""
    from kernelproof.store import open_store as opened

    return opened(db)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise ImportError(RAY_HINT) from err
    return ray
