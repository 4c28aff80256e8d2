"""The memory one case needs, estimated without allocating: the task run on the meta device.

KernelBench's level-1 elementwise tasks at their published sizes hold 6.4 GB per tensor. On a
machine too small for them the evaluation used to allocate until the allocator failed, after about
70 s on an H200 and with "can't allocate memory" and a traceback on a small CPU machine. Here the
task's ``get_init_inputs()``, ``Model`` and ``get_inputs()`` run with every tensor on torch's meta
device (shapes and dtypes, no storage), and the reference's ``forward`` runs on those: the sizes of
the inputs, the weights and the outputs are known in seconds, before any full-size tensor exists.

What one case holds at once, at least (the counts follow kernelproof/verify/case_plan.py and the
worker): the parent's reference weights and their float64 twin (the oracle), the case's inputs,
the reference's outputs and the oracle's (float64, whole even when computed in chunks); the
candidate's worker its own weights, inputs and one run's outputs. On a GPU all of it is the
device's memory; on the CPU, the machine's. Activations are not counted: the estimate is a floor,
so a refusal is never false. A task whose reference cannot run on meta (data-dependent shapes,
``.item()``, explicit devices the mode cannot redirect) has no estimate: "unknown", never
``too_large``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kernelproof.inputs import KEPT_BATCH_BYTES
from kernelproof.task import Task, instantiate
from kernelproof.verify.meta_recurrent import RECURRENT, recurrent_outputs

META = torch.device("meta")
FLOAT64_BYTES = 8


@dataclass(frozen=True)
class Estimate:
    """The sizes of one case of one shape variant, read on the meta device."""

    variant: str
    input_bytes: int  # forward()'s tensor arguments, floats in the contract dtype
    input_float_elems: int  # of which floating elements (their float64 copy is the oracle's input)
    weight_bytes: int  # parameters and buffers in the contract dtype
    weight_float_elems: int  # of which floating elements (the oracle's float64 weights)
    output_bytes: int  # the reference's outputs (and arguments updated in place)
    output_float_elems: int  # of which floating elements (the oracle's float64 outputs)

    def parent_bytes(self) -> int:
        """Reference and oracle, their weights, one case's inputs and outputs, held together. The
        oracle's float64 copy of the inputs is left out: where the batch may be chunked
        (kernelproof/verify/chunks.py) only a chunk of it exists at a time, and a floor must hold
        for every task."""
        return (
            self.weight_bytes
            + self.input_bytes
            + self.output_bytes
            + FLOAT64_BYTES * (self.weight_float_elems + self.output_float_elems)
        )

    def worker_bytes(self) -> int:
        """The candidate's worker: its weights, the case's inputs and one run's outputs."""
        return self.weight_bytes + self.input_bytes + self.output_bytes

    def case_bytes(self) -> int:
        """The least one case needs in the memory parent and worker share (a floor: no activations)."""
        return self.parent_bytes() + self.worker_bytes()

    def evaluation_bytes(self) -> int:
        """What the whole evaluation is expected to hold at once, parent and worker together
        (:func:`evaluation_bytes`): what it reserves of the device before setup allocates. Never
        below :meth:`case_bytes`: that count assumes a float32 contract, and for float16 or bfloat16
        the float64 oracle's share is four times the outputs, not twice."""
        return max(
            evaluation_bytes(self.input_bytes, self.weight_bytes, self.output_bytes), self.case_bytes()
        )


def evaluation_bytes(input_bytes: int, weight_bytes: int, output_bytes: int) -> int:
    """An evaluation's device memory, parent and worker together, from one case's sizes.

    The parent holds the inputs and the weights three times (the case's, the reference's copies
    and the oracle's chunk of them) and the outputs five times (the reference's, the float64
    oracle's at twice the size, and two runs of the candidate's coming back). The worker holds the
    weights, the inputs three times (this case's, their saved copies, and the previous case's
    first-run inputs that its second run reuses) and the outputs three times (two runs and a spare
    poisoned block; kernelproof/worker/case_runs.py). Unlike :meth:`Estimate.case_bytes` this is not a
    floor: it is what the device's admission reserves (kernelproof/executors/device_memory.py), so that
    evaluations that would not fit together never start together. Measured on an H200 for a task
    of 6.4 GB a tensor: 90.2 GB by this count, the parent's allocator peaking at 38.7 GB and the
    worker at 52.3 GB."""
    return parent_share(input_bytes, weight_bytes, output_bytes) + worker_share(
        input_bytes, weight_bytes, output_bytes
    )


