"""Which sizes the evaluator tests a candidate at, as concrete numbers for the prompt.

Why: a prompt that only says "other sizes are tested too" lets a model guess, and a kernel
written for the published row length then fails a probed shape it was never told about. The
evaluator's shapes are known before any candidate exists: the task's own variants checked on the
device (kernelproof.task.variants_for) and the probed ones, the same size constants made odd and
about half (kernelproof.task.with_auto_variants, kept by kernelproof/evaluate/setup.py where the
reference accepts them). Each is instantiated here so that derived constants (``M = N // 2``)
show the values they take.

Unlike the rest of the prompt's task text this runs the task's module-level code (never
``get_inputs``): the evaluator runs the same file in the same parent process anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelproof.errors import TaskError
from kernelproof.task import Task, auto_variant_base, instantiate, load_task, variants_for
from kernelproof.task import with_auto_variants as probed_variants

Sizes = tuple[tuple[str, int], ...]  # (module constant, value), in the file's order


@dataclass(frozen=True)
class SizesTested:
    own: tuple[tuple[str, Sizes], ...]  # the task's own shapes checked on the device: (variant, sizes)
    probed: tuple[tuple[str, Sizes], ...]  # the perturbed shapes: (variant, sizes); () under "task"
    mode: str  # EvalOptions.shape_variants: "auto" (probed shapes are in the contract) | "probe" | "task"


def sizes_tested(task_path: str, device_kind: str, shape_variants: str) -> SizesTested | None:
    """The shapes a candidate of ``task_path`` is tested at; None when the task does not load
    (the evaluator then reports it: the prompt falls back to saying other sizes are tested)."""
    try:
        task = load_task(task_path)
        own = variants_for(task, device_kind)
        probed: tuple[str, ...] = ()
        if shape_variants in ("auto", "probe"):
            task, probed = probed_variants(task, auto_variant_base(task, own))
        names = _size_names(task)
        return SizesTested(
            tuple((v, _sizes(task, v, names)) for v in own),
            tuple((v, _sizes(task, v, names)) for v in probed),
            shape_variants,
        )
    except TaskError:
        return None


def sizes_text(sizes: SizesTested) -> str:
    """The prompt's paragraph: every tested shape with its numbers, and what a failure there means."""
    lines = ["Sizes tested (the evaluator sets these module constants; derive every size from the tensors):"]
    lines.append("- the task's own: " + "; ".join(_shape(v, s) for v, s in sizes.own))
    if sizes.probed:
        shapes = "; ".join(_shape(v, s) for v, s in sizes.probed)
        if sizes.mode == "auto":
            lines.append(
                f"- probed, part of the contract: {shapes}. A candidate that fails one of them is rejected "
                "(shape_specialized)."
            )
        else:
            lines.append(
                f"- probed once the task's own pass: {shapes}. A failure there is flagged shape_specialized."
            )
        lines.append("  (A probed shape the reference itself rejects is left out.)")
    return "\n".join(lines)


def _size_names(task: Task) -> tuple[str, ...]:
    """The task's integer module constants, in the order the default namespace holds them."""
    return tuple(k for k, v in task.constants.items() if isinstance(v, int) and not isinstance(v, bool))


def _sizes(task: Task, variant: str, names: tuple[str, ...]) -> Sizes:
    """The values of ``names`` in ``variant`` (instantiated: derived constants follow)."""
    values = instantiate(task, variant).constants()
    return tuple((n, int(values[n])) for n in names if isinstance(values.get(n), int))


def _shape(variant: str, sizes: Sizes) -> str:
    """``small (batch_size=8, cols=64)``: every integer constant, a reduction dim or kernel size too."""
    shown = ", ".join(f"{k}={v}" for k, v in sizes)
    return f"{variant} ({shown})" if shown else variant
