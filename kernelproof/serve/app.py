"""The HTTP application: the service's own API, with the drop-in endpoints mounted beside it.

Own API (docs/serve.md):

- ``POST /v1/evaluate``: one item, or ``{"items": [...]}``; answers when every verdict is in.
- ``POST /v1/jobs``: the same body; answers at once (202) with the job ids.
- ``GET /v1/jobs/{id}``, ``GET /v1/batches/{batch}``: a job, a request's jobs, as they stand.
- ``POST /v1/jobs/stream``, ``GET /v1/batches/{batch}/stream``: NDJSON, one line per job as it
  finishes (the first line of a new stream names the ids).
- ``GET /v1/tasks``, ``GET /healthz``, ``GET /metrics``.

A full queue answers 429 with ``Retry-After``; a client that goes away while it waits on
``/v1/evaluate`` or a stream has its queued jobs cancelled.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from kernelproof.serve.book import QUEUED, RUNNING
from kernelproof.serve.guard import Guard
from kernelproof.serve.jobs import QueueFull
from kernelproof.serve.request_records import RequestError, parse_batch
from kernelproof.serve.service import Service

NDJSON = "application/x-ndjson"


def build_app(service: Service):
    """The ASGI application (the guard around Starlette's router) for one service."""
    routes = [
        Route("/healthz", lambda r: JSONResponse({"status": "ok"}), methods=["GET"]),
        Route("/metrics", _metrics(service), methods=["GET"]),
        Route("/v1/tasks", lambda r: JSONResponse({"tasks": service.catalog.ids()}), methods=["GET"]),
        Route("/v1/evaluate", _evaluate(service), methods=["POST"]),
        Route("/v1/jobs", _submit(service), methods=["POST"]),
        Route("/v1/jobs/stream", _submit_stream(service), methods=["POST"]),
        Route("/v1/jobs/{job_id}", _job(service), methods=["GET"]),
        Route("/v1/batches/{batch}", _batch(service), methods=["GET"]),
        Route("/v1/batches/{batch}/stream", _batch_stream(service), methods=["GET"]),
    ]
    from kernelproof.serve import kernelgym, openrlhf

    routes += kernelgym.routes(service) + openrlhf.routes(service)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        service.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    return Guard(app, service.config.token, service.config.max_body_bytes, service.metrics)


async def read_json(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise RequestError("the request body is not JSON", status=400) from None


def refusal(exc: RequestError) -> JSONResponse:
    return JSONResponse({"error": str(exc)}, status_code=exc.status)


def queue_full(service: Service) -> JSONResponse:
    retry = service.config.retry_after_s
    return JSONResponse(
        {"error": f"the queue is full ({service.config.queue_limit} jobs): retry after {retry} s"},
        status_code=429,
        headers={"Retry-After": str(retry)},
    )


def _metrics(service: Service):
    async def handler(request: Request) -> Response:
        return PlainTextResponse(
            service.metrics.render(service.device_states()), media_type="text/plain; version=0.0.4"
        )

    return handler


def _accepting(service: Service, handler):
    """Parse the body, submit its items, and hand the jobs to ``handler``; the refusals in one place."""

    async def route(request: Request) -> Response:
        try:
            doc = await read_json(request)
            jobs = service.submit(parse_batch(doc))
        except RequestError as exc:
            return refusal(exc)
        except QueueFull:
            return queue_full(service)
        return await handler(request, jobs, not (isinstance(doc, dict) and "items" in doc))

    return route


def _evaluate(service: Service):
    async def handler(request: Request, jobs, single: bool) -> Response:
        done = await service.all_finished(jobs, request.is_disconnected)
        if done is None:
            return Response(status_code=499)  # nobody is listening any more
        answers = [service.answer(j) for j in done]
        return JSONResponse(answers[0] if single else {"results": answers})

    return _accepting(service, handler)


def _submit(service: Service):
    async def handler(request: Request, jobs, single: bool) -> Response:
        body = {"batch": jobs[0].batch, "jobs": [j.id for j in jobs]}
        return JSONResponse(body, status_code=202)

    return _accepting(service, handler)


def _stream_of(service: Service, jobs, request: Request, head: dict | None):
    """NDJSON of the jobs as they finish. A stream closed before its last line (the client went
    away: Starlette then cancels this generator) cancels those of its jobs still queued."""

    async def lines():
        delivered: set[str] = set()
        try:
            if head is not None:
                yield json.dumps(head) + "\n"
            pending = [j for j in jobs if j.state in (QUEUED, RUNNING)]
            for j in jobs:
                if j.state not in (QUEUED, RUNNING):
                    delivered.add(j.id)
                    yield json.dumps(service.answer(j)) + "\n"
            async for job in service.finished(pending):
                delivered.add(job.id)
                yield json.dumps(service.answer(job)) + "\n"
        finally:
            left = [j.id for j in jobs if j.id not in delivered]
            if left:
                service.scheduler.cancel(left)

    return StreamingResponse(lines(), media_type=NDJSON)


def _submit_stream(service: Service):
    async def handler(request: Request, jobs, single: bool) -> Response:
        return _stream_of(service, jobs, request, {"batch": jobs[0].batch, "jobs": [j.id for j in jobs]})

    return _accepting(service, handler)


def _job(service: Service):
    async def handler(request: Request) -> Response:
        job = service.book.get(request.path_params["job_id"])
        if job is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        return JSONResponse(service.answer(job))

    return handler


def _batch(service: Service):
    async def handler(request: Request) -> Response:
        jobs = service.book.batch(request.path_params["batch"])
        if not jobs:
            return JSONResponse({"error": "no such batch"}, status_code=404)
        return JSONResponse({"batch": jobs[0].batch, "results": [service.answer(j) for j in jobs]})

    return handler


def _batch_stream(service: Service):
    async def handler(request: Request) -> Response:
        jobs = service.book.batch(request.path_params["batch"])
        if not jobs:
            return JSONResponse({"error": "no such batch"}, status_code=404)
        return _stream_of(service, jobs, request, None)

    return handler
