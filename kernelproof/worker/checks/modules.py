"""The modules the harness imports while it runs are the ones it imported before the solution (D4).

Why: an import statement inside a function looks its module up in ``sys.modules`` every time it
runs, and ``sys.modules`` is a plain dict the solution may write (no audit event). The CUDA clock
runs ``from torch.profiler import profile`` at every timed batch and the CPU profile request
``from torch.autograd.profiler import profile``: a module planted under that name answered them,
its profiler reporting whatever spans and kernels the solution liked. The identity check of the
harness's references (:mod:`kernelproof.worker.surface`) follows the module objects it saw at the
snapshot, so a new object under the old name was not seen.

What is watched: the entries of ``sys.modules`` for kernelproof, torch and triton and for every
module the harness's own source imports (and their packages), by identity against the snapshot
taken before the solution is imported. A replaced or removed entry is ``harness_hooked``. The
quick check (after every timed call) compares the harness's own imports only; the full one every
entry of those packages.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

PACKAGES = ("kernelproof", "torch", "triton")  # whose every loaded module the full check compares


def _within(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in PACKAGES)


def _with_packages(names: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for name in names:
        parts = name.split(".")
        out.update(".".join(parts[: k + 1]) for k in range(len(parts)))
    return out


def watch(imported: Iterable[str]) -> Callable[[bool], list[str]]:
    """Snapshot ``sys.modules`` now; ``imported`` names the modules the harness's source imports.
    The returned function names the entries replaced or removed since (``full``: every entry of
    :data:`PACKAGES` too)."""
    modules = sys.modules
    everything = {n: m for n, m in list(modules.items()) if _within(n) and m is not None}
    own = {n: modules[n] for n in _with_packages(imported) if modules.get(n) is not None}

    def replaced(full: bool = True) -> list[str]:
        watched = {**everything, **own} if full else own
        return [f"a replaced sys.modules[{n!r}]" for n, m in watched.items() if modules.get(n) is not m]

    return replaced
