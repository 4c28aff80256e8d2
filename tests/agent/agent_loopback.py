"""Loopback LLM servers for the tests: real HTTP on 127.0.0.1, spoken to by the real SDKs.

One server class answers both the OpenAI chat-completions route and the Anthropic messages route
with scripted actions: a text reply (usage counted as bytes/4 and cut at the request's token cap
like a real server, unless the reply is told to report more output tokens than the cap), a 200
reply whose body is not the API's format, an HTTP error status with headers (429 with
retry-after), or a dropped connection. Every request is counted and kept, so tests can assert that replay makes none.
"""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    text: str  # the assistant's answer
    output_tokens: int | None = None  # usage to report whatever the cap (a server that overbills)


@dataclass(frozen=True)
class Raw:
    """A 200 reply with this body, whatever it is (not JSON, or JSON of another shape)."""

    body: str


@dataclass(frozen=True)
class Status:
    code: int  # HTTP status
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""  # the error message in the body ("loopback CODE" when empty)


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering."""


Action = Reply | Raw | Status | Drop


@dataclass
class Request:
    path: str  # "/v1/chat/completions" | "/v1/messages"
    body: dict[str, Any]

    @property
    def text(self) -> str:
        """All prompt text of the request (system and messages)."""
        parts = [self.body.get("system") or ""]
        for m in self.body.get("messages", []):
            c = m.get("content")
            parts.append(c if isinstance(c, str) else json.dumps(c))
        return "\n".join(parts)

    @property
    def last_user(self) -> str:
        users = [m for m in self.body.get("messages", []) if m.get("role") == "user"]
        return users[-1]["content"] if users else ""


def tokens(text: str) -> int:
    return math.ceil(len(text.encode()) / 4)


class LoopbackServer:
    """Serve ``respond(request) -> Action`` on both routes until closed."""

    def __init__(self, respond: Callable[[Request], Action]):
        self.respond = respond
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(size) or b"{}")
                req = Request(self.path.split("?")[0], body)
                with server._lock:
                    server.requests.append(req)
                action = server.respond(req)
                if isinstance(action, Drop):
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if isinstance(action, Status):
                    body = _error_body(req.path, action.code, action.message)
                    self._send(action.code, body, action.headers)
                    return
                if isinstance(action, Raw):
                    self._send(200, action.body, {})
                    return
                self._send(200, _reply_body(req, action.text, action.output_tokens), {})

            def _send(self, code: int, doc: dict[str, Any] | str, headers: dict[str, str]) -> None:
                data = (doc if isinstance(doc, str) else json.dumps(doc)).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _reply_body(req: Request, text: str, reported: int | None = None) -> dict[str, Any]:
    cap = req.body.get("max_completion_tokens") or req.body.get("max_tokens") or 10**9
    out_tokens, cut = tokens(text), False
    if out_tokens > cap:  # a real server stops at the cap
        text, out_tokens, cut = text.encode()[: cap * 4].decode(errors="ignore"), cap, True
    if reported is not None:
        out_tokens = reported
    in_tokens = tokens(req.text)
    model = req.body.get("model", "")
    if req.path == "/v1/messages":
        return {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "max_tokens" if cut else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens},
        }
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "length" if cut else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": in_tokens,
            "completion_tokens": out_tokens,
            "total_tokens": in_tokens + out_tokens,
        },
    }


def _error_body(path: str, code: int, message: str = "") -> dict[str, Any]:
    message = message or f"loopback {code}"
    kind = {429: "rate_limit_error", 401: "authentication_error", 400: "invalid_request_error"}.get(
        code, "api_error"
    )
    if path == "/v1/messages":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None}}
