"""Loading the program a worker runs: the candidate's ModelNew, or the task's Model as a baseline.

Compile and construction errors come back as values with the solution's own line numbers and the
compiler's relevant lines, because they are the feedback an agent needs (docs/architecture.md, house rule 5).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelproof.verdict import ReasonCode

MAX_DETAIL_CHARS = 4000  # compiler output kept in a verdict: the head of the errors, not a wall
_manual_seed = torch.manual_seed  # bound at import, before any solution's code runs


@dataclass
class LoadFailure:
    code: ReasonCode  # why it failed
    message: str  # one sentence
    detail: str = ""  # evidence: line, compiler lines
    memory_excluded: bool = False  # a runtime error of a class no lack of device memory takes


CHAIN_LIMIT = 8  # exceptions followed through __cause__/__context__ (a cycle, an endless chain end there)


def raised_chain(exc: BaseException) -> list[BaseException | None]:
    """The exception, the one it was raised from or while handling, and so on: ``CHAIN_LIMIT`` at
    most, with None last where the chain went on beyond them (no class test holds for None)."""
    chain: list[BaseException | None] = []
    while exc is not None and len(chain) < CHAIN_LIMIT:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain if exc is None else [*chain, None]


def is_build_failure(exc: BaseException) -> bool:
    """A build the worker asked the parent for failed or was refused (kernelproof.build.inline), the
    exception itself or the one it was raised from (a solution re-raising it in its own words)."""
    from kernelproof.errors import BuildRequestError

    return any(isinstance(e, BuildRequestError) for e in raised_chain(exc))


# Triton's JIT compiles a kernel at its first launch, inside the solution's forward: a kernel it
# cannot compile raises one of these classes (or a subclass: a failed static_assert, an unsupported
# construct), its front end's or ptxas's. (module, class name), looked up among the modules loaded:
# an exception of Triton's comes only once Triton is imported, and the worker never imports it.
TRITON_COMPILE_FAILURES = (
    ("triton.compiler.errors", "CompilationError"),
    ("triton.runtime.errors", "PTXASError"),
)
# A launch that asks an SM for more shared memory or registers than it has: the kernel's
# configuration, never a lack of device (global) memory.
TRITON_NEVER_MEMORY = (("triton.runtime.errors", "OutOfResources"),)


def _loaded_classes(names: tuple[tuple[str, str], ...]) -> tuple[type, ...]:
    """The exception classes `names` are, where their modules are loaded: the classes themselves,
    so that identity decides, never a class's name (a solution's own class may claim any)."""
    found = []
    for module_name, class_name in names:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found)


def is_kernel_compile_failure(exc: BaseException) -> bool:
    """A Triton kernel its JIT could not compile at launch, the exception itself or the one it was
    raised from. The solution's own compile error, not a runtime one: no lack of device memory takes
    this form, so a large task's evaluation is neither blamed on the device's size (``too_large``)
    nor re-run alone for it (kernelproof/evaluate/memory_blame.py). The real class (``type()``,
    never ``__class__``) against Triton's own classes."""
    failures = _loaded_classes(TRITON_COMPILE_FAILURES)
    return bool(failures) and any(issubclass(type(e), failures) for e in raised_chain(exc))


# Exceptions no lack of device memory takes: a solution's bugs (a wrong argument, index, name or
# shape check; Triton's ``TRITON_NEVER_MEMORY``). torch, Triton, CuPy and CUDA extensions report an allocation that failed as a
# RuntimeError (torch.OutOfMemoryError among them) or a MemoryError; numba's CudaAPIError is a
# plain Exception subclass: none of these is listed, so each stays memory-shaped.
NEVER_MEMORY = (
    TypeError,
    NameError,
    AttributeError,
    LookupError,
    ValueError,
    AssertionError,
    ArithmeticError,
    SyntaxError,
    ImportError,
)


def never_memory(exc: BaseException) -> bool:
    """Is this exception, and every one it was raised from or while handling, of a class no lack of
    device memory takes (``NEVER_MEMORY``, by the real class through ``type()``)? A ValueError raised
    while handling an out-of-memory RuntimeError is not. The parent's memory blame then leaves the
    failure the solution's, on any device (kernelproof/evaluate/memory_blame.py): a solution that
    misnames its own exception only keeps its own failure."""
    never = NEVER_MEMORY + _loaded_classes(TRITON_NEVER_MEMORY)
    return all(issubclass(type(e), never) for e in raised_chain(exc))


def import_file(path: str, module_name: str) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def type_name(obj: object) -> str:
    """The name of ``obj``'s class, read from the class's own slot (a metaclass cannot answer it)."""
    try:
        return str(type.__dict__["__name__"].__get__(type(obj)))[:100]
    except Exception:  # noqa: BLE001
        return "an exception"


