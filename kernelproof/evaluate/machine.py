"""What this machine lacks to run a solution: the ``environment`` error, decided from the parent's facts.

A CUDA solution on a machine without a CUDA toolkit used to end as ``compile_error`` ("CUDA_HOME
environment variable is not set"), stored against the candidate with "built in 1.6 s" printed
beside it; on a machine without a CUDA device it compiled and then failed at its first launch.
Neither is the candidate's fault (I11). The decision reads the solution's static triage (its
backend, whether it carries CUDA sources), where nvcc is (the same search torch's builder makes)
and the evaluation's device, never a build log's text. The same facts judge the worker's own
``environment`` claim, which it makes from an exception's text (:func:`judged_lack`).
"""

from __future__ import annotations

import re

import torch

from kernelproof.build.env import nvcc_path
from kernelproof.solution import SolutionFile
from kernelproof.verdict import Reason, ReasonCode

# CUDA device code, or load_inline asked for CUDA sources / a CUDA build: a CPU toolchain cannot build it.
# An empty literal (`cuda_sources=[]`, `None`, `""`, `()`), which C++ extensions built for the CPU
# pass beside `cpp_sources`, asks for none.
_CUDA_SOURCE = re.compile(
    r"""__global__|\bcuda_sources\s*=(?!\s*(None\b|\[\s*\]|\(\s*\)|""(?!")|''(?!')))|\bwith_cuda\s*=\s*True"""
)


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


# A CUDA device named in the source: `.cuda(`, `torch.cuda`, a "cuda" device string given to
# `device=`, `.to(` or `torch.device(` (what a plain-torch solution that needs a GPU writes), or a
# check that inputs are on one (`x.is_cuda`, `x.device.type == "cuda"`).
_CUDA_DEVICE = re.compile(
    r"""\.cuda\(|\btorch\.cuda\b|(?:device\s*=|\.to\(|torch\.device\()\s*["']cuda"""
    r"""|\.is_cuda\b|\.type\s*[!=]=\s*["']cuda["']"""
)


def needs_gpu_driver(file: SolutionFile) -> bool:
    """Can the solution need a GPU driver at all, by its static triage: Triton kernels (their
    autotuner asks for one), CUDA or native kernels (:func:`needs_cuda`; a C++ extension built for
    the CPU needs none), or a CUDA device named in its source?"""
    return file.triage.backend == "triton" or needs_cuda(file) or bool(_CUDA_DEVICE.search(file.source))


def judged_lack(reason: Reason, file: SolutionFile, device: str) -> Reason:
    """A worker's ``environment`` reason, kept only where the parent's own facts agree; else the
    solution's ``runtime_error``, its message kept.

    The worker names a missing GPU driver from an exception's text (kernelproof.worker.interpreter),
    and the solution writes that text: one that raised "0 active drivers" turned its own failure
    into an error that is never stored and never blamed (I10). The claim stands only when this
    evaluation runs without a CUDA device (on a CUDA device the driver is there: the parent chose
    it) and the solution can need a driver at all (:func:`needs_gpu_driver`).
    """
    if reason.code is not ReasonCode.ENVIRONMENT:
        return reason
    if device.startswith("cuda"):
        why = f"this evaluation runs on {device}, whose driver the parent uses"
    elif not needs_gpu_driver(file):
        why = (
            f"the solution's triage (backend {file.triage.backend}) finds no Triton kernel, no CUDA code "
            "and no CUDA device in its source"
        )
    else:
        return reason
    return Reason(
        ReasonCode.RUNTIME_ERROR,
        f"{reason.message} [taken as the solution's own error: {why}]",
        reason.detail,
    )
