"""What this machine lacks to run a solution: the ``environment`` error, decided from the parent's facts.

A CUDA solution on a machine without a CUDA toolkit used to end as ``compile_error`` ("CUDA_HOME
environment variable is not set"), stored against the candidate with "built in 1.6 s" printed
beside it; on a machine without a CUDA device it compiled and then failed at its first launch.
Neither is the candidate's fault (I11). The decision reads the solution's static triage (its
backend, whether it carries CUDA sources), where nvcc is (the same search torch's builder makes)
and the evaluation's device, never a build log's text nor any message of the candidate's process: a
worker's reply never sets ``environment`` (:func:`judged_on_this_machine`).
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
# `device=`, `.to(` or `torch.device(`, or a check that inputs are on one (`x.is_cuda`,
# `x.device.type == "cuda"`). Text only: it chooses whether a failure's message carries the
# parent's note on the device (:func:`judged_on_this_machine`), never the failure's code.
_CUDA_DEVICE = re.compile(
    r"""\.cuda\(|\btorch\.cuda\b|(?:device\s*=|\.to\(|torch\.device\()\s*["']cuda"""
    r"""|\.is_cuda\b|\.type\s*[!=]=\s*["']cuda["']"""
)

# The solution's failures the note may follow: what it raised while it ran on this machine.
_OWN_FAILURES = (ReasonCode.RUNTIME_ERROR, ReasonCode.COMPILE_ERROR, ReasonCode.CRASH)


def names_a_gpu(file: SolutionFile) -> bool:
    """Does the solution's static triage find GPU code: Triton kernels, CUDA or native kernels, or a
    CUDA device named in its source (comments included: this only chooses a note)?"""
    return file.triage.backend == "triton" or needs_cuda(file) or bool(_CUDA_DEVICE.search(file.source))


def judged_on_this_machine(reason: Reason, file: SolutionFile, device: str) -> Reason:
    """A reason from the candidate's worker, as the parent's facts judge it.

    Whether this machine lacks what the solution needs is the parent's decision alone: it is made
    before the worker runs, from the toolkit, torch's build and the evaluation's device
    (:func:`missing_toolkit`, :func:`missing_device`). A worker's reply is written in the
    candidate's process, whose text the solution controls: a wrong solution that raised "0 active
    drivers" or "expects CUDA tensors only" once turned its failure into an ``environment`` error,
    never stored and never blamed (I10, I11). So a worker's ``environment`` is never kept: it is the
    solution's ``runtime_error``, its message kept and labelled. A failure of a solution that names a
    GPU, on an evaluation without a CUDA device, keeps its code and gets the parent's note on the
    device it ran on: the fact, not an excuse.
    """
    if reason.code is ReasonCode.ENVIRONMENT:
        reason = Reason(
            ReasonCode.RUNTIME_ERROR,
            f"{reason.message} [the candidate's worker claimed `environment`; the parent alone decides "
            "what this machine lacks, before the solution runs]",
            reason.detail,
        )
    if reason.code not in _OWN_FAILURES or device.startswith("cuda") or not names_a_gpu(file):
        return reason
    return Reason(reason.code, f"{reason.message} [{device_note(device)}]", reason.detail)


def device_note(device: str) -> str:
    """The parent's note on the device a failure happened on, when the evaluation had no CUDA device."""
    cuda = "no CUDA device is visible" if not torch.cuda.is_available() else "CUDA devices were not asked for"
    return (
        f"this evaluation ran on {device!r} ({cuda}, torch {torch.__version__}); Triton kernels ran in "
        "its interpreter. The failure is judged as the solution's: a solution that needs a CUDA device "
        "is judged on one (--device cuda)"
    )
