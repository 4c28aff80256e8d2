"""Builds a solution asks for while it runs, served by the parent (kernelproof.build.requests).

The candidate's worker sends a build message from inside whatever request is running (a load
whose ``__init__`` calls load_inline, a first forward that does); the worker process object hands
it to the :class:`BuildService` of its evaluation, whose answer goes back before the request's own
reply is awaited again. The service checks the message's schema, the evaluation's limits (a few
distinct builds, a few MiB of sources, none once timing has started), has the builder pool build
the call exactly as it builds an import-time call (a Python file making that one call: the same
flag checks, containment and cache), and copies the artefact into the worker's read-only folder.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelproof.build import BuilderPool, CacheTamperError
from kernelproof.build import requests as build_requests

DOCS = "docs/builds.md#builds-requested-at-run-time"


class BuildService:
    """One evaluation's answers to its candidate's build messages."""

    def __init__(self, pool: BuilderPool, worker_private: str | Path) -> None:
        self.pool = pool
        self.private = Path(worker_private)
        self.built: dict[str, str] = {}  # request key -> the build cache key served
        self.source_bytes = 0
        self.closed = ""  # why later requests are refused ("" while they are served)
        self.notes: list[str] = []  # one line per build served or refused: the verdict's flags
        # The first request that failed or was refused: the solution's compile_error even if it caught
        # the error (a fallback to PyTorch behind a failed build is not a pass).
        self.failed = ""

    def close(self, why: str) -> None:
        """Refuse every later request, saying `why` (timing has started)."""
        self.closed = why

    def __call__(self, header: dict[str, Any]) -> dict[str, Any]:
        try:
            request = build_requests.parse(header)
        except build_requests.RequestError as exc:
            return build_requests.reply(False, f"a malformed build request: {exc}")
        name = request.args["name"]
        key = request.key()
        refused = self._refusal(request, key)
        if refused:
            self.notes.append(f"build_request {name}: refused: {refused}")
            text = f"the build of {name!r} was refused: {refused} ({DOCS})"
            self.failed = self.failed or text
            return build_requests.reply(False, text)
        started = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="kp-build-request-"))
        try:
            path = work / f"requested_{name}.py"
            path.write_text(request.source_text())
            result = self.pool.build(path)
            if result.ok:
                try:
                    self.pool.materialize(result, self.private)
                except (CacheTamperError, KeyError) as exc:
                    return build_requests.reply(False, f"the build of {name!r} could not be provided: {exc}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if not result.ok:
            self.notes.append(f"build_request {name}: failed")
            log = result.log.replace(str(work), "")
            self.failed = (
                self.failed or f"the solution failed to build {name!r} (asked for at run time): {log}"
            )
            return build_requests.reply(False, f"the solution failed to build {name!r}: {log}")
        if key not in self.built:
            self.source_bytes += request.source_bytes
        self.built[key] = result.key
        how = "cached" if result.cached else f"built in {time.monotonic() - started:.1f} s"
        self.notes.append(f"build_request {name}: {how} by the builder pool, at the solution's request")
        return build_requests.reply(True)

    def _refusal(self, request: build_requests.BuildRequest, key: str) -> str:
        if self.closed:
            return self.closed
        if key in self.built:
            return ""
        if len(self.built) >= build_requests.MAX_BUILDS:
            return f"more than {build_requests.MAX_BUILDS} distinct builds in one evaluation"
        if self.source_bytes + request.source_bytes > build_requests.MAX_SOURCE_BYTES:
            return f"more than {build_requests.MAX_SOURCE_BYTES // 2**20} MiB of sources in one evaluation"
        return ""
