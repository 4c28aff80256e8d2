"""The verbs of kernelproof as Python functions: what the CLI, agents, executors and RL trainers call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

from kernelproof.options import EvalOptions
from kernelproof.verdict import Verdict

PathLike = str | Path


def evaluate(task: PathLike, solution: PathLike, options: EvalOptions | None = None) -> Verdict:
    """Evaluate one solution against one task and return its verdict (never raises for bad candidates)."""
    raise NotImplementedError


def evaluate_many(
    pairs: Iterable[tuple[PathLike, PathLike]], options: EvalOptions | None = None
) -> Iterator[Verdict]:
    """Evaluate many (task, solution) pairs over the per-device workers; yield verdicts as they finish."""
    raise NotImplementedError


async def aevaluate_many(
    pairs: Iterable[tuple[PathLike, PathLike]], options: EvalOptions | None = None
) -> AsyncIterator[Verdict]:
    """Async form of :func:`evaluate_many` for event-loop callers (agents, RL rollouts)."""
    raise NotImplementedError
    yield  # pragma: no cover
