"""Builds a solution asks for while it runs, served by the parent (kernelproof.build.runtime_request).

The candidate's worker sends a build message from inside whatever request is running (a load
whose ``__init__`` calls load_inline, a first forward that does); the worker process object hands
it to the :class:`BuildService` of its evaluation, whose answer goes back before the request's own
reply is awaited again. The service checks the message's schema, the evaluation's limits (a few
distinct builds, a few MiB of sources, none once timing has started), has the builder pool build
the call exactly as it builds an import-time call (a Python file making that one call: the same
flag checks, containment and cache), and copies the artefact into the worker's read-only folder.

A ``cpp_extension.load`` request names its source files: the service reads them itself, from the
worker's own scratch folder only, following no link (kernelproof.build.sources), and builds what
it read as load_inline of their text, the build the worker derived from its own read of the same
files. If the files changed in between, the digests differ and the worker finds no build.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelproof import text
from kernelproof.build import BuilderPool, CacheTamperError
from kernelproof.build import runtime_request as build_requests
from kernelproof.build import sources as build_sources
from kernelproof.errors import BuildRequestError
from kernelproof.evaluate import machine
from kernelproof.host import admission

DOCS = "docs/builds.md#builds-requested-at-run-time"
NAME_CHARS = 120  # a build name longer than this is cut where it is shown


def shown(value: object, limit: int = NAME_CHARS) -> str:
    """A field of the candidate's build request as the verdict shows it: every control and format
    character a visible escape (a newline, ESC, a bidi override), cut to `limit` characters. The
    request is the candidate's text (I9): in flags, messages, JSON and reports alike it says
    nothing to the medium (kernelproof/text.py)."""
    return text.cap(text.visible(value), limit)


class BuildService:
    """One evaluation's answers to its candidate's build messages."""

    def __init__(
        self, pool: BuilderPool, worker_private: str | Path, worker_scratch: str | Path | None = None
    ) -> None:
        self.pool = pool
        # The device slot of the evaluation this service answers for (made in its thread): lent
        # while a build runs, so that the device does not idle behind a compiler.
        self.admission = admission.held()
        self.private = Path(worker_private)
        # The worker's rw/ (its /tmp too), where the files a load request names are read.
        self.scratch = Path(worker_scratch) if worker_scratch is not None else None
        self.built: dict[str, str] = {}  # request key -> the build cache key served
        self.source_bytes = 0
        self.closed = ""  # why later requests are refused ("" while they are served)
        self.notes: list[str] = []  # one line per build served or refused: the verdict's flags
        # The first request that failed or was refused: the solution's compile_error even if it caught
        # the error (a fallback to PyTorch behind a failed build is not a pass).
        self.failed = ""
        # The first build it asked for that truly asked for CUDA this machine cannot build or run
        # (the builder's record of the request and the parent's facts: ``environment``).
        self.unmet = ""

    def close(self, why: str) -> None:
        """Refuse every later request, saying `why` (timing has started)."""
        self.closed = why

    def __call__(self, header: dict[str, Any]) -> dict[str, Any]:
        try:
            request = build_requests.parse(header)
        except build_requests.RequestError as exc:
            return build_requests.reply(False, f"a malformed build request: {exc}")
        name = shown(request.args.get("name", "kernelproof.native"))
        refused = self.closed  # nothing is read once timing has started
        if request.call == "load" and not refused:
            try:
                request = self._resolve(request)
            except BuildRequestError as exc:
                refused = str(exc)
        key = request.key()
        refused = refused or self._refusal(request, key)
        if refused:
            refused = shown(refused, text.LINE_CHARS)  # a path the worker named may be in it
            self.notes.append(f"build_request {name}: refused: {refused}")
            why = f"the build of '{name}' was refused: {refused} ({DOCS})"
            self.failed = self.failed or why
            return build_requests.reply(False, why)
        started = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="kp-build-request-"))
        try:
            path = work / "requested_build.py"  # never named by the worker: its name is any string
            path.write_text(request.source_text())
            with admission.stand_aside(self.admission):
                result = self.pool.build(path)
            if result.ok:
                try:
                    self.pool.materialize(result, self.private)
                except (CacheTamperError, KeyError) as exc:
                    return build_requests.reply(False, f"the build of '{name}' could not be provided: {exc}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        unmet = machine.unmet(result, self.pool.device)
        if unmet is not None:  # the evaluation's `environment`, whatever the solution does with the reply
            self.unmet = self.unmet or unmet
            self.notes.append(f"build_request {name}: asks for CUDA this machine cannot build or run")
        if not result.ok:
            self.notes.append(f"build_request {name}: failed")
            log = result.log.replace(str(work), "")
            self.failed = (
                self.failed or f"the solution failed to build '{name}' (asked for at run time): {log}"
            )
            return build_requests.reply(False, f"the solution failed to build '{name}': {log}")
        if key not in self.built:
            self.source_bytes += request.source_bytes
        self.built[key] = result.key
        how = "cached" if result.cached else f"built in {time.monotonic() - started:.1f} s"
        self.notes.append(f"build_request {name}: {how} by the builder pool, at the solution's request")
        return build_requests.reply(True)

    def _resolve(self, request: build_requests.BuildRequest) -> build_requests.BuildRequest:
        """A load request as the load_inline request of its files' text, read here from the
        worker's scratch folder (BuildRequestError naming a path that cannot be read there)."""
        if self.scratch is None:
            raise BuildRequestError("this worker has no scratch folder to read source files from")
        paths = request.args["sources"]
        if not paths:
            raise BuildRequestError("cpp_extension.load names no source files")
        if len(paths) > build_sources.MAX_SOURCE_FILES:
            raise BuildRequestError(
                f"cpp_extension.load names more than {build_sources.MAX_SOURCE_FILES} files"
            )
        texts, total = [], self.source_bytes
        for path in paths:  # the evaluation's cap on sources, checked as the files are read
            texts.append((path, build_sources.read_confined(self.scratch, path)))
            total += len(texts[-1][1].encode())
            if total > build_requests.MAX_SOURCE_BYTES:
                raise BuildRequestError(
                    f"more than {build_requests.MAX_SOURCE_BYTES // 2**20} MiB of sources in one evaluation"
                )
        args = build_sources.inline_arguments(request.args, texts)
        return build_requests.BuildRequest({k: args[k] for k in build_requests.ARGS}, "load_inline")

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
