"""Solution reading and static triage: the backend, the kernels it defines, constructs worth a flag.

Triage reads the AST and never runs the code. It only flags, with line numbers: obfuscation
defeats any static reading (exploits.md D6), so the decisions belong to the runtime guards, the
comparison and launch accounting. One finding is also acted on: a literal compiler flag the build
allowlist refuses (``refused_flag``, kernelproof.compiler_flags) fails the build in the trusted
parent before any builder starts, and the builder checks the flags it is actually given again. Its findings go into the verdict's flags so a person or an agent
sees them, and the Triton kernels its code defines feed launch accounting (which kernels are the
submission's own; a CUDA kernel is the submission's by the symbols of what the parent built).
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelproof import pyast
from kernelproof.compiler_flags import literal_notes, literal_refusals
from kernelproof.errors import UsageError

# Modules whose import by a solution is flagged (the audit hook forbids their use at run time).
FLAGGED_MODULES = {
    "ctypes": "loads native code outside the build path",
    "cffi": "loads native code outside the build path",
    "gc": "walks the harness's objects",
    "inspect": "walks frames",
    "threading": "starts threads",
    "_thread": "starts threads",
    "multiprocessing": "starts processes",
    "subprocess": "starts processes",
    "concurrent": "starts threads or processes",
    "socket": "opens network connections",
    "importlib": "imports by name (hides what runs)",
    "pickle": "deserialises code",
    "marshal": "deserialises code",
    "signal": "installs signal handlers",
    "os": "reaches the file system and processes",
    "sys": "reaches interpreter internals",
    "time": "can patch timers",
}
FLAGGED_CALLS = {"exec", "eval", "compile", "__import__", "globals", "setattr", "delattr", "breakpoint"}
TIMER_TARGETS = re.compile(
    r"^(torch\.cuda\.(Event|synchronize|Stream|current_stream|elapsed_time)|time\.\w+|torch\.(allclose|equal|testing\..*)|"
    r"torch\.Tensor\.\w+|torch\.nn\.functional\.\w+|torch\.\w+|triton\.testing\.\w+)"
)


@dataclass(frozen=True)
class Finding:
    line: int  # 1-based line in the solution
    kind: str  # short tag: forbidden_import, forbidden_call, monkeypatch, subclass_tensor, refused_flag, ...
    message: str

    def render(self) -> str:
        return f"line {self.line}: {self.kind}: {self.message}"


@dataclass(frozen=True)
class Triage:
    backend: str  # triton | cuda | native | torch
    # The Triton kernels the solution's code defines (``@triton.jit`` functions, from the syntax tree:
    # a comment or a string names nothing). Launch accounting attributes a Triton kernel by this
    # name, and a CUDA kernel by the symbols of the binaries the parent built for the solution,
    # never by text (kernelproof/measure/attribution.py).
    kernel_names: tuple[str, ...]
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    syntax_error: str = ""  # "line N: message" when the file does not parse


@dataclass(frozen=True)
class SolutionFile:
    path: str
    source: str
    sha256: str
    triage: Triage
    # The bytes read, which the hash names: what is built and staged into the worker, never the
    # path read again (kernelproof/submission.py).
    data: bytes = field(default=b"", repr=False)


def read_solution(path: str) -> SolutionFile:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"solution file not found: {path}")
    return solution_of(str(path), p.read_bytes())


def solution_of(path: str, raw: bytes) -> SolutionFile:
    """The solution whose bytes were read once (`path` names it, and is not read)."""
    source = raw.decode("utf-8", errors="replace")
    return SolutionFile(str(path), source, hashlib.sha256(raw).hexdigest(), triage(source), raw)


def triage(source: str) -> Triage:
    try:
        tree = pyast.parse(source)
    except SyntaxError as exc:
        return Triage("unknown", (), (), f"line {exc.lineno}: {exc.msg}")
    findings: list[Finding] = []
    triton_kernels: list[str] = []
    uses_load_inline = False
    uses_native = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for n in names:
                root = n.split(".")[0]
                if root in FLAGGED_MODULES and root not in ("os", "sys", "time"):
                    findings.append(
                        Finding(node.lineno, "forbidden_import", f"imports {n}: {FLAGGED_MODULES[root]}")
                    )
                if n.startswith("kernelproof.native") or (
                    root == "kernelproof" and "native" in [a.name for a in node.names]
                ):
                    uses_native = True
                if isinstance(node, ast.ImportFrom) and node.module == "torch.utils.cpp_extension":
                    if any(a.name in ("load", "load_inline") for a in node.names):
                        uses_load_inline = True  # a build called anywhere, under any local name
                if isinstance(node, ast.ImportFrom) and node.module and "torch.library" in node.module:
                    findings.append(
                        Finding(node.lineno, "torch_library", "imports torch.library (operator overrides)")
                    )
        elif isinstance(node, ast.Call):
            fname = _dotted(node.func)
            if fname in FLAGGED_CALLS:
                findings.append(Finding(node.lineno, "forbidden_call", f"calls {fname}()"))
            if fname.endswith("load_inline") or fname.endswith("cpp_extension.load"):
                uses_load_inline = True
            if fname.endswith("load_cuda") and "native" in fname:
                uses_native = True
            if fname in ("sys._getframe", "os._exit", "sys.exit", "os.system", "os.fork") or fname.startswith(
                "torch.library."
            ):
                findings.append(Finding(node.lineno, "forbidden_call", f"calls {fname}()"))
            if fname.endswith("_make_subclass") or fname.endswith("_dispatch_library"):
                findings.append(Finding(node.lineno, "forbidden_call", f"calls {fname}()"))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = _dotted(t)
                if name and "." in name and TIMER_TARGETS.match(name):
                    findings.append(Finding(node.lineno, "monkeypatch", f"assigns to {name}"))
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                b = _dotted(base)
                if b in ("torch.Tensor", "Tensor"):
                    findings.append(
                        Finding(node.lineno, "subclass_tensor", f"class {node.name} subclasses torch.Tensor")
                    )
                if b == "Model" or b.endswith(".Model"):
                    findings.append(
                        Finding(
                            node.lineno,
                            "subclass_reference",
                            f"class {node.name} subclasses the reference Model",
                        )
                    )
        elif isinstance(node, ast.Try):
            findings.append(Finding(node.lineno, "try_except", "try/except can hide a fallback to PyTorch"))
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                d = _dotted(dec.func if isinstance(dec, ast.Call) else dec)
                if d in ("triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics"):
                    if d.endswith("jit"):
                        triton_kernels.append(node.name)
    findings += [
        Finding(r.line, "refused_flag", r.message().removeprefix(f"line {r.line}: "))
        for r in literal_refusals(source)
    ]
    findings += [Finding(n.line, "foreign_gpu_target", n.message()) for n in literal_notes(source)]
    if uses_native:
        backend = "native"
    elif uses_load_inline:
        backend = "cuda"
    elif triton_kernels:
        backend = "triton"
    else:
        backend = "torch"
    return Triage(backend, tuple(dict.fromkeys(triton_kernels)), tuple(findings))


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    return ""