def timed_bytes(estimate: Estimate, programs: int, calls: int) -> int:
    """The timed rounds' device memory from one case's sizes: the parent's share, and in each of
    `programs` timed workers the weights and `calls` calls' inputs and outputs (a floor under what
    setup counts from the inputs it drew: kernelproof/evaluate/setup.py). The candidate's worker
    has let go of its cases' buffers by then (kernelproof/worker/loading.py)."""
    if programs <= 0:
        return 0
    i, w, o = estimate.input_bytes, estimate.weight_bytes, estimate.output_bytes
    return parent_share(i, w, o) + timed_worker_share(i, w, o, programs, calls)


def timed_worker_share(
    input_bytes: int, weight_bytes: int, output_bytes: int, programs: int, calls: int
) -> int:
    """The timed workers' part of :func:`timed_bytes`: each program's weights, and `calls` calls'
    inputs and outputs, held until its batch is checked; and the last batch beside it where the
    worker keeps that alive while it draws the next (one of at most ``KEPT_BATCH_BYTES``:
    kernelproof/worker/state.py, ``let_go_of_a_large_batch``)."""
    batch = calls * (input_bytes + output_bytes)
    kept = batch if batch <= KEPT_BATCH_BYTES else 0
    return programs * (weight_bytes + batch + kept)


def parent_share(input_bytes: int, weight_bytes: int, output_bytes: int) -> int:
    """The parent's part of :func:`evaluation_bytes`."""
    return 3 * (input_bytes + weight_bytes) + 5 * output_bytes


def worker_share(input_bytes: int, weight_bytes: int, output_bytes: int) -> int:
    """The candidate's worker's part of :func:`evaluation_bytes`."""
    return weight_bytes + 3 * input_bytes + 3 * output_bytes


@dataclass(frozen=True)
class Need:
    """The largest case of a task on a device, and what the device has (None: unknown)."""

    case_bytes: int | None  # the least one case needs (None: the reference cannot run on meta)
    available_bytes: int | None  # the device's memory (CPU: available RAM) (None: unknown)
    variant: str = ""  # the shape variant of the largest case
    why_unknown: str = ""  # why there is no estimate
    evaluation_bytes: int | None = None  # what the evaluation is expected to hold (admission)
    estimate: Estimate | None = None  # the largest variant's sizes, as the meta device gave them

    @property
    def too_large(self) -> bool:
        """Only when both are known and the floor exceeds what the device has."""
        return (
            self.case_bytes is not None
            and self.available_bytes is not None
            and self.case_bytes > self.available_bytes
        )


def case_need(task: Task, variants: tuple[str, ...], device: str | torch.device) -> Need:
    """The bytes one case of `task` needs at its largest variant, and the bytes `device` has.

    The one estimate every too_large decision made before allocating reads (setup, the CPU path,
    and a worker's death judged by the parent)."""
    best: Estimate | None = None
    for v in variants:
        est = estimate_variant(task, v)
        if isinstance(est, str):
            return Need(None, available_bytes(device), v, est)
        if best is None or est.case_bytes() > best.case_bytes():
            best = est
    if best is None:
        return Need(None, available_bytes(device), "", "no shape variant to estimate")
    return Need(
        best.case_bytes(),
        available_bytes(device),
        best.variant,
        evaluation_bytes=best.evaluation_bytes(),
        estimate=best,
    )


def case_need_of(task_path: str, device: str) -> Need:
    """:func:`case_need` for a task file, at the variants checked on `device`'s type: bytes one case
    needs and bytes the device has, for a caller that holds only the path (judging a worker's death)."""
    from kernelproof.task import load_task, variants_for

    try:
        task = load_task(task_path)
    except Exception as exc:  # noqa: BLE001 - a task that does not load has no estimate
        return Need(None, available_bytes(device), "", f"the task does not load ({type(exc).__name__})")
    return case_need(task, variants_for(task, torch.device(device).type), device)


def estimate_variant(task: Task, variant: str) -> Estimate | str:
    """The sizes of one case of `variant`, or why they cannot be read on the meta device."""
    from kernelproof.verify.case_plan import CONTRACT_DTYPE

    dtype = CONTRACT_DTYPE[task.meta.precision]
    try:
        module = instantiate(task, variant)
        with _OnMeta(), torch.device(META), torch.no_grad():
            model = module.Model(*module.get_init_inputs())
            model = model.to(META)
            keep = task.meta.keep_dtypes  # a bf16 or fp16 task as written: each tensor's own dtype
            for p in list(model.parameters()) + list(model.buffers()):
                if p.is_floating_point() and not keep:
                    p.data = p.data.to(dtype)
            raw = list(module.get_inputs())
            args = [x.to(META, x.dtype if keep else dtype) if _is_float(x) else x for x in raw]
            out = model(*args)
    except Exception as exc:  # noqa: BLE001 - any failure on meta means "no estimate", never a refusal
        return f"the reference does not run on the meta device ({type(exc).__name__}: {str(exc)[:120]})"
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    outs += [args[i] for i in task.meta.inplace if i < len(args)]
    if not all(isinstance(t, torch.Tensor) for t in outs):
        return "the reference returns something other than tensors"
    tensors_in = [a for a in args if isinstance(a, torch.Tensor)]
    weights = list(model.parameters()) + list(model.buffers())
    return Estimate(
        variant=variant,
        input_bytes=_bytes(tensors_in),
        input_float_elems=_float_elems(tensors_in),
        weight_bytes=_bytes(weights),
        weight_float_elems=_float_elems(weights),
        output_bytes=_bytes(outs),
        output_float_elems=_float_elems(outs),
    )


