"""The service judges the bytes it received: no file of the solution is written and read back.

The solution (and a client's reference) reach the evaluation as bytes
(:func:`kernelproof.api.evaluate_submission`); the job book keeps them, so a job queued again after
a restart is judged on the bytes posted. In-process: a recording backend for what the service
hands over, and the local backend on the CPU for the verdict and the store.
"""

from __future__ import annotations

import hashlib
import threading

from serving import DATA, GOOD

from kernelproof.options import EvalOptions
from kernelproof.serve.book import JobBook
from kernelproof.serve.config import ServeConfig
from kernelproof.serve.request_records import EvalItem
from kernelproof.serve.service import Service

# Bytes a text round trip could change: CRLF line ends, a non-ASCII comment, no final newline.
POSTED = GOOD.replace("\n", "\r\n") + "# naïve comment, ünïcode"


class Recording:
    """A backend that records what the service hands it and answers nothing from a store."""

    def __init__(self):
        self.got = []
        self.done = threading.Event()

    def slots(self):
        return ["cpu"]

    def stored(self, files, options):
        return None

    def evaluate(self, files, options, slot):
        from kernelproof.blame import internal_error_verdict

        self.got.append(files)
        self.done.set()
        return internal_error_verdict(files.task, files.solution, slot, RuntimeError("recorded"))

    def close(self):
        pass


def _config(tmp_path, **options):
    return ServeConfig(
        task_dirs=(DATA / "tasks",),
        options=EvalOptions(device="cpu", correctness_only=True, **options),
        state_dir=tmp_path / "state",
    )


def _files_holding(root, data: bytes) -> list[str]:
    return [
        str(p)
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith("serve-jobs") and data in p.read_bytes()
    ]


def test_the_backend_gets_the_posted_bytes_and_no_file_of_them_is_written(tmp_path):
    backend = Recording()
    service = Service(_config(tmp_path, db=""), backend=backend)
    try:
        (job,) = service.submit((EvalItem("scale_relu", POSTED),))
        assert backend.done.wait(60)
    finally:
        service.close()
    (files,) = backend.got
    posted = POSTED.encode()
    assert files.solution.data == posted and files.solution.sha256 == hashlib.sha256(posted).hexdigest()
    assert files.task.data == (DATA / "tasks" / "scale_relu.py").read_bytes()
    assert _files_holding(tmp_path / "state", posted) == []  # judged from memory, not from a file
    book = JobBook(tmp_path / "state" / "serve-jobs.sqlite")  # kept for a restart: the same bytes
    try:
        assert book.get(job.id).files.solution.data == posted
    finally:
        book.close()


def test_the_verdict_and_the_store_name_the_posted_bytes(tmp_path):
    from kernelproof import api

    db = str(tmp_path / "store.sqlite")
    service = Service(_config(tmp_path, db=db, seeds_per_case=1, shape_variants="task"))
    try:
        jobs = service.submit((EvalItem("scale_relu", POSTED),))
        done = threading.Event()
        service.scheduler.listen(jobs[0].id, lambda j: done.set())
        assert done.wait(300)
        job = service.book.get(jobs[0].id)
    finally:
        service.close()
    assert job.verdict is not None and job.verdict.passed, job.verdict and job.verdict.reasons
    assert job.verdict.solution.sha256 == hashlib.sha256(POSTED.encode()).hexdigest()
    key = api.submission_key(job.files, service.config.options, "cpu").digest
    stored = api.open_store(db).get(key)
    assert stored is not None and stored.solution.sha256 == job.verdict.solution.sha256
    assert _files_holding(tmp_path / "state", POSTED.encode()) == []
