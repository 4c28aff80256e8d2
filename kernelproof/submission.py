"""The files of one evaluation as submitted: read once, hashed once, and those bytes judged and stored.

A file named by its path can change between two reads. The solution used to be read three times
(for the store's key, for the verdict, when staged into the worker): a file swapped after the
first read had the honest run's pass stored under the swapped file's key, and the wrong bytes were
then served that pass from the store. Here each file is read once; the key, the verdict's hashes,
the build and the worker's copy all come from the same bytes (I10: the verdict is of what the
parent itself read), and the store refuses a write whose verdict names other bytes than its key
(:class:`EvaluationKey`). A service submits bytes (:func:`submitted_bytes`), never a path to read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from kernelproof.errors import UsageError


@dataclass(frozen=True)
class Submitted:
    """One file of an evaluation: the name it was given (shown, never read again) and its bytes."""

    path: str
    data: bytes = field(repr=False)
    sha256: str

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Submission:
    """The task and the solution of one evaluation, each read once."""

    task: Submitted
    solution: Submitted


@dataclass(frozen=True)
class EvaluationKey:
    """The store's key of an evaluation, with the hashes of the bytes it was computed from: a
    verdict is stored under it only if it names the same bytes (kernelproof.store.Store.put)."""

    digest: str
    task_sha256: str
    solution_sha256: str


def submitted_bytes(path: str, data: bytes) -> Submitted:
    """A file given as bytes (a service's submission); `path` only names it."""
    return Submitted(str(path), bytes(data), hashlib.sha256(data).hexdigest())


def read_submitted(path: str | Path, what: str = "file") -> Submitted:
    """The file's bytes, read once (UsageError when it is missing)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{what} file not found: {path}")
    return submitted_bytes(str(path), p.read_bytes())


def read_submission(task: str | Path, solution: str | Path) -> Submission:
    return Submission(read_submitted(task, "task"), read_submitted(solution, "solution"))
