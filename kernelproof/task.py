"""Task loading: KernelBench files as-is, plus the optional ``KERNELPROOF`` metadata dict.

A task is trusted code (the user's reference), so it runs in the parent; it never runs in a
candidate's worker (I2: the reference's answers must not exist there). Each shape variant is
made by rewriting the module-level assignments of the overridden constants before the module
runs, so constants derived from them (``M = N // 2``) follow, and every variant gets its own
module namespace, as KernelBench tasks read their globals at call time.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import hashlib
import linecache
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelproof import pyast
from kernelproof.errors import TaskError

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
POLICIES = ("strict", "library-ok")
MODES = ("train", "eval")
DOMAINS = ("any", "positive", "unit", "nonzero", "fixed")
META_KEYS = {
    "variants",
    "timed",
    "cpu",
    "precision",
    "split_precision",
    "domains",
    "flops",
    "bytes",
    "policy",
    "mode",
    "inplace",
}


@dataclass(frozen=True)
class TaskMeta:
    variants: dict[str, dict[str, Any]]  # variant name -> constant overrides ("default": {})
    timed: tuple[str, ...]  # variants timed on a GPU
    cpu: tuple[str, ...]  # variants used on --device cpu
    precision: str = "fp32"  # precision contract
    # where the contract comes from: "declared" (KERNELPROOF), "as written" (the task's own dtypes),
    # "flag" (--precision); "" until kernelproof.verify.contract resolves a task that declares none
    precision_source: str = ""
    # floating inputs, parameters and buffers keep the dtypes the task gives them (a bf16 or fp16
    # task as written) instead of being cast to the contract dtype
    keep_dtypes: bool = False
    split_precision: bool = True  # may fp32 be emulated with lower-precision units
    domains: tuple[str, ...] | str = "any"  # value domain per get_inputs() position
    flops: str | None = None  # expression over the module constants
    bytes: str | None = None  # expression over the module constants; None: inputs+params+outputs
    policy: str = "strict"  # kernel policy
    mode: str = "train"  # module mode the reference runs in
    inplace: tuple[
        int, ...
    ] = ()  # forward() arguments the task updates in place: their new values are outputs too

    def domain_of(self, index: int) -> str:
        if isinstance(self.domains, str):
            return self.domains
        if index < len(self.domains):
            return self.domains[index]
        return "any"


@dataclass(frozen=True)
class Task:
    path: str  # as given
    name: str  # file stem
    source: str  # the file's text
    sha256: str  # of the file's bytes
    meta: TaskMeta
    constants: dict[str, Any] = field(default_factory=dict)  # default module-level constants


@dataclass
class TaskModule:
    """One instantiated variant: a fresh module namespace of the task file."""

    task: Task
    variant: str
    module: types.ModuleType

    @property
    def Model(self) -> type:  # noqa: N802 - the KernelBench name
        return self.module.Model

    def get_inputs(self) -> list[Any]:
        raw = self.module.get_inputs()
        if not isinstance(raw, (list, tuple)):  # a bare tensor would be listed into its rows
            raise TaskError(
                f"get_inputs() returned a {type(raw).__name__}, not a list of forward()'s arguments "
                "(`return [x]`, not `return x`)",
                path=self.task.path,
            )
        return list(raw)

    def get_init_inputs(self) -> list[Any]:
        return list(self.module.get_init_inputs())

    def constants(self) -> dict[str, Any]:
        return _constants_of(vars(self.module))


def load_task(path: str | Path, data: bytes | None = None) -> Task:
    """Read and validate a task file; raises TaskError with the file and line on any problem.

    `data`: the task's bytes as the evaluation read them once (kernelproof/submission.py); `path`
    then only names the task, and is not read."""
    p = Path(path)
    if data is None and not p.is_file():
        raise TaskError("task file not found", path=str(path))
    raw = p.read_bytes() if data is None else data
    source = raw.decode("utf-8", errors="replace")
    digest = hashlib.sha256(raw).hexdigest()
    ns = _exec_source(source, str(p), digest, overrides={})
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if name not in ns:
            hint = (
                "; a Model whose constructor takes no arguments: `def get_init_inputs(): return []`"
                if name == "get_init_inputs"
                else ""
            )
            raise TaskError(
                f"the task defines no `{name}` (a KernelBench task needs Model, get_inputs and "
                f"get_init_inputs{hint})",
                path=str(p),
            )
    meta = _parse_meta(ns.get("KERNELPROOF"), str(p), ns)
    return Task(
        path=str(path), name=p.stem, source=source, sha256=digest, meta=meta, constants=_constants_of(ns)
    )


def instantiate(task: Task, variant: str = "default") -> TaskModule:
    """A fresh module of the task with the variant's overrides applied."""
    if variant not in task.meta.variants:
        raise TaskError(
            f"unknown shape variant {variant!r}; the task has {sorted(task.meta.variants)}", path=task.path
        )
    ns = _exec_source(task.source, task.path, task.sha256, overrides=task.meta.variants[variant])
    module = types.ModuleType(f"kernelproof_task_{task.sha256[:12]}_{variant}")
    module.__dict__.update(ns)
    return TaskModule(task=task, variant=variant, module=module)


