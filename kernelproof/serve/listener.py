"""Bind the socket, print where the service listens, and run uvicorn on it.

The socket is bound here, before uvicorn starts, so ``--port 0`` works: the line
``kernelproof serve: listening on http://HOST:PORT`` on stdout names the port the system chose.
"""

from __future__ import annotations

import socket
import sys

from kernelproof.serve.app import build_app
from kernelproof.serve.config import ServeConfig
from kernelproof.serve.service import Service

GRACEFUL_S = 5  # a stream still open at shutdown is cut after this; its queued jobs stay in the book


def listening_line(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"kernelproof serve: listening on http://{shown}:{port}"


def serve(config: ServeConfig) -> None:
    import uvicorn

    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, config.port))
    sock.listen(2048)  # listening before the line is printed: a client that reads it may connect at once
    service = Service(config)
    warmed = service.warm()  # before the line: a client that reads it finds the workers started
    if warmed:
        print(f"kernelproof serve: {warmed}", file=sys.stderr, flush=True)
    app = build_app(service)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_S,
            access_log=False,
        )
    )
    print(listening_line(config.host, sock.getsockname()[1]), flush=True)
    print(
        f"kernelproof serve: {len(service.catalog)} task(s), {len(service.backend.slots())} job(s) at once",
        file=sys.stderr,
        flush=True,
    )
    server.run(sockets=[sock])
