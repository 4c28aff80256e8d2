"""KernelGYM-compatible endpoints, so a Dr. Kernel training script can point at kernelproof by URL.

``POST /evaluate`` (one request), ``POST /evaluate/batch`` (a list, or ``{"tasks": [...]}``),
``GET /status/{task_id}``, ``GET /results/{task_id}``: KernelGYM's request fields (``task_id,
reference_code, kernel_code, entry_point, backend, num_correct_trials, num_perf_trials, timeout,
reference_backend``) and its response fields (``status, compiled, correctness, decoy_kernel,
reference_runtime, kernel_runtime, speedup, metadata, error_code``), filled from kernelproof's
verdict with every kernelproof check applied.

What differs, on purpose (docs/serve.md, "For KernelGYM users"):

- The reference runs in the trusted parent, so it is the operator's: ``reference_code`` is judged
  against only when its bytes are those of a task the service was started with (or the operator
  passed ``--trust-client-tasks``); else ``task_id`` must name a served task.
- The trial counts and the timeout a client asks for are recorded in ``metadata``, never obeyed:
  kernelproof's own correctness cases and timing rounds decide, so no request can weaken a check.
- ``speedup`` is the lower 95 % bound of the speedup over the best baseline where the verdict makes
  a speed claim (a pass on a GPU), else 0: never a point estimate.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from kernelproof.serve.book import CANCELLED, DONE, QUEUED, RUNNING, Job
from kernelproof.serve.jobs import QueueFull
from kernelproof.serve.request_records import EvalItem, RequestError
from kernelproof.serve.service import Service
from kernelproof.verdict import Outcome, ReasonCode, Verdict

FIELDS = (
    "task_id",
    "reference_code",
    "kernel_code",
    "entry_point",
    "backend",
    "num_correct_trials",
    "num_perf_trials",
    "timeout",
    "reference_backend",
    "toolkit",
    "backend_adapter",
    "priority",
)
STATUS = {QUEUED: "pending", RUNNING: "processing", DONE: "completed", CANCELLED: "cancelled"}
DECOY_CODES = (ReasonCode.NO_CUSTOM_KERNEL.value, ReasonCode.LOW_KERNEL_COVERAGE.value)


def routes(service: Service) -> list[Route]:
    return [
        Route("/evaluate", _evaluate(service), methods=["POST"]),
        Route("/evaluate/batch", _evaluate_batch(service), methods=["POST"]),
        Route("/status/{task_id:path}", _status(service), methods=["GET"]),
        Route("/results/{task_id:path}", _results(service), methods=["GET"]),
    ]


def parse_request(service: Service, doc: Any, where: str = "request") -> tuple[str, EvalItem, dict[str, Any]]:
    """(KernelGYM's task_id, the item to judge, what was asked and not obeyed) or RequestError."""
    if not isinstance(doc, dict):
        raise RequestError(f"{where} must be a JSON object")
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise RequestError(f"{where} has unknown field(s): {', '.join(unknown)}")
    task_id, kernel = doc.get("task_id"), doc.get("kernel_code")
    if not isinstance(task_id, str) or not task_id.strip() or len(task_id) > 512:
        raise RequestError(f"{where}.task_id must be a non-empty string (at most 512 characters)")
    if not isinstance(kernel, str) or not kernel.strip():
        raise RequestError(f"{where}.kernel_code must be a non-empty string")
    entry = doc.get("entry_point")
    if entry is not None and entry != "ModelNew":
        raise RequestError(
            f"{where}.entry_point must be ModelNew (the class a solution defines), not {entry!r}"
        )
    reference = doc.get("reference_code")
    if reference is not None and not isinstance(reference, str):
        raise RequestError(f"{where}.reference_code must be a string")
    served_id = _served_task(service, task_id, reference)
    asked = {
        k: doc[k]
        for k in ("backend", "num_correct_trials", "num_perf_trials", "timeout", "reference_backend")
        if k in doc
    }
    if served_id is not None:
        return task_id, EvalItem(served_id, kernel), asked
    return task_id, EvalItem(task_id, kernel, reference=reference), asked


def _served_task(service: Service, task_id: str, reference: str | None) -> str | None:
    """The served task this request means: the one whose file holds ``reference_code``'s bytes,
    else the one ``task_id`` names when no other reference was sent; None: the client's own."""
    if reference is not None:
        return service.catalog.holding(reference)
    if service.catalog.find(task_id) is None:
        raise RequestError(
            f"no task {task_id!r} in the task sets this service was started with, and no reference_code",
            status=404,
        )
    return task_id


def _submit(service: Service, docs: list[Any]) -> list[str] | Response:
    try:
        parsed = [
            parse_request(service, d, f"tasks[{i}]" if len(docs) > 1 else "request")
            for i, d in enumerate(docs)
        ]
        jobs = service.submit(tuple(item for _, item, _ in parsed))
    except RequestError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    except QueueFull:
        from kernelproof.serve.app import queue_full

        return queue_full(service)
    for (name, _, asked), job in zip(parsed, jobs):
        service.book.alias(name, job.id)
        service.asked[job.id] = asked
    return [name for name, _, _ in parsed]


def _evaluate(service: Service):
    async def handler(request: Request) -> Response:
        from kernelproof.serve.app import read_json

        try:
            doc = await read_json(request)
        except RequestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        names = _submit(service, [doc])
        if isinstance(names, Response):
            return names
        return JSONResponse({"task_id": names[0], "status": "pending"})

    return handler


def _evaluate_batch(service: Service):
    async def handler(request: Request) -> Response:
        from kernelproof.serve.app import read_json

        try:
            doc = await read_json(request)
        except RequestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        docs = doc.get("tasks") if isinstance(doc, dict) else doc
        if not isinstance(docs, list) or not docs:
            return JSONResponse(
                {"error": 'a batch is a non-empty list of requests (or {"tasks": [...]})'}, status_code=422
            )
        names = _submit(service, docs)
        if isinstance(names, Response):
            return names
        return JSONResponse({"task_ids": names, "status": "pending"})

    return handler


def _status(service: Service):
    async def handler(request: Request) -> Response:
        job = service.book.by_alias(request.path_params["task_id"])
        if job is None:
            return JSONResponse({"error": "no such task_id"}, status_code=404)
        return JSONResponse({"task_id": request.path_params["task_id"], "status": _status_of(job)})

    return handler


def _results(service: Service):
    async def handler(request: Request) -> Response:
        name = request.path_params["task_id"]
        job = service.book.by_alias(name)
        if job is None:
            return JSONResponse({"error": "no such task_id"}, status_code=404)
        return JSONResponse(result_of(service, name, job))

    return handler


def _status_of(job: Job) -> str:
    if job.state == DONE and job.verdict is not None and job.verdict.verdict is Outcome.ERROR:
        return "failed"
    return STATUS.get(job.state, job.state)


def result_of(service: Service, name: str, job: Job) -> dict[str, Any]:
    """KernelGYM's response fields for one job (nulls while it is not done)."""
    out: dict[str, Any] = {
        "task_id": name,
        "status": _status_of(job),
        "compiled": None,
        "correctness": None,
        "decoy_kernel": None,
        "reference_runtime": None,
        "kernel_runtime": None,
        "speedup": None,
        "metadata": {"asked_not_obeyed": service.asked.get(job.id, {})},
        "error_code": None,
    }
    v = job.verdict
    if job.state != DONE or v is None:
        return out
    answer = service.answer(job)
    reference_ms, kernel_ms = _runtimes(v)
    out.update(
        compiled=ReasonCode.COMPILE_ERROR.value not in v.codes,
        correctness=v.passed,
        decoy_kernel=any(c in DECOY_CODES for c in v.codes),
        reference_runtime=reference_ms,
        kernel_runtime=kernel_ms,
        speedup=_speedup_low(v),
        error_code=v.codes[0] if v.codes else None,
    )
    out["metadata"].update(
        **_coverage_fields(v),
        verdict=v.verdict.value,
        codes=v.codes,
        reward=answer["reward"],
        judged=answer["judged"],
        reward_terms=answer["reward_terms"],
        feedback=answer["feedback"],
        kernelproof_verdict=answer["verdict"],
    )
    return out


def _coverage_fields(v: Verdict) -> dict[str, Any]:
    """KernelGYM's coverage fields, which Dr. Kernel's reward client reads from ``metadata``
    (``num_custom_kernels``, ``num_total_kernels``, ``custom_kernel_cuda_time_in_profiling_us``,
    ``total_kernel_run_time_in_profiling_us``), from the parent's profile of one call on a GPU: the
    kernels the verdict lists (its top entries by GPU time) and the solution's share of whole
    durations (``coverage.custom_fraction_raw``). Absent where coverage was not judged (the CPU)."""
    cov = v.coverage
    if cov is None or cov.custom_fraction_raw is None or not cov.kernels:
        return {}
    total_us = sum(ms for _name, _origin, ms in cov.kernels) * 1e3
    return {
        "num_custom_kernels": sum(1 for _name, origin, _ms in cov.kernels if origin == "solution"),
        "num_total_kernels": len(cov.kernels),
        "custom_kernel_cuda_time_in_profiling_us": cov.custom_fraction_raw * total_us,
        "total_kernel_run_time_in_profiling_us": total_us,
    }


def _speedup_low(v: Verdict) -> float:
    if not v.passed or (v.claims is not None and not v.claims.speed):
        return 0.0
    best = v.speedup.get("best")
    if best is None or best.ci95 is None or best.ci95[0] is None:
        return 0.0
    return float(best.ci95[0])


def _runtimes(v: Verdict) -> tuple[float | None, float | None]:
    if v.timing is None or not v.timing.shapes:
        return None, None
    shape = v.timing.shapes[0]
    baseline = shape.baselines.get("eager") or next(iter(shape.baselines.values()), None)
    return (baseline.median_ms if baseline is not None else None), shape.candidate.median_ms
