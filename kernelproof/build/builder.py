"""Build one solution in a separate, killable process that sees only its own staging directory.

Building means importing the solution: load_inline compiles at import, a native solution's
load_cuda compiles at import, and Triton solutions are checked for import errors (their kernels
compile at first launch, in the worker). The import runs untrusted code, so it runs in a child
process (invariant I8) with a scrubbed environment, a timeout that kills its whole process group,
every cache and temporary directory pointed inside the staging directory, and the containment of
a candidate worker (kernelproof.sandbox: its own uid as root, Landlock with writes only to
``out/``, ``tmp/``, ``home/`` and ``result.json``, seccomp). It imports its own copy of the
solution (``src/``), never the file in the user's folder, whose siblings stay out of its reach. Of
what it leaves in ``<staging>/out``, the parent publishes only the declared outputs
(:func:`declared_output`: the built extensions with their stamps, and the native cubins) after its
own checks (kernelproof.build.cache); anything else a solution writes there is never published nor
copied into a worker, and nothing it prints or writes is trusted beyond being shown as the build log.

Staging layout::

    src/                    the solution's copy the builder imports; lib/: the kernelproof package link
    out/torch_extensions/   TORCH_EXTENSIONS_DIR (load_inline builds: kp-<name>-<digest>/<name>.so)
    out/triton/             TRITON_CACHE_DIR (never published: Triton compiles in the worker)
    out/native/             KERNELPROOF_NATIVE_DIR (kernelproof.native cubins: <hash>.cubin)
    pch/                    the build's private copy of a precompiled torch header
    tmp/, home/             TMPDIR and HOME for the compilers
    build.log               the child's stdout and stderr
    result.json             the child's own account (strategies, seconds): informational only
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernelproof.build.env import cuda_home, device_arch
from kernelproof.host import spawn
from kernelproof.sandbox import plan as sandbox_plan
from kernelproof.sandbox.dirs import artifact_env
from kernelproof.sandbox.plan import Layer
from kernelproof.sandbox.private import hand_over, package_link

SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()  # the working directory stays off sys.path
MAX_LOG_LINES = 40  # error lines kept for the verdict and for agent feedback
MAX_LOG_CHARS = 6000
_VIOLATION = "KERNELPROOF-VIOLATION: "  # kernelproof.sandbox.guards.VIOLATION_PREFIX, as the guards print it
# A module-level CUDA call fails in a builder that hides the GPU; such a build is retried with it.
_NEEDS_GPU = re.compile(r"No CUDA GPUs are available|no CUDA-capable device|Found no NVIDIA driver")
# Variables a build may inherit; everything else (API keys, KERNELPROOF_CACHE_DIR, ...) is dropped.
_KEEP_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CC",
    "CXX",
    "PYTHONHASHSEED",
)


@dataclass(frozen=True)
class BuildOptions:
    arch: str | None = None  # TORCH_CUDA_ARCH_LIST entry; None: read from the device in the parent
    fast_inline: bool = True  # split CUDA sources and use precompiled headers (kernelproof.build.inline)
    guard: bool = True  # arm the worker's runtime guards (audit hook) in the builder process
    hide_gpu: bool = True  # CUDA_VISIBLE_DEVICES="" in the builder: builds never touch the GPU
    max_jobs: int | None = None  # MAX_JOBS for ninja; None: ninja's default (cores + 2)
    python: str = sys.executable  # interpreter for the builder process


@dataclass(frozen=True)
class BuildResult:
    ok: bool  # the solution imported and every build it triggered succeeded
    seconds: float  # wall time of the build (0 for a cache hit)
    log: str  # the compiler's error lines, verbatim, trimmed (empty on success)
    backend: str  # triton | cuda | native | torch, read from the source
    artifacts: tuple[str, ...] = ()  # files left under <staging>/out, relative paths
    strategy: str = ""  # how load_inline built: split+pch | split | torch | prebuilt; "" when not used
    timed_out: bool = False  # killed at the timeout
    cached: bool = False  # served from the build cache
    key: str = ""  # the build cache key, when a pool built it
    violation: str = ""  # the guards' account of a forbidden action (-> forbidden_construct), if any
    detail: dict[str, str] = field(default_factory=dict)  # per-extension strategy and seconds, as strings
    layers: tuple[Layer, ...] = ()  # the builder's containment, layer by layer (kernelproof.sandbox)
    # The calls that asked for a CUDA build, as they ran ("load_inline:<name>", "load_cuda"):
    # what ``environment`` is decided from, with the parent's facts (kernelproof/build/cuda.py)
    cuda: tuple[str, ...] = ()


# The outputs a build declares, relative to <staging>/out: an extension kernelproof.build.inline
# built (its <name>.so and its stamp, in the directory named for its arguments' digest; torch adds
# a py<ver>_<accelerator>/ level when TORCH_EXTENSIONS_DIR is unset) and a kernelproof.native cubin.
_DECLARED = (
    re.compile(
        r"^torch_extensions/(?:[A-Za-z0-9_.+-]+/)?kp-(?P<name>[A-Za-z_]\w*)-[0-9a-f]{16}/"
        r"((?P=name)\.so|kp_inline\.json)$"
    ),
    re.compile(r"^native/[0-9a-f]{32}\.cubin$"),
)


def staging_out(staging_dir: str | Path) -> Path:
    """The part of a staging directory whose declared outputs are published."""
    return Path(staging_dir) / "out"


def declared_output(rel: str) -> bool:
    """Whether a file (its path relative to <staging>/out) is one a build declares, so the parent
    publishes it. Everything else a solution leaves there (a sitecustomize.py, a planted library,
    ninja's object files) stays in staging and is deleted with it."""
    return any(p.match(rel) for p in _DECLARED)


def detect_backend(source: str) -> str:
    from kernelproof.solution import triage

    try:
        return triage(source).backend
    except Exception:  # noqa: BLE001 - triage of unparsable code: the build will say why
        return "torch"


def build_solution(
    source_path: str | Path,
    staging_dir: str | Path,
    device: str,
    timeout_s: float = 600.0,
    options: BuildOptions | None = None,
) -> BuildResult:
    """Import the solution in a child process so that its builds land in `staging_dir`."""
    opts = options or BuildOptions()
    source_path = Path(source_path).resolve()
    staging = Path(staging_dir).resolve()
    backend = detect_backend(source_path.read_text(errors="replace"))
    started = time.perf_counter()
    returncode, timed_out, text, layers = _run_child(source_path, staging, device, timeout_s, opts)
    if (
        returncode != 0
        and not timed_out
        and opts.hide_gpu
        and device.startswith("cuda")
        and _NEEDS_GPU.search(text)
    ):
        # The solution touches the GPU at import. Its compiled extensions are already in
        # staging (stamped), so the second import only loads them.
        remaining = max(1.0, timeout_s - (time.perf_counter() - started))
        returncode, timed_out, text, layers = _run_child(
            source_path, staging, device, remaining, replace(opts, hide_gpu=False)
        )
    seconds = time.perf_counter() - started
    out = staging_out(staging)
    artifacts = tuple(
        sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and not p.is_symlink())
    )
    detail, strategy, cuda = _child_account(staging / "result.json")
    ok = returncode == 0 and not timed_out
    if timed_out:
        log_text = f"build did not finish in {timeout_s:g} s and was killed\n" + trim_log(text)
    else:
        log_text = "" if ok else trim_log(text)
    violation = next((ln.split(_VIOLATION, 1)[1].strip() for ln in text.splitlines() if _VIOLATION in ln), "")
    if violation:
        ok = False
        log_text = f"forbidden during the build: {violation}\n" + log_text
    return BuildResult(
        ok,
        seconds,
        log_text,
        backend,
        artifacts,
        strategy,
        timed_out,
        detail=detail,
        violation=violation,
        layers=layers,
        cuda=cuda,
    )


