"""What a worker is started with: its spec, containment plan, command line and environment.

Split from :mod:`kernelproof.host.process`, which owns a worker's life once it runs; this only
decides what it starts from. The environment is scrubbed (no API keys; a private HOME, TMPDIR and
cache dirs out of /tmp), the interpreter keeps the working directory off ``sys.path``, and the
containment plan its bootstrap applies before torch is imported is written here (I1, I8).
"""

from __future__ import annotations

import os
import select
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelproof.sandbox import contain
from kernelproof.sandbox import plan as sandbox_plan
from kernelproof.sandbox.dirs import artifact_env
from kernelproof.sandbox.plan import Plan
from kernelproof.sandbox.private import PrivateDir, package_link

# -P (Python 3.11+): the working directory (the worker's writable rw/) is not put on sys.path, so a
# module the solution saves there cannot stand in for one the harness imports later.
SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()
BASELINE_UNCONTAINED = "a baseline worker runs the task's own reference, as the parent's uid"
WORKER_MEMORY_BYTES = 64 * 1024**3  # host memory per worker (cgroup); GPU memory is the device's
WORKER_MAX_PIDS = 512  # threads and processes per worker (cgroup): stops fork/thread bombs
# glibc fills freshly allocated heap memory with 0x7f... (perturb byte 0x80 -> fill ^0xff): huge
# finite floats, so a CPU kernel that leaves output elements unwritten fails (the CPU build has
# no caching allocator to poison). mmap_threshold raised so large blocks also come from the heap.
CPU_MALLOC_TUNABLES = "glibc.malloc.perturb=128:glibc.malloc.mmap_threshold=33554432"
PASSED_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "TORCH_CUDA_ARCH_LIST",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CC",
    "CXX",
)  # thread counts are the parent's (kernelproof.host.cpus), never the user's OMP_NUM_THREADS


@dataclass
class SpawnSpec:
    """What the caller asks of a worker: its role, its device and what it must not reach."""

    role: str  # "candidate" | "baseline"
    device: str  # "cpu" | "cuda:N"
    deny_read: tuple[str, ...] = ()  # paths the worker must not read
    env: dict[str, str] = field(default_factory=dict)  # extra environment (build cache materialisations)
    wrapper: tuple[str, ...] = ()  # a command the worker runs under (compute-sanitizer)
    protected: tuple[str, ...] = ()  # paths no rule may reach (a custom store, its key), besides the defaults


def worker_plan(spec: SpawnSpec, dirs: PrivateDir) -> Plan:
    """The containment a worker's bootstrap applies: a candidate's, planned for its private dirs
    (its ``ro/`` readable, its ``rw/`` writable); a baseline runs uncontained (BASELINE_UNCONTAINED).
    ``plan_for`` is looked up on its module at each spawn: the tests' switch for showing an attack
    uncontained."""
    return (
        sandbox_plan.plan_for(
            spec.role,
            readable=[dirs.ro],
            writable=[dirs.rw],
            scratch=dirs.rw,
            devices=spec.device.startswith("cuda"),
            relaxed=bool(spec.wrapper),
            protected=spec.protected,
        )
        if spec.role == "candidate"
        else sandbox_plan.uncontained(spec.role, BASELINE_UNCONTAINED)
    )


def worker_args(
    spec: SpawnSpec, dirs: PrivateDir, plan_path: Path, report_fd: int, sock_fd: int
) -> list[str]:
    """``python -m kernelproof.worker``'s arguments, with the descriptor numbers the worker will see."""
    args = [
        contain.PLAN_FLAG,
        str(plan_path),
        contain.REPORT_FLAG,
        str(report_fd),
        "--fd",
        str(sock_fd),
        "--role",
        spec.role,
        "--private-dir",
        str(dirs.rw),
    ]
    for p in spec.deny_read:
        args += ["--deny-read", p]
    if spec.wrapper:  # compute-sanitizer: the worker leaves CUPTI to the tool
        args.append("--no-profiler-warmup")
    return args


def worker_env(spec: SpawnSpec, dirs: PrivateDir) -> dict[str, str]:
    """The worker's whole environment: the few passed variables, its private dirs, and the device it sees."""
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env["PYTHONPATH"] = os.pathsep.join([str(package_link(dirs.ro)), *sandbox_plan.library_paths()])
    built = artifact_env(dirs.ro)  # the parent materialises a solution's build there after spawn
    env.update(
        {
            "HOME": str(dirs.rw),
            "TMPDIR": str(dirs.rw / "tmp"),
            "TORCH_EXTENSIONS_DIR": built["TORCH_EXTENSIONS_DIR"],
            "KERNELPROOF_NATIVE_DIR": built["KERNELPROOF_NATIVE_DIR"],
            "TRITON_CACHE_DIR": str(dirs.rw / "triton"),  # Triton compiles in the worker at first launch
            "TORCHINDUCTOR_CACHE_DIR": str(dirs.rw / "inductor"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONHASHSEED": "0",
        }
    )
    if spec.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
        # Candidate and baselines alike: the perturbed heap poisons the candidate's fresh blocks for
        # correctness, and a baseline timed with glibc's plain malloc against a candidate whose
        # every malloc and free fills its block would compare two allocators, not two programs.
        env["GLIBC_TUNABLES"] = CPU_MALLOC_TUNABLES
    else:
        index = int(spec.device.split(":")[1]) if ":" in spec.device else 0
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [v for v in visible.split(",") if v.strip()] if visible else None
        env["CUDA_VISIBLE_DEVICES"] = ids[index] if ids and index < len(ids) else str(index)
    env.update(spec.env)
    return env


def read_report(fd: int, timeout_s: float) -> str:
    """What the worker's bootstrap wrote on its report pipe, up to the pipe's end."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not readable:
            break
        data = os.read(fd, 65536)
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", errors="replace")
