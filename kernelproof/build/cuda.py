"""Which builds ask for CUDA, and what this machine lacks to do them: facts, never text.

Why: ``environment`` ("this machine cannot build or run the solution") used to be decided from a
regex over the solution's source, so an uncalled function, a comment or a string holding
``__global__`` or ``cuda_sources=`` turned a wrong plain-PyTorch solution into an error of the
evaluation, never run, never stored, never blamed (I10, I11). Now a build asks for CUDA only when
it is called: the builder records each ``load_inline``/``load`` call with CUDA sources (or
``with_cuda=True``) and each ``kernelproof.native.load_cuda`` call as it happens
(:func:`asks_for_cuda`, kernelproof/build/inline.py, kernelproof/native.py), and refuses one this
machine cannot build (:class:`~kernelproof.errors.CudaUnavailableError`), compiling nothing. The
record reaches the parent in the build's result (``BuildResult.cuda``, kept in the cache's
metadata); the parent then asks its own facts (:func:`lacks`) whether the machine can do it
(kernelproof/evaluate/machine.py).

The record is written in the builder, the process that imports the solution; a solution that
forges one gains nothing a real request would not give it: ``environment`` needs the parent's own
facts too, and a machine that can build and run CUDA judges the solution on merit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kernelproof.build.env import nvcc_path

LOAD_INLINE = "load_inline"  # torch.utils.cpp_extension.load_inline / load: needs nvcc and a CUDA torch
LOAD_CUDA = "load_cuda"  # kernelproof.native.load_cuda: needs nvcc only (the driver API runs the cubin)
KINDS = (LOAD_INLINE, LOAD_CUDA)


def asks_for_cuda(args: Mapping[str, Any]) -> bool:
    """Does a load_inline call (its bound arguments, sources as lists) ask for a CUDA build?
    Some CUDA source with text in it, or ``with_cuda=True``; the empty ``cuda_sources`` (``[]``,
    ``None``, ``""``) that C++ extensions built for the CPU pass beside their C++ sources does not."""
    sources = args.get("cuda_sources") or []
    return any(isinstance(s, str) and s.strip() for s in sources) or args.get("with_cuda") is True


def lacks(kinds: Iterable[str], environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """What this machine lacks to build CUDA builds of these kinds, in words; empty when nothing.

    The parent's facts: where nvcc is (the search torch's builder makes) and whether this torch was
    built with CUDA (a CPU-only torch leaves torch.utils.cpp_extension.CUDA_HOME unset whatever the
    machine has)."""
    import torch

    kinds = set(kinds)
    out = []
    if kinds and nvcc_path(environ) is None:
        out.append(
            "no CUDA toolkit (nvcc was found under none of CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)"
        )
    if LOAD_INLINE in kinds and torch.version.cuda is None:
        out.append(
            f"torch {torch.__version__} is built without CUDA, so load_inline cannot compile CUDA sources"
        )
    return tuple(out)


def kind_of(request: str) -> str:
    """The kind of one recorded request (``load_inline:<name>`` or ``load_cuda``)."""
    return request.split(":", 1)[0]
