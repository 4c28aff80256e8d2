"""The precision contract a task is judged in, and where it comes from.

A task is judged in the precision it is written in. Three sources, the first that speaks wins:

- ``flag``: ``--precision fp32|fp16|bf16`` (KernelBench's flag; ``EvalOptions.precision``) casts
  the reference's parameters and every floating input to that dtype, for the reference, the
  baselines and the candidate alike, as KernelBench's own cast does;
- ``declared``: ``KERNELPROOF["precision"]``, the same cast;
- ``as written``: the dtypes ``get_inputs()`` and ``Model`` make. A task whose floating inputs,
  parameters and buffers are all float32 (or float64) is an fp32 task and is judged exactly as
  before (everything cast to float32). One with a bf16 or fp16 tensor among them is judged in the
  lowest of those precisions (bf16 below fp16), and every input slot, parameter and buffer keeps
  the dtype the task gave it (``TaskMeta.keep_dtypes``): a bf16 task's inputs reach the solution
  as bf16, mixed inputs keep each slot's dtype, integer inputs are never touched.

Without this, a bf16 task was cast to float32 and judged at fp32's tolerance, and a solution that
returned zeros whenever its inputs were bf16 passed: the part of a half-precision kernel most
often wrong was never exercised.

The task's dtypes are read on the meta device (nothing allocated: KernelBench's level-1 tasks
draw gigabytes a tensor), from the shape variant the task's own questions are asked on; a task
whose constructor or ``get_inputs()`` cannot run there runs on the CPU under a fixed seed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from kernelproof.errors import TaskError
from kernelproof.task import Task, instantiate
from kernelproof.torch_globals import seeded

FLAG_PRECISIONS = ("fp32", "fp16", "bf16")  # what --precision accepts (KernelBench's choices)
SOURCES = ("declared", "as written", "flag")
WRITTEN = {torch.bfloat16: "bf16", torch.float16: "fp16"}  # lowest first: bf16 has 8 bits of mantissa


def judged(task: Task, flag: str | None = None) -> Task:
    """`task` with its contract resolved: ``meta.precision``, ``meta.precision_source`` and
    ``meta.keep_dtypes`` say how it is judged. `flag` is ``--precision`` (None: not given)."""
    meta = task.meta
    if flag is not None:
        if flag not in FLAG_PRECISIONS:
            raise TaskError(f"--precision {flag!r} is not one of {FLAG_PRECISIONS}", path=task.path)
        new = dataclasses.replace(meta, precision=flag, precision_source="flag", keep_dtypes=False)
    elif meta.precision_source == "declared":
        return task
    else:
        written = written_precision(task)
        new = dataclasses.replace(
            meta, precision=written, precision_source="as written", keep_dtypes=written != "fp32"
        )
    return dataclasses.replace(task, meta=new)


def written_precision(task: Task) -> str:
    """The precision the task is written in: bf16 or fp16 when a floating input, parameter or
    buffer of it is in that dtype (bf16 when both are), else fp32."""
    found = set(floating_dtypes(task))
    return next((name for dt, name in WRITTEN.items() if dt in found), "fp32")


def floating_dtypes(task: Task) -> list[torch.dtype]:
    """The dtypes of the task's floating inputs, parameters and buffers, as its own code makes them,
    at the variant its own questions are asked on (the first CPU variant: its small shapes)."""
    variant = next((v for v in task.meta.cpu if v in task.meta.variants), "default")
    try:
        return _on_meta(task, variant)
    except Exception:  # noqa: BLE001 - the CPU decides; a failure there is the task's, said as such
        pass
    try:
        return _on_cpu(task, variant)
    except TaskError:
        raise
    except Exception as exc:
        raise TaskError(
            f"reading the task's dtypes failed: {type(exc).__name__}: {str(exc)[:200]}", path=task.path
        ) from None


def _on_meta(task: Task, variant: str) -> list[torch.dtype]:
    from kernelproof.verify.footprint import META, on_meta

    module = instantiate(task, variant)
    # under the seeding lock: a task that seeds torch itself must not move another evaluation's draws
    with seeded(0), on_meta(), torch.device(META), torch.no_grad():
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
    return _dtypes(model, inputs)


def _on_cpu(task: Task, variant: str) -> list[torch.dtype]:
    module = instantiate(task, variant)
    with seeded(0), torch.no_grad():
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
    return _dtypes(model, inputs)


def _dtypes(model: Any, inputs: Any) -> list[torch.dtype]:
    tensors = [x for x in list(inputs) if isinstance(x, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters()) + list(model.buffers())
    return [t.dtype for t in tensors if t.is_floating_point()]