def describe_exception(exc: BaseException, path: str) -> tuple[str, str]:
    """(message, detail) for an exception raised by code in ``path``: where, what, and the key lines."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    where = f" at line {frames[-1].lineno} (`{(frames[-1].line or '').strip()}`)" if frames else ""
    if isinstance(exc, SyntaxError) and exc.filename == path:
        where = f" at line {exc.lineno}"
    text = str(exc)
    head = f"{type(exc).__name__}{where}: {_first_line(text)}"
    detail = _compiler_excerpt(text) if len(text) > 200 else text
    if frames:
        detail = "".join(traceback.format_list(frames[-3:])) + detail
    return head, detail[:MAX_DETAIL_CHARS]


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _compiler_excerpt(text: str) -> str:
    """The lines of a build log that say what went wrong (errors and the lines around them)."""
    lines = text.splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        if re.search(r"\berror\b|error:|undefined reference|fatal", line, re.IGNORECASE):
            keep.extend(lines[max(0, i - 1) : i + 3])
    if not keep:
        keep = lines[:20] + (["..."] if len(lines) > 40 else []) + lines[-20:]
    out, seen = [], set()
    for line in keep:
        if line not in seen:
            out.append(line)
            seen.add(line)
    return "\n".join(out)


def load_candidate(
    path: str,
    init_args: list[Any],
    imported: dict[tuple[str, str], Any] | None = None,
    device: torch.device | None = None,
    init_seed: int = 0,
) -> tuple[torch.nn.Module | None, LoadFailure | None]:
    """The candidate's ModelNew built with ``init_args``, or why it could not be: describing an
    exception of the solution's that cannot be described is a failure of its own.

    ``imported``: the worker's modules by (path, sha256 of the file's bytes). The solution's file is
    imported once per worker and its ModelNew built again for each shape variant: its module-level
    code runs once, as in any program. Imported once per variant, a solution that registers an
    operator at module level (``torch.library.Library(ns, "DEF")``, ``@torch.library.impl``, a
    legitimate pattern) met its own registration at the second import and failed as
    ``compile_error``. ``device``, ``init_seed``: where and under which seed ModelNew is built
    (:func:`construct`)."""
    try:
        return _load_candidate(path, init_args, {} if imported is None else imported, device, init_seed)
    except BaseException as exc:  # noqa: BLE001 - raised while describing the solution's exception
        return None, LoadFailure(
            ReasonCode.COMPILE_ERROR,
            f"the solution failed to load, and describing why raised {type_name(exc)}",
        )


def _load_candidate(
    path: str,
    init_args: list[Any],
    imported: dict[tuple[str, str], Any],
    device: torch.device | None,
    init_seed: int,
) -> tuple[torch.nn.Module | None, LoadFailure | None]:
    try:
        key = (path, hashlib.sha256(Path(path).read_bytes()).hexdigest())
        module = imported.get(key)
        if module is None:
            module = import_file(path, "kernelproof_solution")
            imported[key] = module
    except SystemExit:
        return None, LoadFailure(ReasonCode.FORBIDDEN_CONSTRUCT, "the solution called sys.exit while loading")
    except ModuleNotFoundError as exc:
        msg, detail = describe_exception(exc, path)
        return None, LoadFailure(
            ReasonCode.COMPILE_ERROR,
            f"the solution failed to load: {msg}. A solution is one file: modules next to it are not "
            "on the import path (only installed packages are)",
            detail,
        )
    except BaseException as exc:  # noqa: BLE001 - every failure of untrusted code becomes a verdict
        msg, detail = describe_exception(exc, path)
        if is_build_failure(exc):
            return None, LoadFailure(ReasonCode.COMPILE_ERROR, f"the solution failed to load: {exc}", detail)
        return None, LoadFailure(ReasonCode.COMPILE_ERROR, f"the solution failed to load: {msg}", detail)
    cls = getattr(module, "ModelNew", None)
    if cls is None or not isinstance(cls, type):
        return None, LoadFailure(
            ReasonCode.COMPILE_ERROR,
            "the solution defines no class `ModelNew` (KernelBench's required entry point)",
        )
    if not issubclass(cls, torch.nn.Module):
        return None, LoadFailure(ReasonCode.COMPILE_ERROR, "`ModelNew` is not a torch.nn.Module subclass")
    try:
        return construct(cls, init_args, device, init_seed), None
    except SystemExit:
        return None, LoadFailure(
            ReasonCode.FORBIDDEN_CONSTRUCT, "the solution called sys.exit in its constructor"
        )
    except BaseException as exc:  # noqa: BLE001
        msg, detail = describe_exception(exc, path)
        if is_build_failure(exc):
            return None, LoadFailure(ReasonCode.COMPILE_ERROR, f"constructing ModelNew: {exc}", detail)
        return None, LoadFailure(
            ReasonCode.RUNTIME_ERROR, f"constructing ModelNew raised {msg}", detail, never_memory(exc)
        )


def construct(cls: Any, init_args: list[Any], device: torch.device | None, init_seed: int) -> Any:
    """``cls(*init_args)`` under `init_seed`. On a GPU it is built first with the device as torch's
    default, as the parent builds the task's reference (kernelproof/verify/case_plan.py): the
    parameters the parent gives it replace their initial values, and a Linear of 32768 x 32768
    took 10-20 s of the CPU's generator at each of a candidate's loads for KernelBench
    level2/59_Matmul_Swish_Scaling (on an H100, four evaluations in flight: its correctness load,
    then its timing load). Whatever fails there (numpy, a CPU generator, a CPU-only op, a device
    the constructor names) is built again as written, on the CPU, under the same seed: the CPU
    decides whether construction fails, as it does in KernelBench's own evaluation."""
    if device is not None and device.type == "cuda":
        _manual_seed(init_seed)
        try:
            with torch.device(device):
                return cls(*init_args)
        except Exception:  # noqa: BLE001 - built again as written, where it decides whether it fails
            pass
    _manual_seed(init_seed)
    return cls(*init_args)


