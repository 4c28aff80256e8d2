"""The native backend: plain CUDA C++ kernels, compiled without torch headers, launched from Python.

A load_inline build spends about 50 s in nvcc parsing torch's headers for a kernel that compiles
in 0.4 s (h200-ceilings.json). A native solution keeps its kernels in plain CUDA C++ (no torch,
no pybind), names them, and launches them from ``ModelNew.forward``::

    from kernelproof.native import load_cuda

    mod = load_cuda(SOURCE, kernels=["add_kernel"])
    ...
    mod.add_kernel(grid=(blocks, 1, 1), block=(256, 1, 1), args=(x, y, out, n))

- **Compile.** ``nvcc -cubin`` for the one architecture of the device (TORCH_CUDA_ARCH_LIST when
  it holds one entry, as the builder sets it; else the current device's capability), cached by
  content hash in ``$KERNELPROOF_NATIVE_DIR`` (set by the builder and the worker to their private
  directories; ``~/.cache/kernelproof/native`` otherwise). About a second cold, nothing warm.
- **Launch.** CuPy loads the cubin and launches on torch's current stream, so the kernel is
  ordered with the torch work around it and timed like any other kernel. CuPy is imported at the
  first launch, so building needs no GPU.
- **Arguments.** Each kernel's ``extern "C" __global__`` signature is parsed: pointer parameters
  take CUDA tensors (their data pointer) or raw integer addresses; ``int``, ``unsigned``,
  ``long long``, ``size_t``, ``float``, ``double`` and ``bool`` parameters take Python numbers and
  are packed at exactly that width. A wrong count or type is a TypeError naming the parameter.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelproof.errors import (  # defined in the one tree, raised here
    CudaUnavailableError,
    NativeCompileError,
)

__all__ = ["NativeCompileError", "NativeKernel", "NativeModule", "Param", "load_cuda", "parse_signature"]

RECIPE = "kernelproof.native/1"  # part of every cubin's hash; bump when the compile command changes
DEFAULT_OPTIONS = ("-O3",)  # nvcc's device code is -O3 by default; stated so the hash says it
MAX_STATIC_SHARED = 48 * 1024  # bytes a launch may ask for without opting in (CUDA programming guide)

# C type (normalised spelling) -> struct format code, for scalar parameters.
_SCALARS = {
    "int": "i",
    "int32_t": "i",
    "signed int": "i",
    "unsigned": "I",
    "unsigned int": "I",
    "uint32_t": "I",
    "long": "q",
    "long int": "q",
    "long long": "q",
    "long long int": "q",
    "int64_t": "q",
    "unsigned long": "Q",
    "unsigned long long": "Q",
    "uint64_t": "Q",
    "size_t": "Q",
    "float": "f",
    "double": "d",
    "bool": "?",
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}
_records: list[dict[str, Any]] = []


@dataclass(frozen=True)
class Param:
    name: str  # parameter name in the kernel's signature
    ctype: str  # its C type as written, qualifiers dropped ("float*", "int")
    code: str  # struct format code: "P" for pointers, else a scalar code from _SCALARS


def parse_signature(source: str, kernel: str) -> tuple[Param, ...]:
    """The parameters of `extern "C" __global__ void kernel(...)` in `source`."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    m = re.search(
        r"__global__\s+(?:[\w:]+\s+)*?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
        + re.escape(kernel)
        + r"\s*\(([^)]*)\)",
        code,
    )
    if m is None:
        raise NativeCompileError(
            f'kernel {kernel!r} not found: declare it as extern "C" __global__ void {kernel}(...)'
        )
    before = code[: m.start()]
    decl = code[max(before.rfind(";"), before.rfind("}")) + 1 : m.start()]
    in_block = any(  # inside an extern "C" { ... } block that is still open
        1 + before.count("{", b.end()) - before.count("}", b.end()) > 0
        for b in re.finditer(r'extern\s*"C"\s*\{', before)
    )
    if not re.search(r'extern\s*"C"', decl) and not in_block:
        raise NativeCompileError(
            f'kernel {kernel!r} must be declared extern "C" (its name is looked up unmangled)'
        )
    text = m.group(1).strip()
    if text in ("", "void"):
        return ()
    params = []
    for idx, raw in enumerate(p.strip() for p in text.split(",")):
        params.append(_parse_param(kernel, idx, raw))
    return tuple(params)


