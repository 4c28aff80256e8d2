"""Reward functions for RL trainers, talking to ``kernelproof serve`` by URL (docs/serve.md).

- TRL's ``GRPOTrainer``: :func:`trl_reward` (sync) and :func:`trl_reward_async` make
  ``f(prompts, completions, completion_ids, **columns) -> list[float | None]``; the task of each
  sample is read from a dataset column (``task`` by default), the solution extracted from the
  completion as the agent extracts it (kernelproof/agent/extract.py). ``None`` marks a sample not
  judged (an error that is not the policy's: docs/rewards.md), which TRL leaves out.
- verl: :func:`compute_score` ``(data_source, solution_str, ground_truth, extra_info)``, the
  task id as ``ground_truth``; the server's URL from ``extra_info["kernelproof_url"]`` or
  ``$KERNELPROOF_SERVE_URL``. It answers a dict whose ``score`` verl reads (0 where not judged,
  with ``judged`` false beside it, since verl needs a number).

An answer holding no usable solution file earns 0 without a request: the policy's doing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from kernelproof.agent.extract import extract_solution

URL_ENV = "KERNELPROOF_SERVE_URL"
TOKEN_ENV = "KERNELPROOF_SERVE_TOKEN"
DEFAULT_TIMEOUT_S = 3600.0  # one batch of verdicts; an evaluation is bounded by the server's limits


class RewardClient:
    """A client of the service's ``POST /v1/evaluate`` (httpx, sync and async)."""

    def __init__(
        self, url: str | None = None, token: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ):
        url = url or os.environ.get(URL_ENV)
        if not url:
            raise ValueError(f"the kernelproof service's URL: pass url= or set ${URL_ENV}")
        self.url = url.rstrip("/")
        token = token or os.environ.get(TOKEN_ENV)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout_s = timeout_s

    def evaluate(self, items: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """The service's answers for (task id, solution text) pairs, in order."""
        import httpx

        if not items:
            return []
        r = httpx.post(
            self.url + "/v1/evaluate", json=_body(items), headers=self.headers, timeout=self.timeout_s
        )
        return _results(r)

    async def aevaluate(self, items: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        import httpx

        if not items:
            return []
        async with httpx.AsyncClient(timeout=self.timeout_s, headers=self.headers) as client:
            r = await client.post(self.url + "/v1/evaluate", json=_body(items))
        return _results(r)


def _body(items: Sequence[tuple[str, str]]) -> dict[str, Any]:
    return {"items": [{"task": t, "solution": s} for t, s in items]}


def _results(r) -> list[dict[str, Any]]:
    if r.status_code != 200:
        raise RuntimeError(f"kernelproof serve answered {r.status_code}: {r.text[:500]}")
    return r.json()["results"]


def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string, or a conversation's last assistant message."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        said = [
            m.get("content", "") for m in completion if isinstance(m, dict) and m.get("role") == "assistant"
        ]
        return said[-1] if said else ""
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


def _plan(
    completions: Sequence[Any], tasks: Sequence[str]
) -> tuple[list[float | None], list[int], list[tuple[str, str]]]:
    if len(tasks) != len(completions):
        raise ValueError(f"{len(completions)} completions but {len(tasks)} task ids")
    rewards: list[float | None] = [0.0] * len(completions)
    where, items = [], []
    for i, (c, task) in enumerate(zip(completions, tasks)):
        got = extract_solution(completion_text(c))
        if got.source is not None:
            where.append(i)
            items.append((str(task), got.source))
    return rewards, where, items


def trl_reward(
    url: str | None = None, *, task_column: str = "task", token: str | None = None
) -> Callable[..., list[float | None]]:
    """A TRL reward function (sync) scoring completions with the service at ``url``."""
    client = RewardClient(url, token)

    def kernelproof_reward(
        prompts=None, completions=None, completion_ids=None, **columns
    ) -> list[float | None]:
        rewards, where, items = _plan(completions or [], _column(columns, task_column))
        for i, answer in zip(where, client.evaluate(items)):
            rewards[i] = answer.get("reward")
        return rewards

    return kernelproof_reward


def trl_reward_async(
    url: str | None = None, *, task_column: str = "task", token: str | None = None
) -> Callable[..., Any]:
    """A TRL reward function (async: TRL awaits it beside the others)."""
    client = RewardClient(url, token)

    async def kernelproof_reward(prompts=None, completions=None, completion_ids=None, **columns):
        rewards, where, items = _plan(completions or [], _column(columns, task_column))
        for i, answer in zip(where, await client.aevaluate(items)):
            rewards[i] = answer.get("reward")
        return rewards

    return kernelproof_reward


def _column(columns: dict[str, Any], name: str) -> list[str]:
    if name not in columns:
        raise ValueError(f"the dataset has no column {name!r} naming each sample's task (task_column=...)")
    return list(columns[name])


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    url: str | None = None,
    token: str | None = None,
) -> dict:
    """verl's custom reward function: the task id is ``ground_truth``; the service's URL from
    ``url`` (verl's ``custom_reward_function.reward_kwargs``), else ``extra_info["kernelproof_url"]``,
    else ``$KERNELPROOF_SERVE_URL``."""
    extra_info = extra_info or {}
    got = extract_solution(solution_str)
    if got.source is None:
        return {"score": 0.0, "judged": True, "pass": False, "code": "no_solution"}
    client = RewardClient(
        url or extra_info.get("kernelproof_url"), token or extra_info.get("kernelproof_token")
    )
    (answer,) = client.evaluate([(str(ground_truth), got.source)])
    reward = answer.get("reward")
    verdict = answer.get("verdict") or {}
    codes = [r.get("code", "") for r in verdict.get("reasons", [])]
    return {
        "score": float(reward) if reward is not None else 0.0,
        "judged": reward is not None,
        "pass": verdict.get("verdict") == "pass",
        "code": codes[0] if codes else "",
    }
