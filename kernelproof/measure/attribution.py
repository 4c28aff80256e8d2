"""Which device kernels are the solution's: by identity, never by the text of a name (E1-E3, I10).

A kernel is the solution's because the solution built it. What the parent knows to be the
solution's code, and nothing else, names its kernels:

- the kernels of the binaries the parent's builder pool built for it and copied into its worker's
  read-only folder (a ``load_inline`` / ``load`` extension, a ``kernelproof.native`` cubin): their
  ELF symbol tables, read here in the parent (:func:`built_names`). A ``__global__`` function has
  an nvcc host stub named after it in the extension (its other functions are no kernels: a host
  function named as a cuBLAS kernel claims nothing) and a symbol in the cubin;
- the Triton kernels the solution's code defines (``@triton.jit`` functions, read from its syntax
  tree by kernelproof.solution, never from comments or strings): a Triton kernel's device name is
  its function's name.

Names are compared whole, as qualified C++ names (``at::native::vectorized_elementwise_kernel``,
``myns::scale``, ``_bias_relu_kernel``: the return type, template arguments and parameters left
out, :func:`qualified_name`), never by token: a kernel, a comment or a string naming ``native``
claims nothing of ``at::native::...``. A name in a namespace of torch or a vendor library
(:data:`FOREIGN_NAMESPACES`), and a name the baselines' own profiles of the same task show (eager
and torch.compile: :attr:`KernelIdentity.baseline`), is never the solution's, whatever it declares;
a Triton kernel named after inductor's ``triton_poi_fused_...`` that the compile baseline also
runs is the baseline's. Memory copies and sets are no kernel of anyone's.

On the CPU an extension's launch is judged by what it runs: the ATen ops the profiler sees inside
it (kernelproof/measure/accounting.py), and the ATen entry points its binary imports that do
their work without the dispatcher, where no profiler sees them (``at::cpu::clamp_min``,
``at::native::...``: :data:`ATEN_KERNEL_NAMESPACES`), or a run-time symbol lookup (``dlsym``),
which hides what it calls (:func:`aten_imports`).

The profile that lists the kernels is the worker's report (its profiler runs in the candidate's
process): a name in it counts for the solution only when it is one of these, so a forged row
naming anything else gains nothing, and kernelproof/measure/accounting.py checks the profile's
GPU time against the parent's own clock.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Top-level namespaces of torch and of the vendor libraries it ships or calls: a kernel whose
# qualified name lies in one is theirs, even when a solution's binary instantiated it.
FOREIGN_NAMESPACES = frozenset(
    {
        "at",
        "c10",
        "torch",
        "caffe2",
        "aten",
        "cutlass",
        "cute",
        "cub",
        "thrust",
        "cublas",
        "cublasLt",
        "cudnn",
        "cufft",
        "cusparse",
        "curand",
        "cutensor",
        "flash",
        "fbgemm_gpu",
        "nccl",
        "std",
        "pybind11",
        "__gnu_cxx",
    }
)
# ATen's kernels called without the dispatcher (no profiler event, no dispatch key): the per-backend
# wrappers of structured and composite kernels and the kernels themselves. An extension importing
# one runs ATen's work inside its own launch unseen. (``at::`` names at the top, ``at::empty`` and
# the like, go through the dispatcher: the profiler sees their work.)
ATEN_KERNEL_NAMESPACES = (
    "at::cpu::",
    "at::cuda::",
    "at::native::",
    "at::meta::",
    "at::compositeexplicitautograd::",
    "at::compositeexplicitautogradnonfunctional::",
    "at::compositeimplicitautograd::",
    "at::compositeimplicitautogradnestedtensor::",
)
# Symbols that find functions at run time: what the binary then calls cannot be read from it.
RUNTIME_LOOKUP = frozenset({"dlsym", "dlvsym"})
_MEMORY_ACTIVITY = re.compile(r"^(Memcpy|Memset)\b|^\[?memcpy|^\[?memset", re.IGNORECASE)
_ANONYMOUS = "(anonymous namespace)"
MAX_BINARY_BYTES = 1 << 30  # a file larger than this under the worker's folder is not read
_ELF_MAGIC = b"\x7fELF"
_SYMBOL_TABLES = (2, 11)  # SHT_SYMTAB, SHT_DYNSYM
_FUNCTION = 2  # STT_FUNC
_NOTYPE = 0  # STT_NOTYPE
_EM_CUDA = 190  # e_machine of a cubin: every function in it is device code
# nvcc's host stub of a __global__ function is named this prefix and the kernel's mangled name (an
# ``extern "C"`` kernel's stub carries the C++ mangling of its signature): only these are kernels
# of a host binary, never its other functions (a host function named as a cuBLAS kernel is not one).
_STUB = "__device_stub_"
_MANGLED_IDENTIFIER = re.compile(r"_ZL?(\d+)")  # a mangled name's first identifier: its length
_PROGBITS = 1  # SHT_PROGBITS
_SHF_WRITE, _SHF_ALLOC, _SHF_EXECINSTR = 0x1, 0x2, 0x4


def qualified_name(name: str) -> str:
    """The qualified function name of a demangled (or plain) kernel name: its return type,
    template arguments and parameter list left out. ``void at::native::reduce_kernel<512, 1,
    ...>(...)`` is ``at::native::reduce_kernel``; ``_bias_relu_kernel`` is itself."""
    text = name.strip().replace(_ANONYMOUS, "{anonymous}")
    out: list[str] = []
    depth = 0
    for ch in text:  # template arguments dropped, at any depth (they may hold parentheses)
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    bare = "".join(out).split("(", 1)[0].strip()
    last = bare.split()[-1] if bare.split() else ""
    return last.replace("{anonymous}", _ANONYMOUS)


def foreign_namespace(qualified: str) -> bool:
    """Does a qualified name lie in a namespace of torch or a vendor library (or ``std``)?"""
    head = qualified.split("::", 1)[0] if "::" in qualified else ""
    return head in FOREIGN_NAMESPACES


@dataclass(frozen=True)
class KernelIdentity:
    """What the parent knows names the solution's device kernels, as qualified names."""

    built: frozenset[str] = frozenset()  # functions of the binaries the parent built for it
    jitted: frozenset[str] = frozenset()  # Triton kernels its code defines (syntax tree)
    baseline: frozenset[str] = frozenset()  # kernels the baselines' own profiles showed
    binaries: int = 0  # binaries the parent built for it (0: no extension or cubin of its own)
    # ATen kernels its host binaries call without the dispatcher, or a run-time lookup (aten_imports)
    aten_imports: frozenset[str] = frozenset()

    @property
    def own(self) -> frozenset[str]:
        """The qualified names a profiled kernel may have to be the solution's."""
        return frozenset(
            q for q in self.built | self.jitted if q and q not in self.baseline and not foreign_namespace(q)
        )

    def with_baseline(self, names: Iterable[str]) -> KernelIdentity:
        """The same identity, with the kernels of the baselines' profiles (raw names) set apart."""
        extra = frozenset(qualified_name(n) for n in names) - {""}
        return KernelIdentity(
            self.built, self.jitted, self.baseline | extra, self.binaries, self.aten_imports
        )

    def shadowed(self) -> tuple[str, ...]:
        """The solution's kernel names a baseline's profile also shows (never the solution's)."""
        return tuple(sorted((self.built | self.jitted) & self.baseline))

    def is_own(self, name: str) -> bool:
        """Is the profiled device activity `name` one of the solution's kernels?"""
        if _MEMORY_ACTIVITY.search(name.strip()):
            return False
        return qualified_name(name) in self.own


