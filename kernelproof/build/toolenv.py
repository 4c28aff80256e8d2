"""The compilers' environment in a process that runs solution code, fixed before the solution runs.

Why: flags are not the only way into a compile line. torch reads ``CXX``, ``CC``,
``PYTORCH_NVCC``, ``TORCH_CUDA_ARCH_LIST`` and ``TORCH_EXTENSIONS_DIR`` from ``os.environ`` when it
writes build.ninja (unquoted: ninja runs it through ``/bin/sh``), and nvcc and gcc read
``NVCC_APPEND_FLAGS``, ``NVCC_CCBIN``, ``COMPILER_PATH``, ``GCC_EXEC_PREFIX``, ``CPATH`` and more. A
solution that set one at import would choose the compiler, or add flags the allowlist never saw
(kernelproof.compiler_flags; invariant I8). So the builder and the worker pin these variables when
they install the load_inline hook, before the solution is imported: every compile kernelproof
starts gets the pinned values (:func:`environ`), and torch's own build runs inside
:func:`pinned`, which puts them back for its duration.

The pin is this process's one build context, set once by its entry point (builder_main, or the
worker's ``prebuilt`` step through ``install_load_inline``), like the guards it sits beside. It
also holds the staging directory that include paths may point into. It does not cover a solution
that rewrites torch's module state in place (its lists of default flags, say): the OS layer
(issue 15, point 2) is what holds against that.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Variables that choose a compiler, add its flags, or change what it reads or runs (torch's
# cpp_extension, nvcc's and gcc's documented environment, the dynamic loader, the shell ninja uses).
PINNED_NAMES = (
    "PATH",
    "CC",
    "CXX",
    "CUDAHOSTCXX",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_INC_PATH",
    "PYTORCH_NVCC",
    "TORCH_NVCC_FLAGS",
    "TORCH_CUDA_ARCH_LIST",
    "TORCH_EXTENSIONS_DIR",
    "TORCH_DONT_CHECK_COMPILER_ABI",
    "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES",
    "MAX_JOBS",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "COMPILER_PATH",
    "DEPENDENCIES_OUTPUT",
    "SUNPRO_DEPENDENCIES",
    "TMPDIR",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "IFS",
)
PINNED_PREFIXES = ("NVCC_", "GCC_", "LD_", "CCACHE_", "DYLD_")


@dataclass(frozen=True)
class Pin:
    """The values pinned at install time, and the staging directory of this process."""

    values: dict[str, str]  # pinned variables present at pin time (absent ones stay absent)
    staging: str | None  # the directory include and library paths may point into
    cuda_home: str | None  # torch.utils.cpp_extension.CUDA_HOME at pin time (it is read at import)


_pin: Pin | None = None


def _is_pinned(name: str) -> bool:
    return name in PINNED_NAMES or name.startswith(PINNED_PREFIXES)


def pin(staging: str | Path | None = None) -> None:
    """Fix the compilers' environment as it is now (call before the solution is imported)."""
    global _pin
    try:
        from torch.utils import cpp_extension as ce

        home = ce.CUDA_HOME
    except Exception:  # noqa: BLE001 - no torch here: nothing of torch's to pin
        home = None
    values = {k: v for k, v in os.environ.items() if _is_pinned(k)}
    _pin = Pin(values, os.path.realpath(staging) if staging else None, home)


def unpin() -> None:
    global _pin
    _pin = None


def current() -> Pin | None:
    return _pin


def staging() -> str | None:
    """The staging directory include paths may point into (None: no path is allowed)."""
    return _pin.staging if _pin is not None else None


def environ() -> dict[str, str]:
    """os.environ with the pinned variables as they were pinned: the environment of every compile."""
    env = dict(os.environ)
    if _pin is None:
        return env
    for k in [k for k in env if _is_pinned(k)]:
        del env[k]
    env.update(_pin.values)
    return env


@contextlib.contextmanager
def pinned() -> Iterator[None]:
    """Inside: os.environ (and torch's CUDA_HOME) hold the pinned values; after: what they held before.

    For torch's own load_inline, which reads os.environ in this process.
    """
    if _pin is None:
        yield
        return
    saved = {k: v for k, v in os.environ.items() if _is_pinned(k)}
    ce = None
    try:
        from torch.utils import cpp_extension as ce
    except Exception:  # noqa: BLE001
        ce = None
    saved_home = ce.CUDA_HOME if ce is not None else None
    try:
        for k in saved:
            os.environ.pop(k, None)
        os.environ.update(_pin.values)
        if ce is not None:
            ce.CUDA_HOME = _pin.cuda_home
        yield
    finally:
        for k in [k for k in os.environ if _is_pinned(k)]:
            os.environ.pop(k, None)
        os.environ.update(saved)
        if ce is not None:
            ce.CUDA_HOME = saved_home
