"""Precompiled torch headers for the C++ side of load_inline builds, built by the trusted parent.

The pybind binding file (main.cpp) and the split launcher (launch.cpp) both start with
``torch/extension.h``; parsing it is most of their compile time (21 s of g++ on the H200
machine; 10 s with a precompiled header, h200-ceilings.json). A gcc precompiled header is only
used with the exact flags it was built with, so one is built per flag set.

Trust: a precompiled header is code that goes into every build that includes it. Issue 15 found
the shared one rewritten by a build's shell trick, and a later honest build stored with the
attacker's constructor inside. So:

- **Built by the trusted side, in its own clean process.** The parent (never a builder that ran
  solution code) runs the compiler from an argument list, with a scrubbed environment, only for
  flag sets the allowlist accepts (kernelproof.compiler_flags; a flag such as ``-fplugin=``
  would otherwise run code here).
- **Content-addressed.** Its directory is named by the hash of its inputs: the compiler and its
  version, torch's version, the flags, the header's text (:func:`pch_id`).
- **A manifest.** ``manifest.json`` lists every file with its size and sha256. A directory that
  does not verify against it (a file changed, added or missing, no manifest at all) is removed
  and rebuilt, never used.
- **Read-only to builders.** A builder never sees the shared directory: it gets its own copy in
  its staging directory, and the copy is hashed against the manifest before the builder starts
  (:meth:`HeaderStore.provide`). The published files are also made read-only (they protect only
  where builders run as another uid; the OS layer of issue 15 adds that).

Layout under ``<cache root>/pch``::

    <identity>/kp_torch.h        the header text (includes torch/extension.h)
    <identity>/kp_torch.h.gch    gcc's precompiled form
    <identity>/flags.txt         the flags it was built with
    <identity>/manifest.json     every file above, its size and sha256
    <identity>.lock              fcntl lock: one build per identity
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import inspect
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelproof import compiler_flags, pyast
from kernelproof.build.env import _first_line

PCH_HEADER = "kp_torch.h"  # includes torch/extension.h; the .gch sits beside it
HEADER_TEXT = "#include <torch/extension.h>\n"  # the header's whole text (part of its identity)
RECIPE = "kernelproof.pch/2"  # part of every identity; bump when the build command changes
MANIFEST = "manifest.json"
MANIFEST_SCHEMA = "kernelproof.pch-manifest/1"
_FILES = (PCH_HEADER, PCH_HEADER + ".gch", "flags.txt")  # what a header directory holds besides its manifest
# Variables the header's compiler may inherit from the parent (as kernelproof.build.builder's builders do).
_COMPILER_ENV = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CC", "CXX")
_NAME_DEFINE = re.compile(r"-DTORCH_EXTENSION_NAME=\S+\s*")


def torch_build_vars(
    extra_cflags: list[str] | None = None,
    extra_cuda_cflags: list[str] | None = None,
    extra_ldflags: list[str] | None = None,
    extra_include_paths: list[str] | None = None,
    name: str = "kp_probe",
) -> dict[str, str]:
    """The ninja variables (cxx, cflags, cuda_cflags, ldflags, ...) torch would use for a CUDA extension.

    Read from the build file torch's own (private) writer produces, so the flags stay whatever
    this torch version uses. Raises on a torch without that writer; callers fall back.
    """
    from torch.utils import cpp_extension as ce

    writer = ce._write_ninja_file_to_build_library
    # torch adds its own libraries (-ltorch_cpu, -lc10_cuda, -lcudart, ...) before writing the file
    prepare = ce._prepare_ldflags
    ld_args = {"extra_ldflags": list(extra_ldflags or []), "with_cuda": True, "with_sycl": False}
    ld_args.update(verbose=False, is_standalone=False)
    ldflags = prepare(**{k: v for k, v in ld_args.items() if k in inspect.signature(prepare).parameters})
    tmp = tempfile.mkdtemp(prefix="kp-flags-")
    path = os.path.join(tmp, "build.ninja")
    try:
        args = {
            "path": path,
            "name": name,
            "sources": [os.path.join(tmp, "main.cpp"), os.path.join(tmp, "cuda.cu")],
            "extra_cflags": list(extra_cflags or []),
            "extra_cuda_cflags": list(extra_cuda_cflags or []),
            "extra_sycl_cflags": [],
            "extra_ldflags": ldflags,
            "extra_include_paths": list(extra_include_paths or []),
            "with_cuda": True,
            "with_sycl": False,
            "is_standalone": False,
        }
        accepted = inspect.signature(writer).parameters
        writer(**{k: v for k, v in args.items() if k in accepted})
        text = Path(path).read_text()
    finally:  # absolute paths: the worker's write guard places relative removals in the wrong place
        if os.path.exists(path):
            os.remove(path)
        os.rmdir(tmp)
    return parse_ninja_vars(text)


def parse_ninja_vars(text: str) -> dict[str, str]:
    """Top-level `name = value` lines of a ninja file (the rules and build lines excluded)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(("rule ", "build ", "default ", " ", "\t")):
            continue
        m = re.match(r"^(\w+)\s*=\s?(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    out["_header"] = text.split("\nbuild ", 1)[0]
    return out


def ninja_rules(text: str) -> dict[str, str]:
    """Each ``rule NAME`` of a ninja file and its ``command = ...`` line (unexpanded)."""
    rules: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^rule\s+(\w+)\s*$", line)
        if m:
            current = m.group(1)
            continue
        m = re.match(r"^\s+command\s*=\s?(.*)$", line)
        if m and current is not None:
            rules[current] = m.group(1)
        elif not line.startswith((" ", "\t")):
            current = None
    return rules


def pch_flags(vars_: dict[str, str]) -> str:
    """The C++ flags a precompiled header must share with the files that use it (name define removed)."""
    flags = _NAME_DEFINE.sub("", vars_.get("cflags", "") + " " + vars_.get("post_cflags", ""))
    return " ".join(flags.split())


def pch_id(vars_: dict[str, str]) -> str:
    """Identity of the precompiled header matching these ninja variables: the hash of its inputs
    (the compiler and its version, torch's version, the flags, the header's text, the recipe)."""
    import torch

    cxx = _compiler(vars_)
    h = hashlib.sha256()
    for part in (
        RECIPE,
        " ".join(cxx),
        _first_line((cxx[0], "--version")),
        torch.__version__,
        pch_flags(vars_),
    ):
        h.update(part.encode() + b"\0")
    h.update(HEADER_TEXT.encode())
    return h.hexdigest()[:24]


def flags_allowed(extra_cflags: list[str] | None) -> bool:
    """Whether a precompiled header may be built for these user flags in the trusted parent:
    every flag on the allowlist, with no staging directory (so no include path but the toolkit's)."""
    return compiler_flags.first_refusal("extra_cflags", list(extra_cflags or []), None) is None


def pch_root(cache_root: str | Path) -> Path:
    return Path(cache_root) / "pch"


@dataclass(frozen=True)
class _Verified:
    manifest_sha256: str  # hash of the manifest that was checked
    stats: tuple[
        tuple[int, int, int, int], ...
    ]  # (inode, size, mtime_ns, ctime_ns) of each file, manifest last


class HeaderStore:
    """The precompiled headers under ``<cache root>/pch``, as the trusted parent builds and hands them out.

    It remembers which directories it verified (by their files' inode, size and times), so a
    header is hashed once per process rather than once per build; any change to a file after
    that (a write changes its ctime) sends it back through the full check.
    """

    def __init__(self, cache_root: str | Path, timeout_s: float = 600.0):
        self.root = pch_root(cache_root)
        self.timeout_s = timeout_s
        self._verified: dict[str, _Verified] = {}

    def identity(self, extra_cflags: list[str] | None) -> str:
        """The identity (directory name) of the header for these flags; ValueError if not allowed."""
        return pch_id(self._vars(extra_cflags))

    def ensure(self, extra_cflags: list[str] | None = None) -> Path | None:
        """Build (once) the header for these flags and return its verified directory, or None if not allowed.

        Concurrent callers serialise on a lock per header; the build goes to a temporary directory
        renamed into place, so a reader never sees half a header. A directory that does not verify
        against its manifest is removed and built again.
        """
        if not flags_allowed(extra_cflags):
            return None
        vars_ = self._vars(extra_cflags)
        ident = pch_id(vars_)
        final = self.root / ident
        if self._verify(final):
            return final
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{ident}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self._verify(final):
                return final
            if final.exists() or final.is_symlink():
                _remove(final)
            self._build(vars_, final)
        return final

    def provide(self, extra_cflags: list[str] | None, dest_root: str | Path) -> Path | None:
        """A private, verified copy of the header for these flags in `dest_root` (a staging
        directory), built first if missing; None when the flags are not allowed or no header verifies."""
        for _attempt in (1, 2):
            directory = self.ensure(extra_cflags)
            if directory is None:
                return None
            copy = self.copy(directory.name, dest_root)
            if copy is not None:
                return copy
        return None

    def copy(self, ident: str, dest_root: str | Path) -> Path | None:
        """Copy one header directory into `dest_root` (a reflink where possible), checked against the
        manifest. The copy is hashed unless the source was verified by this store and none of its
        files changed (same inode, size and times) between that check and the end of the copy. On a
        mismatch the copy and the shared directory are removed (the next :meth:`ensure` rebuilds
        it) and None is returned."""
        src = self.root / ident
        manifest = _read_manifest(src)
        if manifest is None:
            return None
        known = self._verified.get(ident)
        dest = Path(dest_root) / ident
        dest.mkdir(parents=True, exist_ok=True)
        for name in manifest:
            done = subprocess.run(
                ["cp", "--reflink=auto", "--preserve=timestamps", "--", str(src / name), str(dest / name)],
                capture_output=True,
            )
            if done.returncode != 0:
                shutil.copy2(src / name, dest / name)
        try:
            unchanged = known is not None and known.stats == tuple(
                _stat_key(src / n) for n in (*manifest, MANIFEST)
            )
        except OSError:
            unchanged = False
        for name, (size, digest) in manifest.items():
            target = dest / name
            intact = not target.is_symlink() and target.stat().st_size == size
            if not intact or (not unchanged and _sha256(target) != digest):
                _remove(dest)
                self._evict(src)
                return None
        return dest

    # -- internals -------------------------------------------------------------------------------
    def _vars(self, extra_cflags: list[str] | None) -> dict[str, str]:
        # The arch flag only keeps torch from asking for a device; the C++ flags do not depend on it.
        flags = [f for f in (extra_cflags or []) if f.strip()]
        return torch_build_vars(extra_cflags=flags, extra_cuda_cflags=["-arch=sm_90"])

    def _verify(self, directory: Path) -> bool:
        """Whether `directory` holds exactly its manifest's files with their hashes (remembered by stat)."""
        manifest = _read_manifest(directory)
        if manifest is None:
            return False
        try:
            found = sorted(p.name for p in directory.iterdir())
            stats = tuple(_stat_key(directory / n) for n in (*manifest, MANIFEST))
        except OSError:
            return False
        if found != sorted((*manifest, MANIFEST)):
            return False
        digest = _sha256(directory / MANIFEST)
        known = self._verified.get(directory.name)
        if known is not None and known == _Verified(digest, stats):
            return True
        for name, (size, sha) in manifest.items():
            p = directory / name
            if p.is_symlink() or not p.is_file() or p.stat().st_size != size or _sha256(p) != sha:
                return False
        self._verified[directory.name] = _Verified(digest, stats)
        return True

    def _evict(self, directory: Path) -> None:
        self._verified.pop(directory.name, None)
        with contextlib.suppress(OSError):
            _remove(directory)

    def _build(self, vars_: dict[str, str], final: Path) -> None:
        """Compile the header in a fresh compiler process, write its manifest, make it read-only and
        rename it into place."""
        tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}-", dir=self.root))
        try:
            (tmp / PCH_HEADER).write_text(HEADER_TEXT)
            flags = pch_flags(vars_)
            argv = [
                *_compiler(vars_),
                "-x",
                "c++-header",
                *_split(flags),
                PCH_HEADER,
                "-o",
                PCH_HEADER + ".gch",
            ]
            env = {k: os.environ[k] for k in _COMPILER_ENV if k in os.environ}
            env["TMPDIR"] = str(tmp)
            done = subprocess.run(
                argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=self.timeout_s, check=False
            )
            if done.returncode != 0:
                raise RuntimeError(f"precompiled header build failed: {done.stderr[-2000:]}")
            (tmp / "flags.txt").write_text(flags + "\n")
            files = {n: {"size_bytes": (tmp / n).stat().st_size, "sha256": _sha256(tmp / n)} for n in _FILES}
            doc = {"schema": MANIFEST_SCHEMA, "identity": final.name, "files": files}
            (tmp / MANIFEST).write_text(json.dumps(doc, indent=1, sort_keys=True))
            for n in (*_FILES, MANIFEST):
                os.chmod(tmp / n, 0o444)
            os.chmod(tmp, 0o555)
            os.rename(tmp, final)
        except BaseException:
            _remove(tmp)
            raise