def identity_of(own: KernelIdentity | Iterable[str]) -> KernelIdentity:
    """`own` as an identity: names given bare are the solution's Triton kernels (a caller that knows
    no build of its own)."""
    if isinstance(own, KernelIdentity):
        return own
    return KernelIdentity(jitted=frozenset(qualified_name(n) for n in own) - {""})


def built_names(folder: str | Path | None, skip: tuple[str, ...] = ("solution",)) -> KernelIdentity:
    """The functions of every ELF binary the parent copied into a worker's read-only `folder` (an
    extension's ``.so``, a cubin), demangled and qualified; `skip`: top-level folders that hold no
    build (the solution's own copy)."""
    if folder is None:
        return KernelIdentity()
    root = Path(folder)
    if not root.is_dir():
        return KernelIdentity()
    mangled: set[str] = set()
    imported: set[str] = set()
    binaries = 0
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).parts
        if not rel or rel[0] in skip or path.is_symlink() or not path.is_file():
            continue
        try:
            if path.stat().st_size > MAX_BINARY_BYTES:
                continue
            with path.open("rb") as f:
                if f.read(4) != _ELF_MAGIC:
                    continue
            data = path.read_bytes()
        except OSError:
            continue
        found = elf_functions(data)
        if found is not None:
            binaries += 1
            if elf_machine(data) == _EM_CUDA:  # a cubin: every function in it is device code
                mangled |= found
            else:
                mangled |= kernel_stubs(found) | registered(data, found)
                imported |= elf_functions(data, imported=True) or set()
    readable = demangled(sorted(mangled | imported))  # one c++filt run for both
    names = {qualified_name(readable[n]) for n in mangled} - {""}
    imports = aten_imports({n: readable[n] for n in imported})
    return KernelIdentity(built=frozenset(names), binaries=binaries, aten_imports=imports)


