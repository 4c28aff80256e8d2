"""Exceptions of the agent loop: for misuse and for failures the loop cannot survive.

A bad candidate never raises (it is a candidate with a rejection or a failing verdict), and a
failed LLM call is recorded and survived by the loop. These are for the rest, placed in
kernelproof's own tree (``kernelproof.errors``) so the CLI maps them to its exit codes:

    KernelproofError
    └── AgentError
        ├── ConfigError              (also a UsageError) a bad model spec, option or combination: exit 2
        ├── MissingDependencyError   (also a UsageError) an optional SDK is not installed: exit 2
        ├── ReplayError              (also a UsageError) a log or run to resume is unreadable or foreign: exit 2
        └── BackendError             one LLM call failed for good (after its retries, or not retryable)
"""

from __future__ import annotations

from kernelproof.errors import KernelproofError, UsageError


class AgentError(KernelproofError):
    """Base of every exception the agent raises on purpose."""


class ConfigError(AgentError, UsageError):
    """A bad model spec, option or combination of options."""


class MissingDependencyError(AgentError, UsageError):
    """An optional dependency (an LLM SDK) is not installed; the message says how to install it."""


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


class ReplayError(AgentError, UsageError):
    """A replay log or a run to resume cannot be read, or belongs to another task."""