def _parse_param(kernel: str, idx: int, raw: str) -> Param:
    if "[" in raw or "&" in raw or "(" in raw or "<" in raw:
        raise NativeCompileError(f"{kernel}: parameter {idx} ({raw!r}) must be a pointer or a plain scalar")
    pointer = "*" in raw
    words = [w for w in re.findall(r"[A-Za-z_]\w*", raw) if w not in _QUALIFIERS]
    if pointer:
        after = raw[raw.rfind("*") + 1 :]
        names = [w for w in re.findall(r"[A-Za-z_]\w*", after) if w not in _QUALIFIERS]
        name = names[-1] if names else f"arg{idx}"
        base = " ".join(w for w in words if w != name) if names else " ".join(words)
        return Param(name, base + "*", "P")
    if len(words) >= 2 and " ".join(words[:-1]) in _SCALARS:
        name, base = words[-1], " ".join(words[:-1])
    elif " ".join(words) in _SCALARS:
        name, base = f"arg{idx}", " ".join(words)
    else:
        raise NativeCompileError(
            f"{kernel}: parameter {idx} ({raw!r}) has a type the launcher cannot pack; "
            f"use a pointer or one of: {', '.join(sorted(set(_SCALARS)))}"
        )
    return Param(name, base, _SCALARS[base])


# -- compiling -----------------------------------------------------------------------------------
def _target_arch(arch: str | None) -> str:
    """ "9.0a" style arch: the argument, else a single TORCH_CUDA_ARCH_LIST entry (as pinned before
    the solution ran, kernelproof.build.toolenv), else the device."""
    from kernelproof.build import toolenv

    if arch:
        return _checked_arch(arch)
    listed = toolenv.environ().get("TORCH_CUDA_ARCH_LIST", "").replace(";", " ").split()
    if len(listed) == 1:
        return _checked_arch(listed[0].replace("+PTX", ""))
    import torch

    if torch.cuda.is_available():
        from kernelproof.build.env import arch_for_capability

        return arch_for_capability(*torch.cuda.get_device_capability())
    raise NativeCompileError("no target architecture: run on a GPU or set TORCH_CUDA_ARCH_LIST to one entry")


def _checked_arch(arch: str) -> str:
    if not re.fullmatch(r"[0-9]{1,3}\.[0-9][a-z]?", str(arch)):
        raise NativeCompileError(f"architecture {arch!r} is not of the form 9.0 or 9.0a")
    return arch


def _gencode(arch: str) -> str:
    digits = arch.replace(".", "")
    return f"-gencode=arch=compute_{digits},code=sm_{digits}"


