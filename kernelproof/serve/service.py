"""The service's core, shared by every endpoint: requests to jobs, jobs to answers.

An answer carries the verdict document, the reward (kernelproof/rewards.py, ``None`` where the
sample was not judged) and the feedback text for the next turn (kernelproof/agent/feedback.py:
the candidate's own text fenced and labelled, inert).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import Any

from kernelproof.agent.feedback import describe_verdict
from kernelproof.executors.local import DeviceState
from kernelproof.rewards import reward_terms
from kernelproof.serve.book import DONE, Job, JobBook
from kernelproof.serve.config import ServeConfig
from kernelproof.serve.eval_backends import Backend, LocalBackend, RayBackend
from kernelproof.serve.jobs import QueueFull, Scheduler, Submission  # noqa: F401 (QueueFull: the app's)
from kernelproof.serve.prometheus import Metrics
from kernelproof.serve.request_records import EvalItem, RequestError
from kernelproof.serve.tasks import TaskCatalog
from kernelproof.submission import Submission as Files
from kernelproof.submission import Submitted, read_submitted, submitted_bytes

DISCONNECT_POLL_S = 0.5


def _received(role: str, text: str) -> Submitted:
    """A file as the client posted it: its bytes, judged and stored as they are (no file is written
    and read back: kernelproof.api.evaluate_submission). The name only labels it."""
    data = text.encode("utf-8", errors="surrogateescape")
    return submitted_bytes(f"{role}-{hashlib.sha256(data).hexdigest()[:16]}.py", data)


class Service:
    def __init__(self, config: ServeConfig, backend: Backend | None = None):
        self.config = config
        self.catalog = TaskCatalog(config.task_dirs)
        self.metrics = Metrics()
        self.book = JobBook(config.state_dir / "serve-jobs.sqlite")
        if backend is None:
            backend = (
                RayBackend(config.options, config.address, config.ray_slots)
                if config.executor == "ray"
                else LocalBackend(config.options, config.jobs_per_slot)
            )
        self.backend = backend
        self.scheduler = Scheduler(self.book, backend, self.metrics, config.queue_limit)
        self.asked: dict[str, dict[str, Any]] = {}  # job id -> what a KernelGYM client asked, not obeyed

    def warm(self) -> str:
        """Before the service listens: its backend's workers started and devices measured, so that
        the first batch does not wait for them (a no-op for a backend with nothing to warm)."""
        warm = getattr(self.backend, "warm", None)
        return warm() if warm is not None else ""

    def device_states(self) -> list[DeviceState]:
        """The devices' admissions as they stand (none for a backend that does not say)."""
        states = getattr(self.backend, "device_states", None)
        return states() if states is not None else []

    def close(self) -> None:
        self.scheduler.close()
        self.backend.close()
        self.book.close()

    # -- requests to jobs ---------------------------------------------------------------------
    def submission(self, item: EvalItem) -> Submission:
        """What the service will judge for one item, or RequestError saying why not."""
        if item.reference is not None:
            if not self.config.trust_client_tasks:
                raise RequestError(
                    "a client's own reference runs in the trusted parent: this service takes tasks by id "
                    "only (the operator may start it with --trust-client-tasks)",
                    status=403,
                )
            task = _received("task", item.reference)
        else:
            found = self.catalog.find(item.task_id)
            if found is None:
                raise RequestError(
                    f"no task {item.task_id!r} in the task sets this service was started with", status=404
                )
            task = read_submitted(found, "task")  # read once, here: the bytes judged are these
        options = self.config.options
        if item.correctness_only is False and options.correctness_only:
            raise RequestError("this service judges correctness only (started with --correctness-only)")
        if item.correctness_only:
            options = options.replace(correctness_only=True)
        if item.baselines is not None:
            options = options.replace(baselines=item.baselines)
        return Submission(item.task_id, Files(task, _received("solution", item.solution)), options)

    def submit(self, items: tuple[EvalItem, ...]) -> list[Job]:
        return self.scheduler.submit([self.submission(i) for i in items])

    # -- jobs to answers ----------------------------------------------------------------------
    def answer(self, job: Job, *, feedback: bool = True) -> dict[str, Any]:
        doc: dict[str, Any] = {"id": job.id, "batch": job.batch, "task": job.task_id, "state": job.state}
        if job.state == DONE and job.verdict is not None:
            terms = reward_terms(job.verdict, self.config.weights)
            doc.update(
                verdict=job.verdict.to_json(),
                reward=terms.reward,
                judged=terms.reward is not None,
                reward_terms={
                    "correct": terms.correct,
                    "speed": terms.speed,
                    "coverage": terms.coverage,
                    "why": terms.why,
                },
            )
            if feedback:
                doc["feedback"] = describe_verdict(job.verdict)
        return doc

    async def finished(self, jobs: list[Job], disconnected=None) -> AsyncIterator[Job]:
        """Yield the jobs as they finish (or are cancelled). When ``disconnected()`` turns true,
        the jobs still queued are cancelled and the iteration ends."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Job] = asyncio.Queue()
        for job in jobs:
            self.scheduler.listen(job.id, lambda j: loop.call_soon_threadsafe(queue.put_nowait, j))
        left = len(jobs)
        try:
            while left:
                try:
                    job = await asyncio.wait_for(queue.get(), DISCONNECT_POLL_S)
                except asyncio.TimeoutError:
                    if disconnected is not None and await disconnected():
                        return
                    continue
                left -= 1
                yield job
        finally:
            if left:  # the client went away (or the stream was closed): its queued work is not wanted
                self.scheduler.cancel([j.id for j in jobs])

    async def all_finished(self, jobs: list[Job], disconnected=None) -> list[Job] | None:
        """Every job finished, in the request's order; None when the client went away first."""
        got: dict[str, Job] = {}
        async for job in self.finished(jobs, disconnected):
            got[job.id] = job
        if len(got) < len(jobs):
            return None
        return [got[j.id] for j in jobs]
