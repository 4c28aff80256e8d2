"""Exceptions: for harness bugs and misuse only (house rule 5).

A candidate that fails never raises: it gets a verdict with a reason code. These exceptions are
for the user's own mistakes (a task that does not load, a bad option) and for kernelproof's bugs.

    KernelproofError
    ├── UsageError          a bad option or argument (CLI exit 2)
    │   └── SandboxError    the sandbox cannot be set up as asked, or --require-sandbox found a layer missing
    ├── TaskError           the task file does not load, or its reference does not run (exit 2)
    ├── WorkerError         the worker protocol broke in a way that is kernelproof's fault (exit 3)
    └── StoreError          the results database cannot be opened or written (exit 3)
"""

from __future__ import annotations


class KernelproofError(Exception):
    """Base of every exception kernelproof raises on purpose."""


class UsageError(KernelproofError):
    """A bad option, argument or path given by the user."""


class SandboxError(UsageError):
    """The containment cannot be set up as planned (a rule would reach the store, the sandbox
    directory is not ours), or a layer is missing where the user required all of them."""


class TaskError(KernelproofError):
    """The task itself is broken: it does not load, lacks a required name, or its reference raises."""

    def __init__(self, message: str, *, path: str = "", line: int | None = None):
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(where + message)
        self.path = path
        self.line = line


class WorkerError(KernelproofError):
    """The trusted side of the worker protocol failed (not the candidate's doing)."""


class StoreError(KernelproofError):
    """The SQLite store could not be opened or written."""