def aten_imports(imported: dict[str, str], operators: frozenset[str] | None = None) -> frozenset[str]:
    """Of a host binary's imported symbols (raw name -> demangled), those that run ATen's kernels
    out of the profiler's sight or look functions up at run time (:data:`RUNTIME_LOOKUP`), their
    parameters left out. A kernel is a function of :data:`ATEN_KERNEL_NAMESPACES` named after an
    ATen operator (``at::cpu::clamp_min``, ``at::native::gelu_out``; `operators`: the
    dispatcher's, :func:`aten_operators`), or an operator's ``at::_ops::<op>::redispatch``; the
    helpers that live there too (``at::cpu::is_avx512_vnni_supported``,
    ``at::cuda::getCurrentCUDAStream``) are none."""
    known = aten_operators() if operators is None else operators
    out = set()
    for raw, full in imported.items():
        base = full.split("(", 1)[0].strip()
        plain = raw.split("@", 1)[0]
        if plain in RUNTIME_LOOKUP:
            out.add(plain)
        elif base.startswith(ATEN_KERNEL_NAMESPACES):
            operator = _operator_of(base.rsplit("::", 1)[-1], known)
            if operator is not None and operator not in _NO_COMPUTE:
                out.add(base)
        elif base.startswith("at::_ops::") and base.endswith("::redispatch"):
            out.add(base)
    return frozenset(out)


# What an ATen kernel's function adds to its operator's name (at::native::gelu_out_cpu,
# at::cpu::clamp_min_outf, at::native::structured_gelu_out::impl is a method: never imported bare).
_KERNEL_SUFFIXES = ("_symint", "_outf", "_out", "_cpu", "_cuda", "_mps", "_kernel", "_impl", "_")


# Operators that only allocate, fill or copy: an extension calling their kernels directly does
# no computation of ATen's (measure/accounting.py, BOOKKEEPING_OPS, for those the profiler sees).
_NO_COMPUTE = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "resize",
        "resize_",
        "zeros",
        "zeros_like",
        "zero",
        "zero_",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "fill",
        "fill_",
        "copy",
        "copy_",
        "clone",
        "contiguous",
    }
)


def _operator_of(name: str, operators: frozenset[str]) -> str | None:
    """The ATen operator `name` (a function's last name) is a kernel of, its kernel suffixes
    taken off (``gelu_out_cpu``: ``gelu``); None where it is no operator's."""
    seen = {name}
    todo = [name]
    while todo:
        n = todo.pop(0)
        if n in operators:
            return n
        for suffix in _KERNEL_SUFFIXES:
            if n.endswith(suffix) and len(n) > len(suffix) and n[: -len(suffix)] not in seen:
                seen.add(n[: -len(suffix)])
                todo.append(n[: -len(suffix)])
    return None


def aten_operators() -> frozenset[str]:
    """The ATen operators' names the dispatcher knows, without namespace or overload
    (``clamp_min``, ``gelu``), read once from this process's torch."""
    global _OPERATORS
    if _OPERATORS is None:
        import torch

        try:
            names = torch._C._dispatch_get_all_op_names()
        except Exception:  # noqa: BLE001 - a torch without it: the schemas the JIT registered
            names = [str(s.name) for s in torch._C._jit_get_all_schemas()]
        _OPERATORS = frozenset(n.split("::", 1)[1].split(".", 1)[0] for n in names if n.startswith("aten::"))
    return _OPERATORS


_OPERATORS: frozenset[str] | None = None


