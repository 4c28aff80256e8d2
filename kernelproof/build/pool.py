"""A pool of builders on the CPU cores, so the GPU never waits for nvcc.

An evaluation batch submits every solution's build up front; builds run in child processes (a
thread here only waits on one), while the GPU evaluates whatever is already built. Each job:

1. checks the literal flags of the solution's build calls (kernelproof.compiler_flags): a refused
   one fails the build at once, before any builder or compiler runs;
2. hashes the solution with everything else that feeds its build (the cache key, :meth:`key_for`);
3. serves a cache hit at once (< 1 s: a manifest read);
4. otherwise takes the key's lock (a second build of the same key waits and then hits), makes a
   private staging directory, copies into it the verified precompiled torch header the source
   will want (kernelproof.build.pch), builds (kernelproof.build.builder), and publishes the
   build's declared outputs, and nothing else, from this trusted process.

Compile failures are cached too (an agent often resubmits the same code); timeouts are not,
since they depend on the machine's load.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from kernelproof import compiler_flags
from kernelproof.build import pch as _pch
from kernelproof.build.builder import (
    BuildOptions,
    BuildResult,
    build_solution,
    declared_output,
    detect_backend,
    staging_out,
)
from kernelproof.build.cache import BuildCache, CacheTamperError, PublishError
from kernelproof.build.env import BuildEnv, build_key, current_env, device_arch

# Entries of the staging directory that are never published.
_PRIVATE = ("pch", "tmp", "home")


class BuilderPool:
    """Builds solutions ahead of evaluation; `submit` returns a Future of a BuildResult."""

    def __init__(
        self,
        cache: BuildCache,
        max_workers: int,
        device: str = "cuda",
        timeout_s: float = 600.0,
        options: BuildOptions | None = None,
        work_root: str | Path | None = None,
    ):
        opts = options or BuildOptions()
        if opts.arch is None:
            opts = replace(opts, arch=device_arch(device))  # read once, in this trusted process
        self.cache = cache
        self.device = device
        self.timeout_s = timeout_s
        self.options = opts
        self.env: BuildEnv = current_env(opts.arch or "")
        self._work_root = Path(work_root) if work_root else None
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kp-build")
        self.headers = _pch.HeaderStore(cache.root)
        self._pch_failed: set[str] = set()
        self._pch_ids: dict[tuple[str, ...], str] = {}
        self._pch_lock = threading.Lock()

    def key_for(self, source: bytes) -> str:
        """The cache key: the solution's bytes, the build environment (compilers, torch, arch), the
        build options, the flag allowlist's version and the identity of every precompiled header
        the build will be given (the hash of its inputs, kernelproof.build.pch.pch_id)."""
        flags = [f"fast_inline={self.options.fast_inline}", f"flag_policy={compiler_flags.POLICY}"]
        text = source.decode("utf-8", errors="replace")
        flags += [f"pch={ident}" for ident in self._header_ids(text)]
        return build_key(source, self.env, tuple(flags))

    def submit(self, source_path: str | Path, data: bytes | None = None) -> Future[BuildResult]:
        """Queue one build (cache lookup first); the Future never raises for a candidate's failure.
        `data`: the solution's bytes as its evaluation read them (the path then only names the file)."""
        return self._executor.submit(self.build, Path(source_path), data)

    def cached(self, source_path: str | Path, data: bytes | None = None) -> BuildResult | None:
        """The cached result for this source, looked up now (no queueing behind builds), or None."""
        return self._from_cache(self.key_for(Path(source_path).read_bytes() if data is None else data))

    def build(self, source_path: Path, data: bytes | None = None) -> BuildResult:
        """Build the solution's bytes (read from `source_path` once when `data` is not given): the
        builder imports a copy of exactly the bytes the cache key names, never the path read again."""
        source = Path(source_path).read_bytes() if data is None else data
        text = source.decode("utf-8", errors="replace")
        refused = compiler_flags.literal_refusals(text)
        if refused:  # nothing is built, nothing is cached: the policy decides afresh each time
            return BuildResult(False, 0.0, refused[0].message(), detect_backend(text))
        key = self.key_for(source)
        hit = self._from_cache(key)
        if hit is not None:
            return hit
        with self.cache.lock(key):
            hit = self._from_cache(key)
            if hit is not None:
                return hit
            return self._build_and_publish(source_path, source, key)

    def materialize(self, result: BuildResult, dest_dir: str | Path) -> None:
        """Copy a result's verified artifacts into a worker's private directory (CacheTamperError if changed)."""
        self.cache.materialize(result.key, dest_dir)

    def warm_pch(self, flag_sets: tuple[tuple[str, ...], ...] = ((), ("-O3",))) -> None:
        """Build the precompiled headers most solutions will want (blocking; once per flag set)."""
        for flags in flag_sets:
            self._ensure_pch(list(flags))

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self._executor.shutdown(wait=wait, cancel_futures=cancel_futures)

    def __enter__(self) -> BuilderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- internals ----------------------------------------------------------------------------
    def _from_cache(self, key: str) -> BuildResult | None:
        entry = self.cache.lookup(key)
        if entry is None:
            return None
        m = entry.meta
        return BuildResult(
            ok=m.get("ok") == "1",
            seconds=0.0,
            log=m.get("log", ""),
            backend=m.get("backend", ""),
            artifacts=tuple(f.path for f in entry.files),
            strategy=m.get("strategy", ""),
            cached=True,
            cuda=tuple(r for r in m.get("cuda", "").split(",") if r),
            key=key,
        )

    def _build_and_publish(self, source_path: Path, source: bytes, key: str) -> BuildResult:
        staging = Path(tempfile.mkdtemp(prefix=f"kp-build-{key[:12]}-", dir=self._work_root))
        try:
            text = source.decode("utf-8", errors="replace")
            if self._wants_pch(text):
                self._give_pch(text, staging / "pch")
            given = staging / "given" / Path(source_path).name  # the keyed bytes, as the builder's source
            given.parent.mkdir()
            given.write_bytes(source)
            result = build_solution(given, staging, self.device, self.timeout_s, self.options)
            result = replace(result, key=key)
            if result.timed_out:
                return result
            meta = {
                "ok": "1" if result.ok else "0",
                "backend": result.backend,
                "strategy": result.strategy,
                "seconds": f"{result.seconds:.2f}",
                "log": result.log,
                "cuda": ",".join(result.cuda),  # the calls that asked for CUDA (kernelproof/build/cuda.py)
            }
            out = staging_out(staging)
            try:
                if result.ok:
                    entry = self.cache.publish(key, out, meta, select=declared_output)
                    result = replace(result, artifacts=tuple(f.path for f in entry.files))
                else:
                    empty = staging / "empty"
                    empty.mkdir()
                    self.cache.publish(key, empty, meta)
            except PublishError as e:
                return replace(result, ok=False, log=f"build output refused: {e}")
            return result
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _wants_pch(self, source: str) -> bool:
        return bool(self.options.fast_inline and self.options.arch and detect_backend(source) == "cuda")

    def _pch_flag_sets(self, source: str) -> list[list[str]]:
        """The flag sets whose precompiled headers this source's build is given (at most two)."""
        if not self._wants_pch(source):
            return []
        return [f for f in _pch.guess_extra_cflags(source)[:2] if _pch.flags_allowed(f)]

    def _header_ids(self, source: str) -> list[str]:
        """Identities of the headers :meth:`_give_pch` would copy for this source (for the key)."""
        ids = []
        for flags in self._pch_flag_sets(source):
            tag = tuple(flags)
            if tag not in self._pch_ids:
                try:
                    ident = self.headers.identity(flags)
                except Exception:  # noqa: BLE001 - torch cannot describe the flags: no header is given
                    ident = "none"
                with self._pch_lock:
                    self._pch_ids[tag] = ident
            ids.append(self._pch_ids[tag])
        return ids

    def _give_pch(self, source: str, dest: Path) -> None:
        """Copy into the staging area the verified precompiled header(s) this source's load_inline calls want."""
        for flags in self._pch_flag_sets(source):
            tag = " ".join(flags)
            if tag in self._pch_failed:
                continue
            try:
                self.headers.provide(flags, dest)
            except Exception:  # noqa: BLE001 - no header: builds still work, only slower
                with self._pch_lock:
                    self._pch_failed.add(tag)

    def _ensure_pch(self, flags: list[str]) -> Path | None:
        tag = " ".join(flags)
        if tag in self._pch_failed or not _pch.flags_allowed(flags):
            return None
        try:
            return self.headers.ensure(flags)
        except Exception:  # noqa: BLE001 - no header: builds still work, only slower
            with self._pch_lock:
                self._pch_failed.add(tag)
            return None


__all__ = ["BuilderPool", "CacheTamperError"]
