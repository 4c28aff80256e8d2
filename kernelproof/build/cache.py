"""A content-addressed, persistent build cache that candidate code never gets to write.

Builds happen when candidate code runs (load_inline at import), so a build process is untrusted:
it could plant a library under another solution's key, and the next evaluation of that solution
would run the planted code (ARCHITECTURE.md, "The build cache is an attack surface"). Permission
bits do not help: everything runs as root. The defence is in who touches what:

- a build process only ever sees its own private staging directory, never the cache root;
- the trusted parent publishes: it copies the staging directory into the cache, hashes the copy
  (not the staging directory, which a leftover process could still be changing), writes a
  manifest with the sha256 of every file, and renames the finished entry into place in one step;
- a worker never sees the cache either: the parent materializes an entry into the worker's
  private directory, and checks every hash against the manifest first. An entry that does not
  match, has extra files or has links is refused and evicted.

Layout under the root::

    entries/<key[:2]>/<key>/manifest.json   file list, sizes, mtimes and sha256s
    entries/<key[:2]>/<key>/files/...       the build's declared outputs, as the build left them
    locks/<key>.lock                        fcntl lock: one builder per key, readers wait for it
    tmp/                                    entries being assembled (same file system: atomic rename)

Two builders of one key serialise on the key's lock: the second finds the first one's entry.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kernelproof.errors import CacheTamperError, PublishError  # defined in the one tree, raised here

MANIFEST_SCHEMA = "kernelproof.build-entry/1"
MAX_ENTRY_BYTES = 1 << 30  # 1 GiB: a one-kernel extension is ~10 MB; more is a disk-filling build
_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class EntryFile:
    path: str  # relative to the entry's files/ directory, '/'-separated
    size_bytes: int  # file size
    mtime_ns: int  # modification time as built (ninja and torch compare these)
    sha256: str  # hash of the contents at publication


@dataclass(frozen=True)
class Entry:
    key: str  # the build key (env.build_key)
    created_at: float  # time.time() of publication
    files: tuple[EntryFile, ...]  # every artifact
    meta: dict[str, str] = field(default_factory=dict)  # strings from the builder: backend, strategy

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _check_key(key: str) -> str:
    if len(key) < 16 or not all(c in "0123456789abcdef" for c in key):
        raise ValueError(f"not a build key (lower-case hex, 16+ digits): {key!r}")
    return key


def _walk_files(
    top: Path, exclude: frozenset[str], select: Callable[[str], bool] | None = None
) -> list[Path]:
    """Regular files under top, sorted; links and special files are an error (never followed).

    With `select`, only the files whose relative path it accepts are listed (and checked); the
    rest, links included, are left where they are.
    """
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        here = Path(dirpath)
        rel_dir = here.relative_to(top)
        dirnames[:] = sorted(d for d in dirnames if (rel_dir / d).as_posix() not in exclude)
        for d in dirnames:
            if (here / d).is_symlink() and select is None:
                raise PublishError(f"{(rel_dir / d).as_posix()} is a link; only regular files are published")
        for name in sorted(filenames):
            rel = (rel_dir / name).as_posix()
            if rel in exclude or (select is not None and not select(rel)):
                continue
            p = here / name
            if p.is_symlink() or not p.is_file():
                raise PublishError(f"{rel} is not a regular file; only regular files are published")
            out.append(p)
    return out


class BuildCache:
    """The shared build cache at `root` (see the module docstring for the trust model)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        # sha256 of each manifest this object published or verified: a manifest rewritten on
        # disk afterwards (to match planted files) is refused by the process that remembers it.
        self._manifests: dict[str, str] = {}

    # -- paths -------------------------------------------------------------------------------
    def _entry_dir(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / key

    def _ensure_dirs(self) -> None:
        for sub in ("entries", "locks", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def lock(self, key: str, shared: bool = False) -> Iterator[None]:
        """Hold the key's lock: exclusive to build and publish, shared to read."""
        _check_key(key)
        self._ensure_dirs()
        fd = os.open(self.root / "locks" / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -- reading -----------------------------------------------------------------------------
    def lookup(self, key: str) -> Entry | None:
        """The published entry for `key` (manifest only, not yet verified), or None on a miss."""
        entry, _digest = self._read_manifest(key)
        return entry

    def _read_manifest(self, key: str) -> tuple[Entry | None, str]:
        manifest = self._entry_dir(_check_key(key)) / "manifest.json"
        try:
            raw = manifest.read_bytes()
            doc = json.loads(raw)
        except (OSError, ValueError):
            return None, ""
        if not isinstance(doc, dict) or doc.get("schema") != MANIFEST_SCHEMA or doc.get("key") != key:
            return None, ""
        try:
            files = tuple(EntryFile(**f) for f in doc["files"])
            meta = {str(k): str(v) for k, v in dict(doc.get("meta", {})).items()}
            entry = Entry(key=key, created_at=float(doc["created_at"]), files=files, meta=meta)
        except (TypeError, ValueError, KeyError):
            return None, ""
        if any(f.path.startswith("/") or ".." in f.path.split("/") for f in files):
            return None, ""
        return entry, hashlib.sha256(raw).hexdigest()

    def _trusted_entry(self, key: str) -> Entry:
        """The entry, its manifest checked against the one this object remembers (KeyError on a miss)."""
        entry, digest = self._read_manifest(key)
        if entry is None:
            raise KeyError(key)
        known = self._manifests.get(key)
        if known is not None and known != digest:
            self.evict(key)
            raise CacheTamperError(key, "its manifest was rewritten after publication")
        self._manifests[key] = digest
        return entry

    def _check_file_set(self, key: str, entry: Entry) -> None:
        """Same files as the manifest lists, all regular; evict and raise CacheTamperError if not."""
        files_dir = self._entry_dir(key) / "files"
        try:
            found = {p.relative_to(files_dir).as_posix() for p in _walk_files(files_dir, frozenset())}
        except PublishError as e:
            self.evict(key)
            raise CacheTamperError(key, str(e)) from None
        listed = {f.path for f in entry.files}
        if found != listed:
            extra = sorted(found - listed)[:3]
            missing = sorted(listed - found)[:3]
            self.evict(key)
            raise CacheTamperError(key, f"file set changed (extra {extra}, missing {missing})")

    def verify(self, key: str) -> Entry:
        """Check every file of the entry against its manifest; raise CacheTamperError (and evict) if not."""
        entry = self._trusted_entry(key)
        self._check_file_set(key, entry)
        files_dir = self._entry_dir(key) / "files"
        for f in entry.files:
            if file_sha256(files_dir / f.path) != f.sha256:
                self.evict(key)
                raise CacheTamperError(key, f"{f.path} does not match its manifest hash")
        return entry

    def materialize(self, key: str, dest_dir: str | Path) -> Entry:
        """Copy a verified entry into `dest_dir` (a worker's private directory), mtimes preserved.

        Each file is hashed as it is copied, so what lands in `dest_dir` is exactly what the
        manifest lists, even if the entry is changed during the copy. Raises KeyError on a miss,
        and CacheTamperError when the entry does not match its manifest: the entry is evicted and
        the partial copy removed.
        """
        dest = Path(dest_dir)
        with self.lock(key, shared=True):
            entry = self._trusted_entry(key)
            self._check_file_set(key, entry)
            src_dir = self._entry_dir(key) / "files"
            written: list[Path] = []
            for f in entry.files:
                target = dest / f.path
                target.parent.mkdir(parents=True, exist_ok=True)
                written.append(target)
                if _copy_hashed(src_dir / f.path, target) != f.sha256:
                    for w in written:
                        w.unlink(missing_ok=True)
                    self.evict(key)
                    raise CacheTamperError(key, f"{f.path} does not match its manifest hash")
                os.utime(target, ns=(f.mtime_ns, f.mtime_ns))
        return entry

    # -- writing -----------------------------------------------------------------------------
    def publish(
        self,
        key: str,
        staging_dir: str | Path,
        meta: dict[str, str] | None = None,
        exclude: tuple[str, ...] = (),
        max_bytes: int = MAX_ENTRY_BYTES,
        select: Callable[[str], bool] | None = None,
    ) -> Entry:
        """Publish the artifacts in `staging_dir` under `key`; the first publisher of a key wins.

        Call it from the trusted parent after the build process has ended. `exclude` lists
        top-level relative paths left out (a private copy of a precompiled header, say); `select`,
        when given, names the only files published (the builder pool passes the declared outputs,
        kernelproof.build.builder.declared_output), so nothing else a build left is ever copied.
        """
        _check_key(key)
        self._ensure_dirs()
        staging = Path(staging_dir)
        paths = _walk_files(staging, frozenset(exclude), select)
        total = sum(p.stat().st_size for p in paths)
        if total > max_bytes:
            raise PublishError(f"build output is {total} bytes, over the {max_bytes}-byte limit")
        existing = self.lookup(key)
        if existing is not None:
            return existing
        tmp = Path(tempfile.mkdtemp(prefix=f"{key[:16]}-", dir=self.root / "tmp"))
        try:
            files = []
            for p in paths:
                rel = p.relative_to(staging).as_posix()
                target = tmp / "files" / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                digest = _copy_hashed(p, target)
                mtime_ns = p.stat().st_mtime_ns
                os.utime(target, ns=(mtime_ns, mtime_ns))
                files.append(EntryFile(rel, target.stat().st_size, mtime_ns, digest))
            doc = {
                "schema": MANIFEST_SCHEMA,
                "key": key,
                "created_at": time.time(),
                "files": [f.__dict__ for f in files],
                "meta": dict(meta or {}),
            }
            raw = json.dumps(doc, indent=1).encode()
            (tmp / "manifest.json").write_bytes(raw)
            final = self._entry_dir(key)
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(tmp, final)  # atomic; fails if another publisher got there first
                self._manifests[key] = hashlib.sha256(raw).hexdigest()
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                winner = self.lookup(key)
                if winner is None:
                    raise
                return winner
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        published = self.lookup(key)
        assert published is not None  # noqa: S101 - we just renamed it into place
        return published

    def evict(self, key: str) -> None:
        """Remove one entry (renamed away first, so readers never see half of it)."""
        src = self._entry_dir(_check_key(key))
        if not src.exists():
            return
        self._ensure_dirs()
        trash = Path(tempfile.mkdtemp(prefix="evict-", dir=self.root / "tmp"))
        try:
            os.rename(src, trash / "entry")
        except OSError:
            pass
        shutil.rmtree(trash, ignore_errors=True)

    # -- administration ----------------------------------------------------------------------
    def keys(self) -> list[str]:
        base = self.root / "entries"
        if not base.is_dir():
            return []
        return sorted(p.name for shard in base.iterdir() if shard.is_dir() for p in shard.iterdir())

    def info(self) -> dict[str, object]:
        """Counts and sizes for `kernelproof cache info`."""
        entries = [e for e in (self.lookup(k) for k in self.keys()) if e is not None]
        pch_bytes = _tree_bytes(self.root / "pch")
        return {
            "root": str(self.root),
            "entries": len(entries),
            "entry_bytes": sum(e.size_bytes for e in entries),
            "pch_bytes": pch_bytes,
            "oldest": min((e.created_at for e in entries), default=None),
            "newest": max((e.created_at for e in entries), default=None),
            "backends": _count(e.meta.get("backend", "") for e in entries),
        }

    def clear(self) -> int:
        """Remove every entry and precompiled header; return the number of entries removed."""
        n = len(self.keys())
        if not self.root.exists():
            return 0
        self._ensure_dirs()
        trash = Path(tempfile.mkdtemp(prefix="clear-", dir=self.root / "tmp"))
        for sub in ("entries", "pch"):
            with contextlib.suppress(FileNotFoundError):
                os.rename(self.root / sub, trash / sub)
        for dirpath, _dirs, _files in os.walk(trash):  # published headers are read-only
            with contextlib.suppress(OSError):
                os.chmod(dirpath, 0o700)
        shutil.rmtree(trash, ignore_errors=True)
        return n


def _copy_hashed(src: Path, dst: Path) -> str:
    """Copy src to dst (a new file, never followed through a link) and return the sha256 of what was written."""
    h = hashlib.sha256()
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fin, open(dst, "xb") as fout:
        while chunk := fin.read(_HASH_CHUNK):
            h.update(chunk)
            fout.write(chunk)
    shutil.copymode(src, dst)
    return h.hexdigest()


def _tree_bytes(top: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _count(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out
