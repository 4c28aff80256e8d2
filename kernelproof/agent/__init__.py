"""The agent: LLMs write and improve kernels, kernelproof's verdicts decide which ones count.

``optimize(task, model, options)`` runs one search (refine, best-of-n, tree or evolve) within
budgets of candidates, tokens, dollars and GPU seconds, records every prompt, answer, candidate
and verdict in the store, and returns the fastest verified solution. The SDKs (``openai``,
``anthropic``) are optional and imported only when a live call is made.
"""

from kernelproof.agent.agent_errors import (
    AgentError,
    BackendError,
    ConfigError,
    MissingDependencyError,
    ReplayError,
)
from kernelproof.agent.agent_options import AgentOptions
from kernelproof.agent.budget import Limits, Price
from kernelproof.agent.feedback import describe_verdict
from kernelproof.agent.llm_backends import BackendConfig, parse_model
from kernelproof.agent.loop import optimize
from kernelproof.agent.run import RunResult, Spend, load_run, recorded_options
from kernelproof.agent.strategies import STRATEGIES, SearchSettings

__all__ = [
    "STRATEGIES",
    "AgentError",
    "AgentOptions",
    "BackendConfig",
    "BackendError",
    "ConfigError",
    "Limits",
    "MissingDependencyError",
    "Price",
    "ReplayError",
    "RunResult",
    "SearchSettings",
    "Spend",
    "describe_verdict",
    "load_run",
    "optimize",
    "parse_model",
    "recorded_options",
]