def variant_source(task: Task, variant: str) -> str:
    """The task's source with a variant's overrides applied (what a baseline worker runs)."""
    overrides = task.meta.variants.get(variant, {})
    if not overrides:
        return task.source
    return ast.unparse(_apply_overrides(pyast.parse(task.source, filename=task.path), overrides, task.path))


def eval_expr(expr: str, constants: dict[str, Any]) -> float:
    """Evaluate a FLOP/byte expression over the task's constants (trusted task metadata)."""
    import math

    try:
        return float(eval(expr, {"__builtins__": {}, "math": math}, dict(constants)))  # noqa: S307
    except Exception as exc:
        raise TaskError(f"cannot evaluate expression {expr!r}: {type(exc).__name__}: {exc}") from None


AUTO_MIN = 4  # only integer constants at least this large are perturbed (not kernel sizes, strides)


def with_auto_variants(task: Task, base: str, shrink: int = 1) -> tuple[Task, tuple[str, ...]]:
    """Extra shape variants derived from ``base`` by perturbing its integer size constants.

    ``auto_odd`` makes every even size odd (n - 1): tile-multiple assumptions break; ``auto_half``
    takes n // 2 + 1: smaller, rarely a power of two. The caller keeps only those the reference
    accepts (``--shape-variants auto``). ``shrink`` divides the sizes first (those of at least
    ``SHRINK_FLOOR``, never below it; smaller constants are kernel sizes, groups, paddings whose
    relations a division would break): a probe need not be as large as the task's own shape to
    break a kernel that assumes it, and at KernelBench's published sizes each full-size probe cost
    setup a reference, an oracle and an audit of gigabytes.
    """
    consts = dict(task.constants)
    consts.update(task.meta.variants.get(base, {}))
    sizes = {
        k: v for k, v in consts.items() if isinstance(v, int) and not isinstance(v, bool) and v >= AUTO_MIN
    }
    sizes = {k: _shrunk(v, shrink) for k, v in sizes.items() if k in _module_level_assignments(task)}
    if not sizes:
        return task, ()
    extra = {
        "auto_odd": {k: (v - 1 if v % 2 == 0 else v) for k, v in sizes.items()},
        "auto_half": {k: v // 2 + 1 for k, v in sizes.items()},
    }
    variants = dict(task.meta.variants)
    for name, ov in extra.items():
        variants[name] = {**task.meta.variants.get(base, {}), **ov}
    meta = dataclasses.replace(task.meta, variants=variants)
    return dataclasses.replace(task, meta=meta), tuple(extra)


SHRINK_FLOOR = 64


def _shrunk(v: int, shrink: int) -> int:
    return max(SHRINK_FLOOR, v // shrink) if v >= SHRINK_FLOOR else v


def auto_variant_base(task: Task, variants: tuple[str, ...]) -> str:
    """The variant the probed shapes are derived from: the task's first CPU variant among
    ``variants`` (its small shapes), else the first of them."""
    return next((v for v in task.meta.cpu if v in variants), variants[0])


def _module_level_assignments(task: Task) -> set[str]:
    names = set()
    for node in pyast.parse(task.source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names.add(node.targets[0].id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            names.add(node.target.id)
    return names


def variants_for(task: Task, device_type: str) -> tuple[str, ...]:
    """The variants checked for correctness on this device type."""
    if device_type == "cpu":
        return task.meta.cpu
    names = list(task.meta.timed)
    for name in task.meta.variants:
        if name not in names and name != "default":
            names.append(name)
    return tuple(names)


def _exec_source(source: str, path: str, digest: str, overrides: dict[str, Any]) -> dict[str, Any]:
    try:
        tree = pyast.parse(source, filename=path)
    except SyntaxError as exc:
        raise TaskError(f"syntax error: {exc.msg}", path=path, line=exc.lineno) from None
    if overrides:
        tree = _apply_overrides(tree, overrides, path)
    # A unique filename per content keeps linecache (and so tracebacks) pointing at the right text.
    code = pyast.compile_code(tree, path, "exec")
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    ns: dict[str, Any] = {"__name__": f"kernelproof_task_{digest[:12]}", "__file__": path}
    try:
        exec(code, ns)  # noqa: S102 - the task is the user's trusted reference
    except Exception as exc:
        raise TaskError(
            f"the task raised while loading: {type(exc).__name__}: {exc}", path=path, line=_line_in(exc, path)
        ) from None
    return ns


def _apply_overrides(tree: ast.Module, overrides: dict[str, Any], path: str) -> ast.Module:
    tree = copy.deepcopy(tree)
    seen: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        hit = [n for n in names if n in overrides]
        if hit and len(targets) == 1:
            node.value = pyast.parse(repr(overrides[hit[0]]), mode="eval").body
            seen.add(hit[0])
    missing = set(overrides) - seen
    if missing:
        raise TaskError(
            f"shape variant overrides {sorted(missing)}, which the task does not assign at module level",
            path=path,
        )
    return ast.fix_missing_locations(tree)


def _parse_meta(raw: Any, path: str, ns: dict[str, Any]) -> TaskMeta:
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise TaskError("KERNELPROOF must be a dict", path=path)
    unknown = set(raw) - META_KEYS
    if unknown:
        raise TaskError(f"unknown KERNELPROOF keys {sorted(unknown)}; known: {sorted(META_KEYS)}", path=path)
    variants = {"default": {}}
    for name, ov in dict(raw.get("variants", {})).items():
        if not isinstance(ov, dict):
            raise TaskError(f"variant {name!r} must map constant names to values", path=path)
        variants[str(name)] = dict(ov)
    timed = tuple(raw.get("timed", ("default",)))
    cpu_default = tuple(n for n in variants if n != "default") or ("default",)
    cpu = tuple(raw.get("cpu", cpu_default))
    for name in timed + cpu:
        if name not in variants:
            raise TaskError(f"KERNELPROOF names variant {name!r}, which is not defined", path=path)
    precision = raw.get("precision", "fp32")
    if precision not in PRECISIONS:
        raise TaskError(f"precision {precision!r} is not one of {PRECISIONS}", path=path)
    policy = raw.get("policy", "strict")
    if policy not in POLICIES:
        raise TaskError(f"policy {policy!r} is not one of {POLICIES}", path=path)
    mode = raw.get("mode", "train")
    if mode not in MODES:
        raise TaskError(f"mode {mode!r} is not one of {MODES}", path=path)
    domains = raw.get("domains", "any")
    dlist = [domains] if isinstance(domains, str) else list(domains)
    for d in dlist:
        if d not in DOMAINS:
            raise TaskError(f"value domain {d!r} is not one of {DOMAINS}", path=path)
    inplace = raw.get("inplace", ())
    if not isinstance(inplace, (list, tuple)) or not all(type(i) is int and i >= 0 for i in inplace):
        raise TaskError(f"inplace must list forward() argument positions, got {inplace!r}", path=path)
    consts = _constants_of(ns)
    for key in ("flops", "bytes"):
        if raw.get(key) is not None:
            eval_expr(str(raw[key]), consts)  # fail early, with the expression named
    return TaskMeta(
        variants=variants,
        timed=timed,
        cpu=cpu,
        precision=precision,
        precision_source="declared" if "precision" in raw else "",
        split_precision=bool(raw.get("split_precision", True)),
        domains=domains if isinstance(domains, str) else tuple(domains),
        flops=None if raw.get("flops") is None else str(raw["flops"]),
        bytes=None if raw.get("bytes") is None else str(raw["bytes"]),
        policy=policy,
        mode=mode,
        inplace=tuple(dict.fromkeys(inplace)),
    )


def _constants_of(ns: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in ns.items():
        if k.startswith("_") or k == "KERNELPROOF":
            continue
        if isinstance(v, bool) or isinstance(v, (int, float)):
            out[k] = v
        elif isinstance(v, tuple) and all(isinstance(x, (int, float)) for x in v):
            out[k] = v
    return out


def _line_in(exc: BaseException, path: str) -> int | None:
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == path:
            line = frame.lineno
    return line


def where_in(exc: BaseException, path: str) -> str:
    """'path:line' of the deepest frame of ``exc`` inside ``path`` (for messages that point at the cause)."""
    line = _line_in(exc, path)
    return f"{path}:{line}" if line else path
