"""Precompiled torch headers for the C++ side of load_inline builds, built by the trusted parent.

The pybind binding file (main.cpp) and the split launcher (launch.cpp) both start with
``torch/extension.h``; parsing it is most of their compile time (21 s of g++ on the H200
machine; 10 s with a precompiled header, h200-ceilings.json). A gcc precompiled header is only
used with the exact flags it was built with, so one is built per flag set, keyed by the flags
torch itself would pass (read from the ninja file torch writes) and the compiler's version.

Trust: a precompiled header is code that goes into every build that includes it. It is built
here, in the parent, from torch's own headers, and only for flag sets on a short allow-list (a
candidate's `extra_cflags` could otherwise load a compiler plugin into the trusted process). A
build process never sees the shared copy: the parent gives each build its own copy (a reflink
where the file system has them), inside the build's staging directory, and leaves it out of
what gets published.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import inspect
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from kernelproof.build.env import _first_line

PCH_HEADER = "kp_torch.h"  # includes torch/extension.h; the .gch sits beside it
# Flags a precompiled header may be built with (each extra_cflags entry must match).
_SAFE_FLAG = re.compile(
    r"^(|-O[0-3s]|-DNDEBUG|-g0|-w|-Wall|-Wextra|-Wno-[\w-]+|-std=c\+\+(17|20)|-ffast-math|-funroll-loops)$"
)
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


def pch_flags(vars_: dict[str, str]) -> str:
    """The C++ flags a precompiled header must share with the files that use it (name define removed)."""
    flags = _NAME_DEFINE.sub("", vars_.get("cflags", "") + " " + vars_.get("post_cflags", ""))
    return " ".join(flags.split())


def pch_id(vars_: dict[str, str]) -> str:
    """Identity of the precompiled header matching these ninja variables."""
    cxx = vars_.get("cxx", "c++")
    h = hashlib.sha256()
    for part in (cxx, _first_line((cxx, "--version")), pch_flags(vars_)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:24]


def flags_allowed(extra_cflags: list[str] | None) -> bool:
    """Whether a precompiled header may be built for these user flags in the trusted parent."""
    return all(_SAFE_FLAG.match(f.strip()) for f in (extra_cflags or []))


def pch_root(cache_root: str | Path) -> Path:
    return Path(cache_root) / "pch"


def ensure_pch(
    cache_root: str | Path, extra_cflags: list[str] | None = None, timeout_s: float = 600.0
) -> Path | None:
    """Build (once) the precompiled header for these flags; return its directory, or None if not allowed.

    Concurrent callers serialise on a lock per header; the build goes to a temporary directory
    renamed into place, so a reader never sees half a header.
    """
    if not flags_allowed(extra_cflags):
        return None
    # The arch flag only keeps torch from asking for a device; the C++ flags do not depend on it.
    vars_ = torch_build_vars(
        extra_cflags=[f for f in (extra_cflags or []) if f.strip()], extra_cuda_cflags=["-arch=sm_90"]
    )
    ident = pch_id(vars_)
    root = pch_root(cache_root)
    final = root / ident
    if (final / (PCH_HEADER + ".gch")).is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{ident}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / (PCH_HEADER + ".gch")).is_file():
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f"{ident}-", dir=root))
        try:
            (tmp / PCH_HEADER).write_text("#include <torch/extension.h>\n")
            cmd = f"{vars_.get('cxx', 'c++')} -x c++-header {pch_flags(vars_)} {tmp / PCH_HEADER} -o {tmp / PCH_HEADER}.gch"
            done = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout_s)
            if done.returncode != 0:
                raise RuntimeError(f"precompiled header build failed: {done.stderr[-2000:]}")
            (tmp / "flags.txt").write_text(pch_flags(vars_) + "\n")
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


def copy_pch(cache_root: str | Path, ident: str, dest_root: str | Path) -> Path | None:
    """Give one build its own copy of a precompiled header (reflink where possible)."""
    src = pch_root(cache_root) / ident
    if not (src / (PCH_HEADER + ".gch")).is_file():
        return None
    dest = Path(dest_root) / ident
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / PCH_HEADER, dest / PCH_HEADER)
    done = subprocess.run(
        ["cp", "--reflink=auto", "--preserve=timestamps", str(src / (PCH_HEADER + ".gch")), str(dest)],
        capture_output=True,
    )
    if done.returncode != 0:
        shutil.copy2(src / (PCH_HEADER + ".gch"), dest / (PCH_HEADER + ".gch"))
    return dest


def guess_extra_cflags(source: str) -> list[list[str]]:
    """The literal `extra_cflags` of each load_inline call in a solution (read, never run).

    Lets the parent pick the precompiled header a build will want before the build starts.
    A call without the argument counts as []; a non-literal one is skipped.
    """
    try:
        tree = ast.parse(source)
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
