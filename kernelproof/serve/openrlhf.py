"""OpenRLHF's remote reward endpoint: ``POST /openrlhf/reward`` (also ``/reward``).

OpenRLHF posts ``{"query": [...], "prompts": [...], "labels": [...]}`` (``--remote_rm_url``) and
reads ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``. Each query is the prompt
followed by the model's response; the response is the query with its prompt cut off. The
solution is extracted from the response as the agent extracts it (kernelproof/agent/extract.py:
the last fenced Python block defining ``ModelNew``), and the task is named by the label (a task
id of the served task sets).

OpenRLHF needs a number for every sample: a sample that was not judged (an error verdict, not
the policy's doing) gets 0 in ``rewards`` and 0 in ``extra_logs["judged"]``, so a run can mask it
(docs/rewards.md). An answer with no usable solution file earns 0 (the policy's doing).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from kernelproof.agent.extract import extract_solution
from kernelproof.serve.jobs import QueueFull
from kernelproof.serve.request_records import EvalItem, RequestError
from kernelproof.serve.service import Service


def routes(service: Service) -> list[Route]:
    handler = _reward(service)
    return [Route("/openrlhf/reward", handler, methods=["POST"]), Route("/reward", handler, methods=["POST"])]


def response_of(query: str, prompt: str | None) -> str:
    """The model's response: the query with its prompt cut off (the whole query when it does not
    start with the prompt)."""
    return query[len(prompt) :] if prompt and query.startswith(prompt) else query


def _parse(doc: Any) -> tuple[list[str], list[str | None], list[str]]:
    if not isinstance(doc, dict):
        raise RequestError("the request must be a JSON object with query, prompts and labels")
    query, prompts, labels = doc.get("query"), doc.get("prompts"), doc.get("labels")
    if not isinstance(query, list) or not query or not all(isinstance(q, str) for q in query):
        raise RequestError("query must be a non-empty list of strings")
    if prompts is None:
        prompts = [None] * len(query)
    if not isinstance(prompts, list) or len(prompts) != len(query):
        raise RequestError("prompts must be a list as long as query")
    if (
        not isinstance(labels, list)
        or len(labels) != len(query)
        or not all(isinstance(x, str) for x in labels)
    ):
        raise RequestError("labels must be a list of task ids as long as query")
    return query, prompts, labels


def _reward(service: Service):
    async def handler(request: Request) -> Response:
        from kernelproof.serve.app import queue_full, read_json

        try:
            query, prompts, labels = _parse(await read_json(request))
        except RequestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        items, where, extracted = [], [], []
        for i, (q, p, label) in enumerate(zip(query, prompts, labels)):
            got = extract_solution(response_of(q, p if isinstance(p, str) else None))
            extracted.append(got)
            if got.source is not None:
                items.append(EvalItem(label, got.source))
                where.append(i)
        try:
            jobs = service.submit(tuple(items)) if items else []
        except RequestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        except QueueFull:
            return queue_full(service)
        done = await service.all_finished(jobs, request.is_disconnected) if jobs else []
        if done is None:
            return Response(status_code=499)
        n = len(query)
        rewards, judged, passed = [0.0] * n, [1.0] * n, [0.0] * n
        terms = {"correct": [0.0] * n, "speed": [0.0] * n, "coverage": [0.0] * n}
        codes: list[list[str]] = [["no_solution"] if e.source is None else [] for e in extracted]
        for i, job in zip(where, done):
            answer = service.answer(job, feedback=False)
            reward = answer.get("reward")
            judged[i] = 1.0 if reward is not None else 0.0
            rewards[i] = float(reward) if reward is not None else 0.0
            v = job.verdict
            passed[i] = 1.0 if v is not None and v.passed else 0.0
            codes[i] = v.codes if v is not None else ["cancelled"]
            for k in terms:
                terms[k][i] = float(answer.get("reward_terms", {}).get(k, 0.0))
        return JSONResponse(
            {
                "rewards": rewards,
                "scores": rewards,
                "extra_logs": {
                    "judged": judged,
                    "pass": passed,
                    **{f"{k}_term": v for k, v in terms.items()},
                },
                "codes": codes,  # the verdicts' reason codes (not in extra_logs, which holds numbers only)
            }
        )

    return handler