def _run_child(
    source_path: Path, staging: Path, device: str, timeout_s: float, opts: BuildOptions
) -> tuple[int, bool, str, tuple[Layer, ...]]:
    """Run builder_main once, contained; returns (exit code, timed out, log text, layers)."""
    env = _child_env(staging, device, opts)
    src = staging / "src" / (source_path.stem + ".py")
    src.parent.mkdir(mode=0o755, exist_ok=True)
    shutil.copyfile(source_path, src)
    result = staging / "result.json"
    result.write_text("")
    writable = [staging / "out", staging / "tmp", staging / "home", result]
    readable = [staging / "src", staging / "lib"] + ([staging / "pch"] if (staging / "pch").is_dir() else [])
    # staging is the builder's scratch: its tmp/ is bound over /tmp, /var/tmp and /dev/shm (as a
    # worker's is), so a solution that writes its sources to a literal /tmp at import builds here too
    plan = sandbox_plan.plan_for(
        "builder",
        readable,
        writable,
        scratch=staging,
        devices=not opts.hide_gpu and device.startswith("cuda"),
    )
    # it works in its tmp/: staging itself stays closed to its uid (only the rules' paths are bound
    # back over the private /tmp, not the whole staging folder)
    plan = replace(plan, workdir=str((staging / "tmp").resolve()))
    try:
        if plan.uid >= 0:
            hand_over(writable, plan.uid, plan.gid)
        cmd = [opts.python, *SAFE_PATH, "-m", "kernelproof.build.builder_main", str(src), str(staging)]
        if (staging / "pch").is_dir():
            cmd += ["--pch-dir", str(staging / "pch")]
        if not opts.fast_inline:
            cmd.append("--no-fast")
        if not opts.guard:
            cmd.append("--no-guard")
        done = spawn.run(
            cmd,
            plan,
            staging / "plan.json",
            env,
            staging / "build.log",
            timeout_s,
            cwd=staging / "tmp",
            entry="builder",
        )
    finally:
        sandbox_plan.release(plan)
    text = (staging / "build.log").read_text(errors="replace")
    return done.returncode, done.timed_out, text, done.layers


