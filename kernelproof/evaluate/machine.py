"""What this machine lacks to run a solution: the ``environment`` error, decided from the parent's facts.

A CUDA solution on a machine without a CUDA toolkit used to end as ``compile_error`` ("CUDA_HOME
environment variable is not set"), stored against the candidate with "built in 1.6 s" printed
beside it; on a machine without a CUDA device it compiled and then failed at its first launch.
Neither is the candidate's fault (I11). The decision reads the solution's static triage (its
backend, whether it carries CUDA sources), where nvcc is (the same search torch's builder makes)
and the evaluation's device, never a build log's text.
"""

from __future__ import annotations

import re

import torch

from kernelproof.build.env import nvcc_path
from kernelproof.solution import SolutionFile

# CUDA device code, or load_inline asked for CUDA sources / a CUDA build: a CPU toolchain cannot build it.
_CUDA_SOURCE = re.compile(r"__global__|\bcuda_sources\s*=|\bwith_cuda\s*=\s*True")


def needs_cuda(file: SolutionFile) -> bool:
    """Does the solution need CUDA to build and run? Native kernels always do; a load_inline
    solution when it carries CUDA code (a C++ extension built for the CPU does not)."""
    backend = file.triage.backend
    if backend == "native":
        return True
    return backend == "cuda" and bool(_CUDA_SOURCE.search(file.source))


def missing_toolkit(file: SolutionFile) -> str | None:
    """Why the solution cannot be built here, or None: decided before any build starts.

    Native kernels need nvcc; load_inline's CUDA sources need nvcc and a torch built with CUDA
    (a CPU-only torch leaves torch.utils.cpp_extension.CUDA_HOME unset whatever the machine has)."""
    if not needs_cuda(file):
        return None
    lacking = []
    if nvcc_path() is None:
        lacking.append(
            "no CUDA toolkit (nvcc was found under none of CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)"
        )
    if file.triage.backend == "cuda" and torch.version.cuda is None:
        lacking.append(
            f"torch {torch.__version__} is built without CUDA, so load_inline cannot compile CUDA sources"
        )
    if not lacking:
        return None
    return (
        f"this machine cannot build the solution's {file.triage.backend} kernels: {'; '.join(lacking)}. "
        "Nothing was built. Evaluate it on a machine with the CUDA toolkit and a CUDA build of torch"
    )


def missing_device(file: SolutionFile, device: str) -> str | None:
    """Why the solution cannot run on `device` (a CUDA solution evaluated on the CPU), or None."""
    if not needs_cuda(file) or device.startswith("cuda"):
        return None
    return (
        f"the solution's {file.triage.backend} kernels need a CUDA device and this evaluation runs on "
        f"{device!r} (no CUDA device here, or --device {device}); its build was checked but it was not "
        "run. Evaluate it on a machine with a CUDA GPU (--device cuda)"
    )
