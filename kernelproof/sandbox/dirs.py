"""Where a contained process keeps what it builds and caches, under a root the parent chose.

The builder points these at its staging directory's ``out/``; a candidate worker at its private
directory, where the parent copies the solution's cache entry, so the solution's import finds its
builds and compiles nothing.
"""

from __future__ import annotations

from pathlib import Path


def artifact_env(root: str | Path) -> dict[str, str]:
    """Where load_inline, Triton and kernelproof.native keep their builds under `root`.

    The builder uses it on <staging>/out; the worker uses it on its private copy of the cache
    entry, so the solution's second import finds its builds and compiles nothing.
    """
    root = Path(root)
    return {
        "TORCH_EXTENSIONS_DIR": str(root / "torch_extensions"),
        "TRITON_CACHE_DIR": str(root / "triton"),
        "KERNELPROOF_NATIVE_DIR": str(root / "native"),
    }
