"""Exceptions: for harness bugs and misuse only (docs/architecture.md, house rule 5). Every one kernelproof raises on purpose.

A candidate that fails never raises: it gets a verdict with a reason code. These exceptions are
for the user's own mistakes (a task that does not load, a bad option), for kernelproof's own
failures, and for the few signals that cross a process boundary inside kernelproof (a worker that
died, a malformed frame) and are turned into a reason where they are caught.

Each class is defined here, in one tree, and imported back into the module that raises it, so
both ``from kernelproof.errors import WorkerDied`` and ``from kernelproof.host.process import
WorkerDied`` name the same class. ``exit_code`` is what the command line exits with when one
reaches it (kernelproof/exits.py has the whole table):

    KernelproofError            kernelproof's own failure, unless a subclass says otherwise (exit 3)
    ├── UsageError              a bad option, argument or path (exit 2)
    │   ├── SandboxError        containment cannot be set up as planned, or --require-sandbox
    │   │                       found a layer missing
    │   ├── ReportInputError    a report input that is not verdict documents
    │   ├── CertificateError    a certificate that cannot be made or read (not a failed claim)
    │   ├── KeyFileError        a signing key file that cannot be made, read or used
    │   ├── ConfigError         * a bad model spec, option or combination
    │   ├── MissingDependencyError  * an optional SDK is not installed
    │   ├── ReplayError         * a replay log or a run to resume is unreadable or foreign
    │   └── RequestError        a request `kernelproof serve` cannot take; ``status``: the HTTP answer
    ├── TaskError               the task does not load, or its reference does not run (exit 2)
    ├── AgentError              the agent loop's own (* the three above are agent errors too)
    │   └── BackendError        one LLM call failed for good: exit 4 when its retries ran out,
    │                           2 when the provider refused the request as written
    ├── NativeCompileError      nvcc rejected a native source (in the candidate's build: compile_error)
    ├── RefusedFlagError        a compiler flag a solution passed is not allowed (kernelproof/compiler_flags.py)
    ├── BuildRequestError       a build the worker asked the parent for failed or was refused (compile_error)
    ├── CudaUnavailableError    a CUDA build asked for on a machine that cannot do it (environment)
    ├── QueueFull               the service's queue is full: answered 429 with Retry-After
    ├── CacheTamperError        a build cache entry changed after it was published
    ├── PublishError            a build's staging directory cannot be published
    ├── WorkerError             the trusted side of the worker protocol failed (not the candidate)
    ├── WorkerDied              a worker died, timed out or answered out of turn; ``code`` is the
    │                           reason code it becomes in the verdict
    ├── ProtocolError           a peer sent something that is not a well-formed message
    │   └── PeerClosed          the connection ended (the peer's process is gone or closed it)
    └── StoreError              the results database cannot be opened, read or written (exit 2:
                                a bad store is bad input, whatever is wrong with it)

Not in the tree, on purpose: exceptions private to one module that never leave it (the agent's
``MalformedReply``, which becomes a retryable ``BackendError``; the builder's ``_NoFast`` and
``_Refuse``, the worker's ``_Unmapped`` and ``Refused``) and ``LandlockError``, an ``OSError`` of the
sandbox's own syscalls.
"""

from __future__ import annotations

from typing import ClassVar

EXIT_REJECTED, EXIT_USAGE, EXIT_INTERNAL, EXIT_PROVIDER = 1, 2, 3, 4  # the codes kernelproof/exits.py tables


class KernelproofError(Exception):
    """Base of every exception kernelproof raises on purpose."""

    exit_code: ClassVar[int] = EXIT_INTERNAL


# --- misuse (exit 2) ------------------------------------------------------------------------------


class UsageError(KernelproofError):
    """A bad option, argument or path given by the user."""

    exit_code: ClassVar[int] = EXIT_USAGE


class SandboxError(UsageError):
    """The containment cannot be set up as planned (a rule would reach the store, the sandbox
    directory is not ours), or a layer is missing where the user required all of them."""


class ReportInputError(UsageError):
    """A report input that cannot be read as verdict documents (misuse, not a candidate failure)."""


class CertificateError(UsageError):
    """A certificate that cannot be made or read (misuse or a damaged file; not a failed claim)."""


class KeyFileError(UsageError):
    """A key file that cannot be made, read or used (misuse; not a failed claim)."""


