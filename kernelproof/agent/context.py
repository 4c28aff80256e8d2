"""What every prompt says about the problem: the task (source, contract, policy) and the device.

The task is read as text and its ``KERNELPROOF`` dict with ``ast.literal_eval``. Its precision
contract is the evaluator's own (:func:`kernelproof.verify.contract.judged`): a declared precision
as declared, ``--precision`` over it, and a task that declares none in the dtypes it is written in
(a bf16 task is a bf16 task), read as the evaluator reads them, by loading the task. The device is described from
the CUDA driver's properties and its ceilings: measured ones (what a good kernel can reach) from a
file given by the user or shipped in ``kernelproof.data``, else datasheet peaks.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelproof import pyast
from kernelproof.agent.agent_errors import ConfigError
from kernelproof.errors import TaskError

# Dense datasheet peaks (no sparsity) per device name fragment, from NVIDIA's product datasheets:
# (TFLOP/s by dtype, HBM TB/s). Ordered: the first fragment found in the device name wins.
DATASHEET: tuple[tuple[str, dict[str, float], float], ...] = (
    ("H200", {"fp64": 67, "fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979}, 4.8),
    ("H100 PCIe", {"fp64": 51, "fp32": 51, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513}, 2.0),
    ("H100", {"fp64": 67, "fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979}, 3.35),
    ("A100", {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}, 2.039),
    ("L40S", {"fp32": 91.6, "tf32": 183, "bf16": 362, "fp16": 362, "fp8": 733}, 0.864),
)

PRECISIONS = {
    "fp32": "float32 tensors; results must be as accurate as IEEE fp32 arithmetic (plain TF32, bf16 or fp16 "
    "arithmetic fails as precision_downgrade)",
    "tf32": "float32 tensors; TF32 tensor-core arithmetic is allowed, bf16/fp16 is not",
    "bf16": "bfloat16 tensors; bf16 arithmetic with fp32 accumulation is the bar",
    "fp16": "float16 tensors; fp16 arithmetic with fp32 accumulation is the bar",
}
POLICIES = {
    "strict": "all GPU time of a call should be in kernels your file defines; ATen, cuBLAS and cuDNN "
    "kernels count against coverage",
    "library-ok": "library GEMMs and convolutions may stay; elementwise and reduction work should be "
    "in your own kernels",
}


@dataclass(frozen=True)
class TaskInfo:
    path: str  # absolute path of the task file
    name: str  # file stem
    source: str  # the file's text, shown verbatim in prompts
    sha256: str  # of the file's bytes: a resumed run must be on the same task
    precision: str = "fp32"  # precision contract
    split_precision: bool = True  # may fp32 be emulated with lower-precision units (3xTF32)
    policy: str = "strict"  # kernel policy
    mode: str = "train"  # module mode the reference runs in


@dataclass(frozen=True)
class DeviceInfo:
    name: str  # "NVIDIA H200" | "CPU"
    kind: str  # "cuda" | "cpu"
    arch: str  # "sm_90" | "cpu"
    sm_count: int | None = None  # streaming multiprocessors
    memory_gb: float | None = None  # device memory
    l2_mb: float | None = None  # L2 cache size
    peak_tflops: dict[str, float] = field(default_factory=dict)  # dtype -> dense TFLOP/s
    bandwidth_tbps: float | None = None  # memory bandwidth, TB/s
    ceilings: str = ""  # where the peaks come from


def read_task(path: str | Path, precision: str | None = None) -> TaskInfo:
    """The task's text, its metadata and the precision contract the evaluator judges it in.

    `precision`: ``--precision`` of the evaluations (``EvalOptions.precision``; None: not given)."""
    p = Path(path).resolve()
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read task {path}: {exc.strerror}") from exc
    source = data.decode("utf-8", errors="replace")
    meta = _metadata(source, str(path))
    return TaskInfo(
        path=str(p),
        name=p.stem,
        source=source,
        sha256=hashlib.sha256(data).hexdigest(),
        precision=_contract(p, data, meta, precision),
        split_precision=bool(meta.get("split_precision", True)),
        policy=str(meta.get("policy", "strict")),
        mode=str(meta.get("mode", "train")),
    )


def _contract(path: Path, data: bytes, meta: dict[str, Any], flag: str | None) -> str:
    """The precision the evaluator judges the task in (kernelproof.verify.contract.judged): a
    declared one is read from the literal without running the task; otherwise the task is loaded
    and its contract resolved as the evaluator resolves it."""
    if flag is None and "precision" in meta:
        return str(meta["precision"])
    # imported here: loading a task imports torch, which a verb refusing a mistyped path never does
    from kernelproof.task import load_task
    from kernelproof.verify import contract

    try:
        return contract.judged(load_task(path, data), flag).meta.precision
    except TaskError as exc:
        raise ConfigError(f"task {exc}") from exc


def _metadata(source: str, where: str) -> dict[str, Any]:
    try:
        tree = pyast.parse(source)
    except SyntaxError as exc:
        raise ConfigError(f"task {where} does not parse: {exc.msg} at line {exc.lineno}") from exc
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "KERNELPROOF" for t in node.targets
        ):
            try:
                meta = ast.literal_eval(node.value)
            except ValueError as exc:
                raise ConfigError(f"task {where}: KERNELPROOF is not a literal dict") from exc
            return meta if isinstance(meta, dict) else {}
    return {}


def describe_device(device: str = "auto", ceilings_path: str | None = None) -> DeviceInfo:
    """The device the evaluator will run on, as the prompts describe it."""
    if device == "cpu":
        return DeviceInfo("CPU", "cpu", "cpu", ceilings="Triton kernels run through the Triton interpreter")
    import torch  # deferred: importing the agent must not touch the device

    if not torch.cuda.is_available():
        if device == "auto":
            return describe_device("cpu")
        raise ConfigError(f"device {device!r} asked for, but CUDA is not available here")
    index = int(device.split(":")[1]) if device.startswith("cuda:") else 0
    props = torch.cuda.get_device_properties(index)
    peaks, bandwidth, source = _ceilings(props.name, ceilings_path)
    l2 = getattr(props, "L2_cache_size", 0) or 0
    return DeviceInfo(
        name=props.name,
        kind="cuda",
        arch=f"sm_{props.major}{props.minor}",
        sm_count=props.multi_processor_count,
        memory_gb=props.total_memory / 1e9,
        l2_mb=l2 / 2**20 if l2 else None,
        peak_tflops=peaks,
        bandwidth_tbps=bandwidth,
        ceilings=source,
    )


def _ceilings(name: str, path: str | None) -> tuple[dict[str, float], float | None, str]:
    if path:
        doc = json.loads(Path(path).read_text())
        peaks = {k: float(v) for k, v in doc.get("matmul_8192_TFLOPs", {}).items()}
        return peaks, doc.get("copy_bandwidth_TBps"), f"measured ({Path(path).name})"
    from kernelproof.data import match_ceilings

    doc = match_ceilings(name)
    if doc is not None:
        peaks = {k: float(v) for k, v in doc.get("matmul_8192_TFLOPs", {}).items()}
        return peaks, doc.get("copy_bandwidth_TBps"), f"measured ({doc.get('name', 'shipped')})"
    for fragment, peaks, bandwidth in DATASHEET:
        if fragment in name:
            return dict(peaks), bandwidth, "datasheet"
    return {}, None, "unknown device: no ceilings"


def device_text(d: DeviceInfo) -> str:
    """One paragraph for the prompt."""
    if d.kind == "cpu":
        return (
            "CPU. Triton kernels run through the Triton interpreter (TRITON_INTERPRET=1), so launch on the "
            "inputs' device and keep grids modest; CUDA C++ cannot be built here."
        )
    parts = [f"{d.name} ({d.arch}"]
    if d.sm_count:
        parts.append(f", {d.sm_count} SMs")
    if d.memory_gb:
        parts.append(f", {d.memory_gb:.0f} GB")
    if d.l2_mb:
        parts.append(f", {d.l2_mb:.0f} MiB L2")
    parts.append(").")
    if d.peak_tflops:
        peaks = ", ".join(f"{k} {v:g}" for k, v in d.peak_tflops.items())
        parts.append(f" Peak dense TFLOP/s ({d.ceilings}): {peaks}.")
    if d.bandwidth_tbps:
        parts.append(f" Memory bandwidth: {d.bandwidth_tbps:g} TB/s.")
    return "".join(parts)