def elf_functions(data: bytes, imported: bool = False) -> set[str] | None:
    """The defined function symbols of a 64-bit little-endian ELF file (None: not one). Both symbol
    tables are read: an extension's ``__global__`` host stubs are local symbols of ``.symtab``.
    `imported`: the undefined ones instead, the functions it calls from other libraries (their
    type is a function's or none, as a linker leaves an import it never resolved)."""
    if len(data) < 64 or data[:4] != _ELF_MAGIC or data[4] != 2 or data[5] != 1:
        return None
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names: set[str] = set()
        for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
            if kind not in _SYMBOL_TABLES or not entsize or link >= len(sections):
                continue
            str_off, str_size = sections[link][4], sections[link][5]
            strings = data[str_off : str_off + str_size]
            for at in range(offset, offset + size - entsize + 1, entsize):
                st_name, st_info, _other, st_shndx = struct.unpack_from("<IBBH", data, at)
                if not st_name:
                    continue
                if imported and (st_shndx != 0 or st_info & 0xF not in (_FUNCTION, _NOTYPE)):
                    continue
                if not imported and (st_info & 0xF != _FUNCTION or st_shndx == 0):
                    continue
                end = strings.find(b"\0", st_name)
                names.add(strings[st_name : end if end >= 0 else None].decode("utf-8", "replace"))
        return names
    except struct.error:
        return None


def elf_machine(data: bytes) -> int:
    """The ``e_machine`` of an ELF file (190 for a cubin)."""
    return struct.unpack_from("<H", data, 0x12)[0] if len(data) >= 0x14 else 0


def kernel_stubs(functions: set[str]) -> set[str]:
    """The mangled names of the ``__global__`` functions of a host binary: its nvcc stubs'.

    nvcc names a kernel's stub ``__device_stub_`` and the kernel's mangled name, and mangles the
    stub itself as a C++ function (``_Z41__device_stub__Z17scale_relu_kernelPKfPfxPKfPfx``, nvcc
    13; ``L`` before the length for a static one): the kernel's name is read from the stub's
    identifier. An ``extern "C"`` kernel's stub carries its signature's mangling, which demangles to
    the plain name."""
    out: set[str] = set()
    for f in functions:
        if f.startswith(_STUB + "_Z"):  # a stub left unmangled
            out.add(f[len(_STUB) :])
            continue
        m = _MANGLED_IDENTIFIER.match(f)
        if m is None:
            continue
        ident = f[m.end() : m.end() + int(m.group(1))]
        if ident.startswith(_STUB + "_Z"):
            out.add(ident[len(_STUB) :])
    return out


def registered(data: bytes, functions: set[str]) -> set[str]:
    """The host functions of a binary whose names it also holds as a string of its read-only data:
    nvcc registers every ``__global__`` function with the CUDA runtime by its device name, a string
    in ``.rodata``, beside the host function that stands for it (``__cudaRegisterFunction``). A
    template kernel's stub is inlined into its launch at ``-O3`` and leaves no symbol of its own;
    its registration and its host function stay. A host function whose name is no such string is no
    kernel (a host function named as a cuBLAS kernel claims nothing)."""
    rodata = b"".join(_read_only_data(data))
    if not rodata:
        return set()
    # C++ names only: an ``extern "C"`` kernel keeps its stub (only templates lose theirs), while the
    # CUDA runtime linked into the binary holds its own C functions' names as strings
    return {f for f in functions if f.startswith("_Z") and b"\0" + f.encode() + b"\0" in rodata}


def _read_only_data(data: bytes) -> list[bytes]:
    """The contents of an ELF file's allocated, non-executable, non-writable PROGBITS sections
    (``.rodata`` and its kind): where string literals live, never its symbol or string tables."""
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        out = []
        for i in range(shnum):
            _name, kind, flags, _addr, offset, size, *_rest = struct.unpack_from(
                "<IIQQQQIIQQ", data, shoff + i * shentsize
            )
            if kind == _PROGBITS and flags & _SHF_ALLOC and not flags & (_SHF_WRITE | _SHF_EXECINSTR):
                out.append(b"\0" + data[offset : offset + size] + b"\0")
        return out
    except struct.error:
        return []


def demangled(names: list[str]) -> dict[str, str]:
    """Each Itanium-mangled name demangled by c++filt (binutils, beside every compiler that built
    it); a name that is not mangled, or where c++filt is missing, stays as it is."""
    out = {n: n for n in names}
    todo = [n for n in names if n.startswith("_Z")]
    tool = shutil.which("c++filt")
    if not todo or tool is None:
        return out
    try:
        done = subprocess.run(
            [tool], input="\n".join(todo) + "\n", capture_output=True, text=True, timeout=60, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return out
    if len(done) == len(todo):
        out.update(zip(todo, done, strict=True))
    return out
