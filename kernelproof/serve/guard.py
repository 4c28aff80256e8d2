"""Who may talk to the service and how much they may send: a pure ASGI middleware.

Why at the ASGI layer: a body over the limit is refused (413) before it is read into memory,
whether it announces its length or streams it, and a request without the bearer token (401) never
reaches a route. The token is compared in constant time (``hmac.compare_digest``). ``/healthz``
answers without a token, so a load balancer can probe it; it says nothing but "ok".
"""

from __future__ import annotations

import hmac
import json

from kernelproof.serve.prometheus import Metrics

OPEN_PATHS = frozenset({"/healthz"})


class Guard:
    def __init__(self, app, token: str | None, max_body_bytes: int, metrics: Metrics):
        self.app = app
        self.token = token.encode() if token else None
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.token is not None and scope.get("path") not in OPEN_PATHS and not self._authorised(scope):
            self.metrics.refused_auth()
            return await _answer(
                send,
                401,
                "a bearer token is required (Authorization: Bearer ...)",
                [(b"www-authenticate", b"Bearer")],
            )
        length = _content_length(scope)
        if length is not None and length > self.max_body_bytes:
            self.metrics.refused_size()
            return await _answer(send, 413, f"the request body is over {self.max_body_bytes} bytes")
        # The body is read here, up to the limit, before the app sees a byte of it; the app
        # then reads it from memory. A streamed body over the limit is refused as one announced.
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body was complete
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                self.metrics.refused_size()
                return await _answer(send, 413, f"the request body is over {self.max_body_bytes} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)

    def _authorised(self, scope) -> bool:
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)
        return False


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _answer(send, status: int, message: str, headers: list | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
