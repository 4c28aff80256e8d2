"""Exceptions of the agent loop: for misuse and for failures the loop cannot survive.

A bad candidate never raises (it is a candidate with a rejection or a failing verdict), and a
failed LLM call is recorded and survived by the loop. These are for the rest. They are defined in
kernelproof's one tree (``kernelproof.errors``, which says how the CLI exits on each) and named
here too, where the agent's code has always imported them:

    KernelproofError
    └── AgentError
        ├── ConfigError              (also a UsageError) a bad model spec, option or combination: exit 2
        ├── MissingDependencyError   (also a UsageError) an optional SDK is not installed: exit 2
        ├── ReplayError              (also a UsageError) a log or run to resume is unreadable or foreign: exit 2
        └── BackendError             one LLM call failed for good (after its retries, or not retryable)
"""

from __future__ import annotations

from kernelproof.errors import (
    AgentError,
    BackendError,
    ConfigError,
    MissingDependencyError,
    ReplayError,
)

__all__ = ["AgentError", "BackendError", "ConfigError", "MissingDependencyError", "ReplayError"]
