"""The identity of the code that produced a verdict: a hash over kernelproof's own files.

A version string does not say which commit (or which local edit) judged a result; this hash does,
and it is cheap enough to compute once per process.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path


def source_tree_sha256(root: Path | None = None) -> str:
    """sha256 over kernelproof's files (paths and contents), caches left out."""
    root = root or Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def this_source() -> str:
    """The hash of the running package, computed once."""
    return source_tree_sha256()