def available_bytes(device: str | torch.device) -> int | None:
    """The device's memory: a GPU's total (evaluations wait for each other's share, see
    kernelproof/executors/device_memory.py), the CPU's available RAM within this process's cgroup limit."""
    dev = torch.device(device)
    if dev.type == "cuda":
        try:
            return int(torch.cuda.get_device_properties(dev).total_memory)
        except Exception:  # noqa: BLE001 - no device to ask: unknown
            return None
    if dev.type != "cpu":
        return None
    free = _meminfo_available()
    limit = _cgroup_room()
    candidates = [b for b in (free, limit) if b is not None]
    return min(candidates) if candidates else None


def refusal_message(need: Need, device: str) -> str:
    """The too_large sentence: bytes needed and bytes the device has first (a console line is cut
    at 300 characters), then how to run it smaller."""
    place = "this machine has" if torch.device(device).type == "cpu" else f"{device} has"
    return (
        f"one case needs at least {_gb(need.case_bytes)}; {place} {_gb(need.available_bytes)}"
        f"{' available' if torch.device(device).type == 'cpu' else ''}. Give the task smaller shapes with a "
        f"shape variant (its KERNELPROOF dict, docs/tasks.md) or run it on a larger machine. (Shape variant "
        f"{need.variant!r}: its inputs, weights and outputs in the reference, the oracle's float64 weights and "
        "outputs, and the candidate's worker's own, estimated on the meta device: nothing was allocated)"
    )


def _gb(n: int | None) -> str:
    return "an unknown amount" if n is None else f"{n / 1e9:.1f} GB ({n} bytes)"


def _is_float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _bytes(ts: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _float_elems(ts: list[torch.Tensor]) -> int:
    return sum(t.numel() for t in ts if t.is_floating_point())


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """memory.max less memory.current of this process's cgroup (v2), where a limit is set."""
    try:
        with open("/proc/self/cgroup") as f:
            rel = next((ln.split(":", 2)[2].strip() for ln in f if ln.startswith("0::")), None)
        if rel is None:
            return None
        base = os.path.join("/sys/fs/cgroup", rel.lstrip("/"))
        with open(os.path.join(base, "memory.max")) as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open(os.path.join(base, "memory.current")) as f:
            current = int(f.read().strip())
        return max(0, int(limit) - current)
    except (OSError, ValueError):
        return None


def warm_up() -> float:
    """Run a few operators on the meta device as :func:`estimate_variant` runs a task's reference,
    and return the seconds it took.

    Why: the first reference run on meta in a process imports what torch's meta kernels lean on
    (torch._dynamo, sympy, Triton: about 900 modules, 2.5 s on a two-core machine); a service's
    first evaluations on an H200 each spent 3.5-7 s in their footprint step, waiting on that import
    one after another. A long-lived service does it once, before it listens."""
    started = time.perf_counter()
    with _OnMeta(), torch.device(META), torch.no_grad():
        x = torch.rand(2, 2)
        torch.relu(x), torch.softmax(x, dim=1), x @ x, x.sum(dim=1)
    return time.perf_counter() - started


def on_meta() -> TorchFunctionMode:
    """A mode under which every tensor the task makes lands on the meta device (see _OnMeta)."""
    return _OnMeta()


class _OnMeta(TorchFunctionMode):
    """Every tensor a task makes lands on the meta device: explicit ``device=`` arguments, ``.to``,
    ``.cuda()`` and ``.cpu()`` included (the ``torch.device`` context only covers defaults)."""

    _MOVES = {torch.Tensor.cuda, torch.Tensor.cpu}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self._MOVES:
            return args[0]
        shaped = recurrent_outputs(func, args) if func in RECURRENT else None
        if shaped is not None:  # its meta path unrolls every time step in Python
            return shaped
        if "device" in kwargs:
            kwargs["device"] = META
        if func is torch.Tensor.to:
            args = tuple(META if isinstance(a, (torch.device, str)) and _is_device(a) else a for a in args)
        return func(*args, **kwargs)


def _is_device(a: torch.device | str) -> bool:
    if isinstance(a, torch.device):
        return True
    try:
        torch.device(a)
        return True
    except (RuntimeError, TypeError):
        return False
