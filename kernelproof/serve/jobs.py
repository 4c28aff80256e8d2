"""The scheduler: accepted jobs in order, one thread per slot the backend lists, results to waiters.

Why threads over the executors: an evaluation is a blocking call into
:func:`kernelproof.api.evaluate` (or the Ray executor) that already runs the candidate in its
sandboxed worker; the event loop must never wait on one. The local backend lists ``--jobs-per-slot``
threads (two by default) for each of a device's ``per_device`` evaluation slots
(kernelproof/serve/eval_backends.py): a job waiting for its build or for a large task's device
memory holds no slot of the device. Each thread
takes the oldest queued job whose content hash is not being judged right now, so identical
requests (a GRPO group's duplicate completions) run once and the rest are answered from the store
when the first is done.

Back-pressure: :meth:`Scheduler.submit` refuses a request that would take the jobs queued or
running beyond ``queue_limit`` (:class:`QueueFull`, the HTTP layer answers 429). A queued job can be
cancelled (a client that went away); a running one finishes and is stored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable

from kernelproof.errors import QueueFull  # defined in the one tree, raised here
from kernelproof.options import EvalOptions
from kernelproof.serve.book import CANCELLED, DONE, QUEUED, RUNNING, Job, JobBook
from kernelproof.serve.eval_backends import Backend
from kernelproof.serve.prometheus import Metrics
from kernelproof.submission import Submission as Submitted
from kernelproof.verdict import Verdict

Listener = Callable[[Job], None]


@dataclasses.dataclass(frozen=True)
class Submission:
    """One item as the service judges it: the task's and the solution's bytes, read or received
    once (kernelproof/submission.py), never a file written and read back."""

    task_id: str
    files: Submitted  # the task and the solution, as bytes
    options: EvalOptions


def job_key(files: Submitted, options: EvalOptions) -> str:
    """The content hash of one evaluation: the bytes of task and solution and the settings."""
    h = hashlib.sha256()
    for f in (files.task, files.solution):
        h.update(bytes.fromhex(f.sha256))
    h.update(json.dumps(options.cache_key_fields(), sort_keys=True).encode())
    return h.hexdigest()


def options_of(job: Job) -> EvalOptions:
    return EvalOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in job.options.items()})


class Scheduler:
    def __init__(self, book: JobBook, backend: Backend, metrics: Metrics, queue_limit: int):
        self._book = book
        self._backend = backend
        self._metrics = metrics
        self._limit = queue_limit
        self._cond = threading.Condition()
        self._queue: list[Job] = []  # queued, oldest first
        self._running: dict[str, Job] = {}  # job id -> job
        self._listeners: dict[str, list[Listener]] = {}
        self._stopping = False
        for job in book.unfinished():  # what was queued or in flight when the service stopped
            job = dataclasses.replace(job, state=QUEUED)
            book.set_state(job.id, QUEUED)
            self._queue.append(job)
        self._threads = [
            threading.Thread(target=self._loop, args=(slot,), name=f"kernelproof-slot-{i}", daemon=True)
            for i, slot in enumerate(backend.slots())
        ]
        metrics.set_slots(backend.slots())
        self._publish()
        for t in self._threads:
            t.start()

    # -- submitting ---------------------------------------------------------------------------
    def submit(self, items: list[Submission]) -> list[Job]:
        """Accept a request's jobs (all or none); those the store answers are done at once."""
        batch = uuid.uuid4().hex
        now = time.time()
        jobs, answered = [], []
        for position, s in enumerate(items):
            options_doc = {
                f.name: (list(v) if isinstance(v := getattr(s.options, f.name), tuple) else v)
                for f in dataclasses.fields(s.options)
            }
            job = Job(
                id=uuid.uuid4().hex,
                batch=batch,
                position=position,
                task_id=s.task_id,
                files=s.files,
                options=options_doc,
                key=job_key(s.files, s.options),
                state=QUEUED,
                created=now,
            )
            stored = self._backend.stored(s.files, s.options)
            if stored is not None:
                answered.append((job, stored))
            jobs.append(job)
        waiting = len(jobs) - len(answered)
        with self._cond:
            if waiting and len(self._queue) + len(self._running) + waiting > self._limit:
                self._metrics.refused_full()
                raise QueueFull
            self._book.add(jobs)
            done_ids = {j.id for j, _ in answered}
            self._queue.extend(j for j in jobs if j.id not in done_ids)
            self._cond.notify_all()
        for job, verdict in answered:
            self._finish(job, verdict, from_store=True)
        self._publish()
        return [self._book.get(j.id) or j for j in jobs]

    def cancel(self, job_ids: list[str]) -> int:
        """Cancel those of these jobs still queued (never a running one); how many were."""
        wanted = set(job_ids)
        with self._cond:
            gone = [j for j in self._queue if j.id in wanted]
            self._queue = [j for j in self._queue if j.id not in wanted]
        for job in gone:
            self._book.set_state(job.id, CANCELLED)
            self._metrics.cancelled()
            self._notify(dataclasses.replace(job, state=CANCELLED))
        self._publish()
        return len(gone)

    def listen(self, job_id: str, listener: Listener) -> Job | None:
        """Call ``listener(job)`` once the job is done or cancelled (at once if it already is);
        returns the job as it stands, or None for an unknown id."""
        with self._cond:
            job = self._book.get(job_id)
            if job is None:
                return None
            if job.state in (QUEUED, RUNNING):
                self._listeners.setdefault(job_id, []).append(listener)
                return job
        listener(job)
        return job

    def depth(self) -> tuple[int, int]:
        with self._cond:
            return len(self._queue), len(self._running)

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=1.0)

    # -- running ------------------------------------------------------------------------------
    def _take(self) -> Job | None:
        with self._cond:
            while True:
                if self._stopping:
                    return None
                busy = {j.key for j in self._running.values()}
                job = next((j for j in self._queue if j.key not in busy), None)
                if job is not None:
                    self._queue.remove(job)
                    job = dataclasses.replace(job, state=RUNNING)
                    self._running[job.id] = job
                    self._book.set_state(job.id, RUNNING)
                    return job
                self._cond.wait()

    def _loop(self, slot: str) -> None:
        while True:
            job = self._take()
            if job is None:
                return
            self._publish()
            self._metrics.started(slot)
            try:
                verdict = self._judge(job, slot)
            except BaseException as exc:  # noqa: BLE001 - the service must outlive a harness bug
                from kernelproof.blame import internal_error_verdict

                verdict = internal_error_verdict(job.files.task, job.files.solution, slot, exc)
            finally:
                self._metrics.stopped(slot)
            if self._stopping:
                return  # not recorded: queued again at the next start
            self._finish(job, verdict, from_store=False)
            self._publish()

    def _judge(self, job: Job, slot: str) -> Verdict:
        options = options_of(job)
        stored = self._backend.stored(job.files, options)
        if stored is not None:  # an identical job finished while this one waited
            return stored
        return self._backend.evaluate(job.files, options, slot)

    def _finish(self, job: Job, verdict: Verdict, from_store: bool) -> None:
        self._book.finish(job.id, verdict)
        with self._cond:
            self._running.pop(job.id, None)
            self._cond.notify_all()
        self._metrics.finished(verdict, from_store or verdict.stored is not None)
        self._notify(dataclasses.replace(job, state=DONE, verdict=verdict, finished=time.time()))

    def _notify(self, job: Job) -> None:
        with self._cond:
            listeners = self._listeners.pop(job.id, [])
        for listener in listeners:
            listener(job)

    def _publish(self) -> None:
        queued, running = self.depth()
        self._metrics.set_depth(queued, running)
