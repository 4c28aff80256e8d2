"""Step 2, build: CUDA and native solutions are built in the trusted parent before their worker runs.

A solution that calls load_inline (``cuda``) or kernelproof.native.load_cuda (``native``) is built
by the builder pool (kernelproof.build) as soon as the evaluation starts, while the task is set up
and the worker starts. A failed build is the verdict; a good one is copied, hash-checked, into the
candidate worker's private directory, and the worker is told to route load_inline to
kernelproof.build.inline, so the solution's own import loads the prebuilt module and compiles
nothing. Triton and plain torch solutions have no build step.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace

from kernelproof import pyast
from kernelproof.build import BuilderPool, BuildResult, CacheTamperError
from kernelproof.errors import WorkerError
from kernelproof.evaluate.step_records import Built, Setup
from kernelproof.host.process import WorkerProcess
from kernelproof.solution import SolutionFile
from kernelproof.verdict import BuildRecord, Reason, ReasonCode

BUILT_BACKENDS = ("cuda", "native")
_ERROR_LINE = re.compile(r"(: error|error:|fatal error|undefined reference|FAILED:)")


@dataclass(frozen=True)
class Provided:
    """What :func:`provide` put into a worker."""

    result: BuildResult  # the build the worker loads (a rebuild, if the entry was refused)
    rebuilt: bool  # the cache entry failed its hash check and was built again
    failure: Reason | None  # the evaluation must stop: the build could not be provided


@dataclass
class PendingBuild:
    """A build submitted to a pool: what the pipeline waits on, then materialises from."""

    pool: BuilderPool
    source_path: str  # names the solution's file; never read again
    future: Future[BuildResult]
    data: bytes | None = None  # the solution's bytes as its evaluation read them: what a rebuild builds


def needs_build(backend: str) -> bool:
    return backend in BUILT_BACKENDS


def record_of(result: BuildResult, backend: str, wait_s: float, rebuilt: bool = False) -> BuildRecord:
    return BuildRecord(
        backend=backend,
        ok=result.ok,
        cached=result.cached,
        strategy=result.strategy,
        build_s=round(result.seconds, 3),
        wait_s=round(wait_s, 3),
        rebuilt=rebuilt,
    )


def failure(result: BuildResult, source: str = "") -> Reason | None:
    """The reason a build rejects the solution, or None when it built (`source`: the solution's
    text, to point a native compile error at its line in the solution file)."""
    if result.violation:
        return Reason(
            ReasonCode.FORBIDDEN_CONSTRUCT,
            f"forbidden action while building the solution: {result.violation}",
            result.log,
        )
    if result.timed_out:
        first = result.log.splitlines()[0] if result.log else "the build did not finish and was killed"
        return Reason(ReasonCode.TIMEOUT, first, result.log)
    if not result.ok:
        head = _headline(result.log)
        m = re.match(r"kernels\.cu\((\d+)\)", head)
        line = _native_line(source, int(m.group(1))) if m and result.backend == "native" else None
        where = f" (solution line {line})" if line else ""
        why = READ_ONLY_FOLDER if _OWN_FOLDER_WRITE.search(result.log) else ""
        return Reason(
            ReasonCode.COMPILE_ERROR, f"the solution failed to build: {head}{where}{why}", result.log
        )
    return None


# A write into the folder of the solution's own file (``os.path.dirname(__file__)``): the builder
# imports a copy of the file from its staging src/, which the builder may read and never write (nor
# may the worker its copy's folder: kernelproof/host/process.py), so no build lands beside it.
_OWN_FOLDER_WRITE = re.compile(
    r"(PermissionError|Read-only file system|Permission denied)[^\n]*/src/[^/\n]+['\"]?$", re.M
)
READ_ONLY_FOLDER = (
    ". The folder holding the solution's file is read-only to the solution in kernelproof (the file "
    "runs as a copy, in the builder and in the worker): write generated sources under "
    "tempfile.gettempdir() or the working directory instead "
    "(docs/builds.md#builds-requested-at-run-time)"
)


def _native_line(source: str, n: int) -> int | None:
    """The solution line of line `n` of a native kernel source, when the solution holds exactly
    one kernel source, as one plain string literal whose lines are the file's lines."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return None
    literals = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value
    ]
    if len(literals) != 1:
        return None
    node = literals[0]
    newlines = node.value.count("\n")
    if node.end_lineno is None or node.end_lineno - node.lineno != newlines or n > newlines + 1:
        return None
    return node.lineno + n - 1