def _cache_dir() -> Path:
    env = os.environ.get("KERNELPROOF_NATIVE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kernelproof" / "native"


def compile_cubin(source: str, arch: str, options: Sequence[str] = DEFAULT_OPTIONS) -> Path:
    """Compile `source` to a cubin for `arch` with nvcc, or return the cached one of the same hash.

    `options` are checked against kernelproof.compiler_flags first (a refused one raises
    RefusedFlagError naming it; nothing is compiled), and nvcc runs from an argument list with
    the compilers' environment as pinned before the solution ran (kernelproof.build.toolenv).
    """
    from kernelproof import compiler_flags
    from kernelproof.build import toolenv
    from kernelproof.build.env import _first_line, nvcc_path

    try:
        tokens = compiler_flags.check("options", options, toolenv.staging())
    except compiler_flags.RefusedFlagError as e:
        _records.append({"refused": str(e), "cached": True, "seconds": 0.0, "cuda": True})
        raise
    env = toolenv.environ()
    nvcc = nvcc_path(env)
    if nvcc is None:  # asked for, and impossible here: recorded (kernelproof/build/cuda.py)
        _records.append({"cuda": True, "unavailable": "no CUDA toolkit (nvcc not found)", "seconds": 0.0})
        _request(
            source, arch, options, _cache_dir() / "unavailable.cubin"
        )  # in a worker: the parent records it
        raise CudaUnavailableError(
            "load_cuda asks for a CUDA build and this machine cannot build it: nvcc not found "
            "(set CUDA_HOME or put nvcc on PATH)"
        )
    cmd_flags = ["-cubin", _gencode(_checked_arch(arch)), *tokens]
    h = hashlib.sha256()
    for part in (RECIPE, _first_line((nvcc, "--version"), last=True), " ".join(cmd_flags), source):
        h.update(part.encode() + b"\0")
    out_dir = _cache_dir()
    cubin = out_dir / f"{h.hexdigest()[:32]}.cubin"
    started = time.perf_counter()
    requested = not cubin.is_file() and _request(source, arch, options, cubin)
    if cubin.is_file():
        seconds = time.perf_counter() - started
        _records.append(
            {"cubin": cubin.name, "cached": True, "requested": requested, "seconds": seconds, "cuda": True}
        )
        return cubin
    out_dir.mkdir(parents=True, exist_ok=True)
    # Plain files with absolute paths (no TemporaryDirectory): its cleanup removes by relative
    # name, which the worker's write guard cannot place inside the private directory.
    stem = out_dir / f"{cubin.stem}.{os.getpid()}.tmp"
    src, target = stem.with_suffix(".cu"), stem.with_suffix(".cubin")
    src.write_text(source)
    try:
        done = subprocess.run(
            [nvcc, *cmd_flags, str(src), "-o", str(target)], capture_output=True, text=True, env=env
        )
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            errors = [ln.replace(str(src), "kernels.cu") for ln in lines if "error" in ln.lower()] or lines[
                -20:
            ]
            raise NativeCompileError("nvcc failed:\n" + "\n".join(errors[:30]))
        os.replace(target, cubin)  # atomic: a concurrent compile of the same source writes the same bytes
    finally:
        for leftover in (src, target):
            if leftover.exists():
                os.remove(leftover)
    _records.append(
        {"cubin": cubin.name, "cached": False, "seconds": time.perf_counter() - started, "cuda": True}
    )
    return cubin


def _request(source: str, arch: str, options: Sequence[str], cubin: Path) -> bool:
    """In a worker (whose cubin folder is read-only): ask the parent to compile this source, as a
    build request (kernelproof.build.runtime_request), whichever line of the solution called load_cuda.
    The builder's compile hashes the same source, options and architecture, so the cubin it provides
    is the one looked for here. False outside a worker (nothing asked)."""
    from kernelproof.build import inline

    requester = inline.requester()
    if requester is None:
        return False
    args = {"source": source, "options": list(options), "arch": arch}
    try:
        inline.ask(requester, "load_cuda", args, "kernelproof.native")
    except Exception as exc:  # noqa: BLE001 - refused or failed: the solution's compile error
        raise NativeCompileError(str(exc)) from None
    if not cubin.is_file():
        raise NativeCompileError("the cubin the parent provided is not where it belongs")
    return True


def records() -> list[dict[str, Any]]:
    """What load_cuda did in this process (the builder reports it)."""
    return list(_records)


# -- launching -----------------------------------------------------------------------------------
def pack_args(kernel: str, params: Sequence[Param], args: Sequence[Any]) -> tuple[Any, ...]:
    """Check `args` against the signature and turn them into fixed-width NumPy scalars for the launch."""
    import numpy as np

    if not isinstance(args, (tuple, list)):
        raise TypeError(f"{kernel}: args must be a tuple, got {type(args).__name__}")
    if len(args) != len(params):
        sig = ", ".join(f"{p.ctype} {p.name}" for p in params)
        raise TypeError(f"{kernel}({sig}) takes {len(params)} arguments, got {len(args)}")
    packed: list[Any] = []
    for p, value in zip(params, args, strict=True):
        if p.code == "P":
            packed.append(np.uint64(_address(kernel, p, value)))
            continue
        if hasattr(value, "data_ptr") or hasattr(value, "__cuda_array_interface__"):
            raise TypeError(f"{kernel}: parameter {p.name} is {p.ctype}, got a tensor (pass a Python number)")
        if p.code in "fd":
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise TypeError(f"{kernel}: parameter {p.name} is {p.ctype}, got {type(value).__name__}")
            packed.append(np.float32(value) if p.code == "f" else np.float64(value))
            continue
        if p.code == "?":
            packed.append(np.bool_(bool(value)))
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{kernel}: parameter {p.name} is {p.ctype}, got {type(value).__name__}")
        try:
            struct.pack(p.code, int(value))
        except struct.error:
            raise TypeError(f"{kernel}: parameter {p.name} ({p.ctype}) cannot hold {value}") from None
        packed.append({"i": np.int32, "I": np.uint32, "q": np.int64, "Q": np.uint64}[p.code](int(value)))
    return tuple(packed)


def _address(kernel: str, p: Param, value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise TypeError(f"{kernel}: parameter {p.name} ({p.ctype}) got a negative address")
        return value
    device = getattr(value, "device", None)
    if hasattr(value, "data_ptr") and device is not None:
        if getattr(device, "type", "") != "cuda":
            raise TypeError(
                f"{kernel}: parameter {p.name} ({p.ctype}) got a tensor on {device}; it needs a CUDA tensor"
            )
        return int(value.data_ptr())
    iface = getattr(value, "__cuda_array_interface__", None)
    if iface is not None:
        return int(iface["data"][0])
    raise TypeError(
        f"{kernel}: parameter {p.name} is {p.ctype}, got {type(value).__name__} (pass a CUDA tensor)"
    )


def _dims(kernel: str, what: str, value: Any) -> tuple[int, int, int]:
    if isinstance(value, int):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3:
        raise TypeError(f"{kernel}: {what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    dims = tuple(int(v) for v in value) + (1,) * (3 - len(value))
    if any(d < 1 for d in dims):
        raise ValueError(f"{kernel}: every {what} dimension must be >= 1, got {dims}")
    return dims  # type: ignore[return-value]


class NativeKernel:
    """One kernel of a loaded cubin; call it to launch on torch's current stream."""

    def __init__(self, module: NativeModule, name: str, params: tuple[Param, ...]):
        self.module = module
        self.name = name
        self.params = params
        self._functions: dict[int, Any] = {}  # device index -> cupy function

    def __repr__(self) -> str:
        sig = ", ".join(f"{p.ctype} {p.name}" for p in self.params)
        return f"<native kernel {self.name}({sig})>"

    def __call__(
        self, grid: Any, block: Any, args: Sequence[Any] = (), shared_mem: int = 0, stream: Any = None
    ) -> None:
        grid3 = _dims(self.name, "grid", grid)
        block3 = _dims(self.name, "block", block)
        packed = pack_args(self.name, self.params, args)
        device = next(
            (a.device.index for a in args if getattr(getattr(a, "device", None), "type", "") == "cuda"), None
        )
        import cupy
        import torch

        if device is None:
            device = torch.cuda.current_device()
        if stream is None:
            handle = torch.cuda.current_stream(device).cuda_stream
        else:
            handle = int(getattr(stream, "cuda_stream", stream))
        fn = self._function(device, int(shared_mem))
        with cupy.cuda.Device(device), cupy.cuda.ExternalStream(handle):
            fn(grid3, block3, packed, shared_mem=int(shared_mem))

    def _function(self, device: int, shared_mem: int) -> Any:
        fn = self._functions.get(device)
        if fn is None:
            import cupy

            with cupy.cuda.Device(device):
                fn = cupy.RawModule(path=str(self.module.cubin)).get_function(self.name)
            self._functions[device] = fn
        if shared_mem > MAX_STATIC_SHARED and getattr(fn, "max_dynamic_shared_size_bytes", 0) < shared_mem:
            fn.max_dynamic_shared_size_bytes = shared_mem
        return fn


class NativeModule:
    """The kernels of one native source; each is an attribute (``mod.my_kernel(...)``)."""

    def __init__(self, cubin: Path, kernels: dict[str, tuple[Param, ...]]):
        self.cubin = cubin
        self.kernels = {name: NativeKernel(self, name, params) for name, params in kernels.items()}

    def __getattr__(self, name: str) -> NativeKernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"no kernel {name!r} in this module (loaded: {', '.join(kernels)})")


def load_cuda(
    source: str, kernels: Sequence[str], options: Sequence[str] = DEFAULT_OPTIONS, arch: str | None = None
) -> NativeModule:
    """Compile (or find cached) plain CUDA C++ and return its kernels, ready to launch.

    `source` must not include torch headers; `kernels` names its ``extern "C" __global__``
    functions; `options` go to nvcc (e.g. ``("-O3", "--use_fast_math")``), if the allowlist in
    kernelproof.compiler_flags accepts them (docs/builds.md).
    """
    if isinstance(kernels, str):
        kernels = [kernels]
    if not kernels:
        raise ValueError("load_cuda needs the names of the kernels to launch")
    signatures = {k: parse_signature(source, k) for k in kernels}
    cubin = compile_cubin(source, _target_arch(arch), options)
    return NativeModule(cubin, signatures)