class TaskError(KernelproofError):
    """The task itself is broken: it does not load, lacks a required name, or its reference raises."""

    exit_code: ClassVar[int] = EXIT_USAGE

    def __init__(self, message: str, *, path: str = "", line: int | None = None):
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(where + message)
        self.path = path
        self.line = line


# --- the agent ------------------------------------------------------------------------------------


class AgentError(KernelproofError):
    """Base of every exception the agent raises on purpose (a failed call it survives is not one)."""


class ConfigError(AgentError, UsageError):
    """A bad model spec, option or combination of options."""


class MissingDependencyError(AgentError, UsageError):
    """An optional dependency (an LLM SDK) is not installed; the message says how to install it."""


class ReplayError(AgentError, UsageError):
    """A replay log or a run to resume cannot be read, or belongs to another task."""


class BackendError(AgentError):
    """One LLM call failed for good.

    ``retryable`` says whether the failure was transient (rate limit, 5xx, connection, timeout)
    and the retries ran out, or permanent (authentication, a bad request, an unknown model): the
    loop survives the first kind and stops on the second, since every later call would fail alike.
    """

    def __init__(self, message: str, *, retryable: bool, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.retryable = retryable  # transient failure whose retries ran out
        self.status = status  # HTTP status, when there was a response
        self.attempts = attempts  # HTTP attempts made

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        """The provider failed (4), or refused the request as written, which a retry cannot mend (2)."""
        return EXIT_PROVIDER if self.retryable else EXIT_USAGE


# --- builds ---------------------------------------------------------------------------------------


class NativeCompileError(KernelproofError):
    """nvcc rejected a native source; the message holds nvcc's error lines verbatim."""


class RefusedFlagError(KernelproofError):
    """Raised in the builder (and the worker) to the solution's load_inline / load / load_cuda call:
    a flag is not allowed. Nothing was compiled and no command ran."""

    def __init__(self, refusal):  # a kernelproof.compiler_flags.Refusal
        super().__init__(refusal.message())
        self.refusal = refusal


class BuildRequestError(KernelproofError, RuntimeError):
    """Raised in the worker to the solution's load_inline / load call: the build it asked the parent for
    (kernelproof/build/runtime_request.py) failed or was refused. A RuntimeError too, as torch's own build
    failure is, so a solution's ``except RuntimeError`` sees it the same."""


class CudaUnavailableError(KernelproofError, RuntimeError):
    """Raised in the builder to a load_inline / load / load_cuda call that asks for a CUDA build this
    machine cannot do (no nvcc, or a torch without CUDA): nothing was compiled, and the call is
    recorded (kernelproof/build/cuda.py), so the parent reports ``environment`` from its own facts.
    A RuntimeError too, as torch's own build failure is."""


class QueueFull(KernelproofError):
    """The jobs queued or running in ``kernelproof serve`` would exceed its limit: answer 429."""


class CacheTamperError(KernelproofError):
    """A published entry no longer matches its manifest: it was changed after publication."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"build cache entry {key[:16]}... refused: {problem}")
        self.key = key
        self.problem = problem


class PublishError(KernelproofError):
    """A staging directory cannot be published (too large, or holds something that is not a file)."""


# --- the worker boundary and the store ------------------------------------------------------------


class WorkerError(KernelproofError):
    """The trusted side of the worker protocol failed (not the candidate's doing)."""


class WorkerDied(KernelproofError):
    """A worker process died, timed out, or answered out of turn.

    Raised by the parent's handle on a worker (kernelproof/host/process.py) and caught where
    the evaluation turns it into a reason: ``code`` is that reason's code (a ``ReasonCode`` value),
    ``message`` its sentence and ``detail`` its evidence.
    """

    def __init__(self, code: str, message: str, detail: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail


class ProtocolError(KernelproofError):
    """The peer sent something that is not a well-formed message (or closed the connection)."""


class PeerClosed(ProtocolError):
    """The connection ended: the peer died or closed it. Not a malformed message, so the parent
    explains it as a death (kernelproof.host.process), never as a protocol violation."""


class StoreError(KernelproofError):
    """The SQLite store could not be opened, read or written: a missing folder, a read-only or
    corrupt file, one with triggers planted in it. Exit 2 for every one of them (a bad store is
    bad input, like a bad task), so a script tells them from kernelproof's own failures."""

    exit_code: ClassVar[int] = EXIT_USAGE


class RequestError(UsageError, ValueError):
    """A request ``kernelproof serve`` cannot take, with the HTTP status to answer (422 unless said)."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status