def ensure_pch(
    cache_root: str | Path, extra_cflags: list[str] | None = None, timeout_s: float = 600.0
) -> Path | None:
    """HeaderStore(cache_root).ensure(extra_cflags): build (once) and verify; None if not allowed."""
    return HeaderStore(cache_root, timeout_s).ensure(extra_cflags)


def copy_pch(cache_root: str | Path, ident: str, dest_root: str | Path) -> Path | None:
    """Give one build its own copy of a precompiled header, checked against the manifest (None if it does not verify)."""
    return HeaderStore(cache_root).copy(ident, dest_root)


def _compiler(vars_: dict[str, str]) -> list[str]:
    return _split(vars_.get("cxx", "c++")) or ["c++"]


def _split(value: str) -> list[str]:
    """Flags as torch wrote them for sh, split as sh would; a value sh would expand is refused."""
    if any(c in value for c in "`$\n"):
        raise ValueError(f"flags that need a shell to expand: {value[:200]!r}")
    return shlex.split(value)


def _read_manifest(directory: Path) -> dict[str, tuple[int, str]] | None:
    """{file name: (size, sha256)} from a header directory's manifest, or None if it is missing or malformed."""
    try:
        doc = json.loads((directory / MANIFEST).read_text())
        files = doc["files"]
        if doc.get("schema") != MANIFEST_SCHEMA or doc.get("identity") != directory.name:
            return None
        out = {str(n): (int(f["size_bytes"]), str(f["sha256"])) for n, f in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return out if sorted(out) == sorted(_FILES) else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: Path) -> tuple[int, int, int, int]:
    st = os.lstat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _remove(path: Path) -> None:
    """Remove a file or a tree whose directories may be read-only (published headers are)."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return
    for dirpath, _dirs, _files in os.walk(path):
        with contextlib.suppress(OSError):
            os.chmod(dirpath, stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)


def guess_extra_cflags(source: str) -> list[list[str]]:
    """The literal `extra_cflags` of each load_inline call in a solution (read, never run).

    Lets the parent pick the precompiled header a build will want before the build starts.
    A call without the argument counts as []; a non-literal one is skipped.
    """
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return []
    found: list[list[str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        if name != "load_inline":
            continue
        flags: list[str] = []
        for kw in node.keywords:
            if kw.arg == "extra_cflags":
                with contextlib.suppress(ValueError, TypeError, SyntaxError):
                    value = ast.literal_eval(kw.value)
                    flags = [str(f) for f in value] if isinstance(value, (list, tuple)) else []
        flags = [f for f in flags if f.strip()]
        if flags not in found:
            found.append(flags)
    return found
