"""The build layer: a content-addressed cache, a builder process per solution, a pool of builders.

What the pipeline calls (see docs/builds.md):

- :class:`BuilderPool` (``submit(path) -> Future[BuildResult]``) in the trusted parent, then
  ``pool.materialize(result, worker_dir)`` into the worker's private directory;
- :func:`artifact_env` for the worker's environment, and :func:`install_load_inline` in the
  worker before it imports the solution, so the solution's load_inline loads the prebuilt module;
- :func:`cache_info` / :func:`cache_clear` for ``kernelproof cache info|clear``.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernelproof.build.builder import BuildOptions, BuildResult, artifact_env, build_solution, trim_log
from kernelproof.build.cache import BuildCache, CacheTamperError, PublishError
from kernelproof.build.env import BuildEnv, build_key, current_env, device_arch
from kernelproof.build.inline import install as install_load_inline
from kernelproof.build.pool import BuilderPool

__all__ = [
    "BuildCache",
    "BuildEnv",
    "BuildOptions",
    "BuildResult",
    "BuilderPool",
    "CacheTamperError",
    "PublishError",
    "artifact_env",
    "build_key",
    "build_solution",
    "cache_clear",
    "cache_info",
    "current_env",
    "default_cache_root",
    "device_arch",
    "install_load_inline",
    "trim_log",
]


def default_cache_root() -> Path:
    """KERNELPROOF_CACHE_DIR, else ~/.cache/kernelproof/builds. For the CLI and the parent only:
    builders and workers never receive this path."""
    env = os.environ.get("KERNELPROOF_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kernelproof" / "builds"


def cache_info(root: str | Path | None = None) -> dict[str, object]:
    """`kernelproof cache info`: entries, bytes, precompiled headers, by backend."""
    return BuildCache(root or default_cache_root()).info()


def cache_clear(root: str | Path | None = None) -> int:
    """`kernelproof cache clear`: remove every entry and precompiled header; returns entries removed."""
    return BuildCache(root or default_cache_root()).clear()