def _headline(log: str) -> str:
    """The first compiler error line (file and line of the error), else the last line of the log."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in lines:
        if _ERROR_LINE.search(ln) and not ln.startswith("FAILED:"):
            # The builder's staging paths say nothing to the reader: base names only.
            return re.sub(r"(?:/[^\s:/()]+)+/([^\s:/()]+)", r"\1", ln)[:300]
    return lines[-1][:300] if lines else "no log"


def provide(pending: PendingBuild, result: BuildResult, worker: WorkerProcess, timeout_s: float) -> Provided:
    """Copy the build into the worker's private directory and switch the worker to prebuilt loading.

    A cache entry that fails its hash check on the way (CacheTamperError: it was changed after
    publication, and has been evicted) is built once more; a second refusal is build_cache_tamper.
    """
    rebuilt = False
    for attempt in (1, 2):
        try:
            pending.pool.materialize(result, worker.private)
            break
        except (CacheTamperError, KeyError) as exc:
            if attempt == 2:
                if isinstance(exc, CacheTamperError):
                    reason = Reason(
                        ReasonCode.BUILD_CACHE_TAMPER,
                        "the build cache entry was changed after publication, and again after a rebuild",
                        exc.problem,
                    )
                    return Provided(result, rebuilt, reason)
                raise WorkerError(f"the build cache lost entry {result.key[:16]} twice") from None
            result = pending.pool.submit(pending.source_path, pending.data).result()
            rebuilt = True
            reason = failure(result)
            if reason is not None:
                return Provided(result, rebuilt, reason)
    reply, _ = worker.request({"op": "prebuilt", "arch": pending.pool.options.arch or ""}, [], timeout_s)
    if not reply.get("ok"):
        raise WorkerError(f"the worker refused prebuilt loading: {reply.get('message')}")
    return Provided(result, rebuilt, None)


def preparer(pending: PendingBuild, result: BuildResult, timeout_s: float) -> Callable[[WorkerProcess], None]:
    """For another worker of the same evaluation (the sanitizer's): the same build, provided again."""

    def prepare(worker: WorkerProcess) -> None:
        provide(pending, result, worker, timeout_s)

    return prepare


def with_worker_report(record: BuildRecord, report: dict | None) -> BuildRecord:
    """Add what the worker said about its import: did it load prebuilt artifacts or compile?"""
    if not isinstance(report, dict):
        return record
    inline = [str(s) for s in report.get("inline", [])]
    native = int(report.get("native_compiled", 0) or 0)
    compiled = any(s not in ("prebuilt", "requested") for s in inline) or native > 0
    return replace(record, worker_compiled=compiled)


def wait_for_build(setup: Setup) -> Built:
    """Block until the solution's build is done; nothing to wait for when it has no build step."""
    if setup.pending_build is None:
        return Built(None, None)
    return awaited(setup.pending_build, setup.solution.file)


def awaited(pending: PendingBuild, file: SolutionFile) -> Built:
    """The build, once done: its result, the record the verdict shows (with the seconds waited
    here) and the reason it rejects the solution, if any."""
    t0 = time.monotonic()
    result = pending.future.result()
    record = record_of(result, file.triage.backend, time.monotonic() - t0)
    return Built(result, record, failure(result, file.source))


def install_build(setup: Setup, built: Built, worker: WorkerProcess, timeout_s: float) -> Built:
    """The build copied into the candidate's worker (hash-checked), the worker told to load it.

    Returns the record of what the worker got: the same build, or one built again because the
    cache entry failed its hash check on the way (flagged), or the reason it could not be provided.
    """
    pending = setup.pending_build
    if pending is None or built.result is None or built.record is None:
        return built
    t0 = time.monotonic()
    got = provide(pending, built.result, worker, timeout_s)
    record, flags = built.record, built.flags
    if got.rebuilt:
        waited = built.record.wait_s + time.monotonic() - t0
        record = record_of(got.result, built.record.backend, waited, rebuilt=True)
        flags += ("build_cache: an entry failed its hash check and was evicted; built again",)
    return Built(got.result, record, got.failure, flags)