def _child_env(staging: Path, device: str, opts: BuildOptions) -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    home = cuda_home()
    if home and "CUDA_HOME" not in env:
        env["CUDA_HOME"] = home
    for sub in ("out", "tmp", "home"):
        (staging / sub).mkdir(parents=True, exist_ok=True)
    # The kernelproof package only (a link in staging), never the checkout or the solution's folder.
    env["PYTHONPATH"] = os.pathsep.join([str(package_link(staging)), *sandbox_plan.library_paths()])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(artifact_env(staging_out(staging)))
    env["TMPDIR"] = str(staging / "tmp")
    env["HOME"] = str(staging / "home")
    env["CUPY_CACHE_DIR"] = str(staging / "tmp" / "cupy")
    arch = opts.arch if opts.arch is not None else device_arch(device)
    if arch:
        env["TORCH_CUDA_ARCH_LIST"] = arch
    if opts.hide_gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    if opts.max_jobs:
        env["MAX_JOBS"] = str(opts.max_jobs)
    return env


_kill_group = spawn.kill_group  # a build leaves nothing running (kept for callers of the old name)


def _child_account(path: Path) -> tuple[dict[str, str], str, tuple[str, ...]]:
    """The child's records, reduced to short strings: the strategies (shown), and the calls that
    asked for CUDA. Those decide ``environment`` only with the parent's own facts (a forged one
    gives a solution nothing a real request would not: kernelproof/build/cuda.py)."""
    try:
        doc = json.loads(path.read_text()[:100_000])
        recs = doc.get("inline", []) if isinstance(doc, dict) else []
        native = doc.get("native", []) if isinstance(doc, dict) else []
    except (OSError, ValueError):
        return {}, "", ()
    recs = recs if isinstance(recs, list) else []
    native = native if isinstance(native, list) else []
    cuda = [
        f"load_inline:{str(rec.get('name', ''))[:64]}"
        for rec in recs
        if isinstance(rec, dict) and rec.get("cuda") is True
    ]
    if any(isinstance(rec, dict) and rec.get("cuda") is True for rec in native):
        cuda.append("load_cuda")
    detail: dict[str, str] = {}
    strategies = []
    for rec in recs[:16]:
        if not isinstance(rec, dict):
            continue
        name = str(rec.get("name", ""))[:64]
        strategy = str(rec.get("strategy", ""))[:16]
        strategies.append(strategy)
        detail[name] = f"{strategy} {float(rec.get('seconds', 0.0)):.1f}s"
        if rec.get("fast_refused"):
            detail[name] += f" (fast path: {str(rec['fast_refused']).splitlines()[0][:120]})"
    return detail, ",".join(dict.fromkeys(strategies)), tuple(dict.fromkeys(cuda))[:16]


def trim_log(text: str, max_lines: int = MAX_LOG_LINES, max_chars: int = MAX_LOG_CHARS) -> str:
    """The lines that matter in a build log, verbatim: compiler errors first, then the Python error.

    An agent reads this to fix its code, so the compiler's own words are kept, and the noise
    (ninja's command lines, warnings, repeated tracebacks) is dropped.
    """
    lines = [ln.rstrip() for ln in text.splitlines()]
    compiler = [
        ln
        for ln in lines
        if re.search(r"(: error|error:|\berror\b.*:|FAILED:|undefined reference|fatal error)", ln)
    ]
    compiler = [ln for ln in compiler if not ln.lstrip().startswith("[")][: max_lines // 2]
    if compiler:
        tail = [ln for ln in lines if re.match(r"^\w+(\.\w+)*(Error|Exception)\b", ln)][-1:]
    else:  # a Python error: the last traceback's final frames and its message
        starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback")]
        tail = lines[starts[-1] + 1 :][-8:] if starts else []
    picked = list(dict.fromkeys(compiler + tail))
    if not picked:
        picked = [ln for ln in lines if ln.strip()][-max_lines:]
    out = "\n".join(picked[:max_lines])
    return out if len(out) <= max_chars else out[: max_chars - 20] + "\n... (trimmed)"