def load_reference(
    path: str,
    init_args: list[Any],
    overrides_source: str | None,
    device: torch.device | None = None,
    init_seed: int = 0,
) -> torch.nn.Module:
    """The task's Model for a baseline worker (trusted code; the task variant's source is given),
    built as :func:`construct` builds a candidate: the parent's weights replace its own."""
    ns: dict[str, Any] = {"__name__": "kernelproof_baseline_task", "__file__": path}
    code = compile(overrides_source if overrides_source is not None else open(path).read(), path, "exec")
    exec(code, ns)  # noqa: S102 - the task is the user's reference
    return construct(ns["Model"], init_args, device, init_seed)


def prepare(module: torch.nn.Module, device: torch.device, dtype: torch.dtype | None, mode: str) -> None:
    """Move to the device, cast floating parameters and buffers to `dtype` (None: a task judged in
    its own dtypes, whose Model keeps those it makes), set train/eval mode."""
    module.to(device)
    for p in list(module.parameters()) + list(module.buffers()):
        if dtype is not None and p.is_floating_point() and p.dtype != dtype:
            p.data = p.data.to(dtype)
    module.train(mode == "train")


def copy_weights(module: torch.nn.Module, names: list[str], tensors: list[torch.Tensor]) -> str:
    """Give the candidate the reference's parameter and buffer values: by name, else by order.

    Through ``load_state_dict(strict=False)``, not copies into the tensors: the module's own
    ``_load_from_state_dict`` and its load hooks run, so a solution that derives buffers from its
    parameters (BatchNorm folded into a scale and shift, pre-packed weights) recomputes them from
    the weights it is given (docs/tasks.md). Each value arrives in the candidate's own dtype and
    device. Returns how it was done: "by_name", "by_order", "none" (nothing to copy) or "not_copied".
    """
    if not names:
        return "none"
    state = module.state_dict()
    src = dict(zip(names, tensors))
    if set(src) <= set(state) and all(state[k].shape == v.shape for k, v in src.items()):
        _load(module, {k: v.to(device=state[k].device, dtype=state[k].dtype) for k, v in src.items()})
        return "by_name"
    own = [(k, t) for k, t in state.items() if t.is_floating_point()]
    ref = [(k, t) for k, t in src.items() if t.is_floating_point()]
    if len(own) == len(ref) and all(a.shape == b.shape for (_, a), (_, b) in zip(own, ref)):
        _load(module, {k: b.to(device=a.device, dtype=a.dtype) for (k, a), (_, b) in zip(own, ref)})
        return "by_order"
    return "not_copied"


def _load(module: torch.nn.Module, values: dict[str, torch.Tensor]) -> None:
    """load_state_dict(strict=False) of `values`, every one of which the module holds."""
    with torch.no_grad():
        module.load_state_dict(values, strict=False)


def unmatched_state(module: torch.nn.Module, names: list[str], limit: int = 16) -> list[str]:
    """Floating-point entries of the candidate's state_dict that the reference has no value for (its
    own derived buffers): named in a mismatch's message, since the harness's weights never reach them."""
    try:
        own = list(module.named_parameters()) + list(module.named_buffers())  # non-persistent ones too
    except Exception:  # noqa: BLE001 - the solution's module; only a hint depends on it
        return []
    given = set(names)
    return [k[:200] for k, t in own if k not in given and t.is_floating_point()][:limit]


def copy_attributes(module: torch.nn.Module, names: list[str], tensors: list[torch.Tensor]) -> int:
    """Give the candidate the reference's plain tensor attributes (an RNN's ``h0``), by dotted name.

    The state_dict holds parameters and buffers only: an attribute the candidate draws itself in
    another order (torch.randn in its constructor) would otherwise differ from the reference's.
    Only an attribute the candidate has at the same name, as a tensor of the same shape, is
    overwritten (in its own dtype and device). Returns how many were.
    """
    copied = 0
    with torch.no_grad():
        for name, value in zip(names, tensors):
            owner_path, _, attr = name.rpartition(".")
            try:
                owner = module.get_submodule(owner_path) if owner_path else module
            except AttributeError:
                continue
            current = owner.__dict__.get(attr)
            if isinstance(current, torch.Tensor) and not isinstance(current, torch.nn.Parameter):
                if tuple(current.shape) == tuple(value.shape):
                    owner.__dict__[attr] = value.to(device=current.device, dtype=current.dtype).clone()
                    copied += 1
    return copied
