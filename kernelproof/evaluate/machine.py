"""What this machine lacks to run a solution: the ``environment`` error, decided from the parent's facts.

A CUDA solution on a machine without a CUDA toolkit used to end as ``compile_error`` ("CUDA_HOME
environment variable is not set"), stored against the candidate with "built in 1.6 s" printed
beside it; on a machine without a CUDA device it compiled and then failed at its first launch.
Neither is the candidate's fault (I11). Nor may text decide it: a regex over the solution's source
once made a wrong plain-PyTorch solution holding an uncalled ``load_inline`` of a ``__global__``
string (or those words in a comment) an ``environment`` error, never run nor stored (I10).

So ``environment`` needs both: a CUDA build the solution truly asked for, recorded as the call ran
(in the builder the parent started, or by the build service answering the worker's request:
``BuildResult.cuda``, kernelproof/build/cuda.py), and the parent's own facts saying this machine
cannot build it (where nvcc is, torch's build) or run it (the evaluation's device). Never a build
log's text nor any message of the candidate's process: a worker's reply never sets ``environment``
(:func:`judged_on_this_machine`). Everything else runs and is judged on merit.
"""

from __future__ import annotations

import dataclasses
import re

import torch

from kernelproof.build import cuda
from kernelproof.build.builder import BuildResult
from kernelproof.solution import SolutionFile
from kernelproof.verdict import Reason, ReasonCode

# CUDA device code, or load_inline asked for CUDA sources / a CUDA build. Text only: a cheap guess of
# which solutions will ask for CUDA (to choose a note, or which samples the kernelbench verb builds
# first), never a decision. An empty literal (`cuda_sources=[]`, `None`, `""`, `()`) asks for none.
_CUDA_SOURCE = re.compile(
    r"""__global__|\bcuda_sources\s*=(?!\s*(None\b|\[\s*\]|\(\s*\)|""(?!")|''(?!')))|\bwith_cuda\s*=\s*True"""
)


def looks_like_cuda(file: SolutionFile) -> bool:
    """Does the solution's text look as if it will ask for CUDA? Native kernels always do; a
    load_inline solution when CUDA code is written in it. A guess from text (comments and dead code
    included): it decides nothing, :func:`cannot_build` and :func:`cannot_run` decide."""
    backend = file.triage.backend
    if backend == "native":
        return True
    return backend == "cuda" and bool(_CUDA_SOURCE.search(file.source))


def cannot_build(requests: tuple[str, ...]) -> str | None:
    """Why this machine cannot build the CUDA builds the solution asked for (``BuildResult.cuda``),
    or None: nothing asked for, or the machine has what they need."""
    lacking = cuda.lacks(cuda.kind_of(r) for r in requests)
    if not lacking:
        return None
    return (
        f"this machine cannot build the CUDA the solution asked for ({_named(requests)}): "
        f"{'; '.join(lacking)}. Nothing was compiled. Evaluate it on a machine with the CUDA toolkit "
        "and a CUDA build of torch"
    )


def cannot_run(requests: tuple[str, ...], device: str) -> str | None:
    """Why the CUDA builds the solution asked for cannot run on `device` (a CPU evaluation), or None."""
    if not requests or device.startswith("cuda"):
        return None
    return (
        f"the CUDA kernels the solution asked for ({_named(requests)}) need a CUDA device and this evaluation "
        f"runs on {device!r} (no CUDA device here, or --device {device}); it was not run. Evaluate it "
        "on a machine with a CUDA GPU (--device cuda)"
    )


def unmet(result: BuildResult | None, device: str) -> str | None:
    """The ``environment`` message of a build (the builder's record of what the solution asked for)
    this machine cannot build or run, or None: then the solution runs and is judged on merit."""
    if result is None or not result.cuda:
        return None
    return cannot_build(result.cuda) or cannot_run(result.cuda, device)


def _named(requests: tuple[str, ...]) -> str:
    return ", ".join(requests[:4]) + (f" and {len(requests) - 4} more" if len(requests) > 4 else "")


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
    return file.triage.backend == "triton" or looks_like_cuda(file) or bool(_CUDA_DEVICE.search(file.source))


def judged_on_this_machine(reason: Reason, file: SolutionFile, device: str) -> Reason:
    """A reason from the candidate's worker, as the parent's facts judge it.

    Whether this machine lacks what the solution needs is the parent's decision alone: it is made
    from the CUDA builds the solution truly asked for, the toolkit, torch's build and the
    evaluation's device (:func:`unmet`). A worker's reply is written in the
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
    return dataclasses.replace(reason, message=f"{reason.message} [{device_note(device)}]")


def device_note(device: str) -> str:
    """The parent's note on the device a failure happened on, when the evaluation had no CUDA device."""
    cuda = "no CUDA device is visible" if not torch.cuda.is_available() else "CUDA devices were not asked for"
    return (
        f"this evaluation ran on {device!r} ({cuda}, torch {torch.__version__}); Triton kernels ran in "
        "its interpreter. The failure is judged as the solution's: a solution that needs a CUDA device "
        "is judged on one (--device cuda)"
    )
