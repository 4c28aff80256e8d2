"""Cases and the reference side: what the candidate is checked on and what it is checked against.

Cases are shape variants x value distributions x hidden seeds (A4-A6, A11). Seeds come from the
evaluation's secret seed, drawn from the OS unless the user passes one, and are written into the
verdict afterwards so a run can be reproduced. The reference (contract precision) and the oracle
(float64) run here in the parent; their outputs never leave it (I2).
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelproof import numeric_flags
from kernelproof.errors import TaskError
from kernelproof.inputs import (
    DOMAIN_DISTRIBUTIONS,
    InputSlot,
    case_inputs,
    draw,
    dtype_name,
    same_bits,
    slot_bytes,
)
from kernelproof.task import Task, TaskModule, eval_expr, instantiate
from kernelproof.torch_globals import seeded
from kernelproof.verify import fastpath, steps
from kernelproof.verify.chunks import batch_of, batch_separable, chunks_for, oracle_in_chunks
from kernelproof.verify.oracle import (
    NO_NOISE,
    FactoryDtype,
    Noise,
    Randomness,
    convert_attributes,
    decide_randomness,
    oracle_scope,
    plain_attributes,
)
from kernelproof.verify.oracle_compare import tolerance_for

CONTRACT_DTYPE = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
LIGHT_DISTRIBUTIONS = ("task", "normal", "heavy", "spiky")  # for timed (large) variants on a GPU
MAX_REDRAWS = 3  # a case whose reference output is not finite is redrawn this many times


@dataclass(frozen=True)
class Case:
    case_id: str  # "<variant>/<distribution>/<k>"
    variant: str
    distribution: str
    seed: int  # input seed (secret until the verdict is written)


@dataclass
class VariantContext:
    """A shape variant made ready: the reference and oracle models, weights, input slots."""

    task: Task
    variant: str
    module: TaskModule
    device: torch.device
    dtype: torch.dtype
    precision: str
    mode: str
    init_args: list[Any]
    init_seed: int
    reference: torch.nn.Module
    oracle: torch.nn.Module
    weight_names: list[str]
    weight_tensors: list[torch.Tensor]  # CPU copies in the contract dtype
    attribute_names: list[str] = field(default_factory=list)  # plain tensor attributes, dotted (an RNN's h0)
    attribute_tensors: list[torch.Tensor] = field(default_factory=list)  # their CPU copies
    slots: list[InputSlot] = field(default_factory=list)
    fixed: dict[int, torch.Tensor] = field(default_factory=dict)  # integer/fixed inputs for timed calls
    scalars: dict[int, Any] = field(default_factory=dict)
    output_nbytes: list[int] = field(default_factory=list)
    noise: Noise = NO_NOISE  # the reference's run-to-run spread on one seed: part of its own error
    oracle_note: str = ""  # why the oracle fell back to the reference (empty: a float64 oracle)
    batch_separable: bool = False  # the parent showed the oracle may run in chunks of the batch (chunks.py)
    # every floating input, parameter and buffer keeps the task's own dtype (a bf16 or fp16 task as
    # written, kernelproof/verify/contract.py); False: cast to the contract dtype (``dtype``)
    keep_dtypes: bool = False

    @property
    def contract_key(self) -> str:
        """The contract as the audit's keys name it: the precision, and whether the task's own
        dtypes are kept (a bf16 task as written and one cast to bf16 differ in mixed slots)."""
        return f"{self.precision}/as written" if self.keep_dtypes else self.precision

    def input_dtype(self, x: torch.Tensor) -> torch.dtype:
        """The dtype a floating input slot holding `x` has in every case: its own (drawn in
        float32, then cast to it) where the task keeps its dtypes, else the contract's."""
        return x.dtype if self.keep_dtypes else self.dtype

    def constants(self) -> dict[str, Any]:
        return self.module.constants()

    @property
    def inplace(self) -> tuple[int, ...]:
        """forward() arguments the task updates in place (their new values are compared too)."""
        return self.task.meta.inplace

    def input_spec(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """How a worker makes this variant's inputs from a seed: header fields and the fixed tensors."""
        fields = {
            "slots": [s.__dict__ for s in self.slots],
            "fixed": {str(i): k for k, i in enumerate(self.fixed)},
            "scalars": {str(k): v for k, v in self.scalars.items()},
        }
        return fields, [self.fixed[i] for i in self.fixed]

    def flops(self) -> float | None:
        expr = self.task.meta.flops
        return eval_expr(expr, self.constants()) if expr else None

    def min_bytes_known(self) -> float | None:
        """:meth:`min_bytes` from the sizes a case has already recorded (the input slots and the
        reference's output bytes), without drawing or running anything; None before a case ran."""
        if not self.task.meta.bytes and (not self.slots or not self.output_nbytes):
            return None
        return self._min_bytes(sum(slot_bytes(s) for s in self.slots), sum(self.output_nbytes))

    def min_bytes(self, inputs: list[Any], outputs: list[torch.Tensor]) -> float:
        return self._min_bytes(
            sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor)),
            sum(t.numel() * t.element_size() for t in outputs),
        )

    def _min_bytes(self, input_bytes: int, output_bytes: int) -> float:
        """The task's own ``bytes`` expression, else each input, weight and output moved once."""
        if self.task.meta.bytes:
            return eval_expr(self.task.meta.bytes, self.constants())
        weights = sum(t.numel() * t.element_size() for t in self.weight_tensors)
        return float(input_bytes + weights + output_bytes)


def build_variant(
    task: Task, variant: str, device: torch.device, mode: str, init_seed: int
) -> VariantContext:
    module = instantiate(task, variant)
    precision = task.meta.precision
    dtype = CONTRACT_DTYPE[precision]
    init_args = init_inputs(task, module, init_seed)
    reference = build_reference(task, module, init_args, device, mode, init_seed)
    oracle = copy.deepcopy(reference).to(torch.float64)
    convert_attributes(oracle, torch.float64, device)
    oracle.train(mode == "train")
    state = reference.state_dict()
    names = list(state)
    tensors = [t.detach().to("cpu", copy=True) for t in state.values()]
    attributes = plain_attributes(reference)
    return VariantContext(
        task=task,
        variant=variant,
        module=module,
        device=device,
        dtype=dtype,
        precision=precision,
        mode=mode,
        init_args=init_args,
        init_seed=init_seed,
        reference=reference,
        oracle=oracle,
        weight_names=names,
        weight_tensors=tensors,
        attribute_names=list(attributes),
        attribute_tensors=[t.detach().to("cpu", copy=True) for t in attributes.values()],
        keep_dtypes=task.meta.keep_dtypes,
    )


def init_inputs(task: Task, module: TaskModule, init_seed: int) -> list[Any]:
    """``get_init_inputs()`` under `init_seed`: the reference's construction arguments (the
    audit's other-weights control draws its own under its seed)."""
    try:
        with seeded(init_seed):
            return module.get_init_inputs()
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:
        raise TaskError(
            f"constructing the reference Model failed: {type(exc).__name__}: {exc}", path=task.path
        ) from None


def build_reference(
    task: Task, module: TaskModule, init_args: list[Any], device: torch.device, mode: str, init_seed: int
) -> torch.nn.Module:
    """The task's Model from `init_seed`, on `device` in the contract dtype (in its own dtypes for a
    task that keeps them), constant parameters perturbed: the reference alone (the audit's
    other-weights control needs no oracle and no host copy of its weights)."""
    dtype = CONTRACT_DTYPE[task.meta.precision]
    try:
        reference = _construct(module, init_args, init_seed, device)
    except torch.OutOfMemoryError:
        raise  # the device's memory, not the task: the evaluation is retried alone (blame.worth_running_alone)
    except Exception as exc:
        raise TaskError(
            f"constructing the reference Model failed: {type(exc).__name__}: {exc}", path=task.path
        ) from None
    reference.to(device)
    if task.meta.keep_dtypes:
        convert_attributes(reference, None, device)
    else:
        for p in list(reference.parameters()) + list(reference.buffers()):
            if p.is_floating_point():
                p.data = p.data.to(dtype)
        convert_attributes(reference, dtype, device)
    _perturb_constant_parameters(reference, init_seed)
    reference.train(mode == "train")
    return reference


def _construct(
    module: TaskModule, init_args: list[Any], init_seed: int, device: torch.device
) -> torch.nn.Module:
    """``Model(*init_args)`` under `init_seed`. On a GPU it runs first with the device as torch's
    default, so that its parameters are initialised there: a Linear of 32768 x 32768 took 14 s
    of the CPU's generator on one core (8 s on another host), each time the reference or the
    audit's other-weights model was built, holding the seeding lock every evaluation's draws
    wait for. The weights follow the seed on that device (the same initialisers, the same
    distributions, other values than the CPU's). A Model whose construction fails there (numpy,
    a CPU generator, a CPU-only op) is built again as written, on the CPU, which decides whether
    it fails (kernelproof/verify/fastpath.py)."""
    if device.type == "cuda" and fastpath.ENABLED:
        try:
            with seeded(init_seed), torch.device(device):
                return module.Model(*init_args)
        except torch.OutOfMemoryError:
            raise
        except Exception:  # noqa: BLE001 - the CPU decides whether Model() itself fails
            pass
    with seeded(init_seed):
        return module.Model(*init_args)


PERTURB_SCALE = 0.1  # constant-initialised parameters get this much random spread


def _perturb_constant_parameters(model: torch.nn.Module, seed: int) -> None:
    """Give parameters initialised to a constant (LayerNorm's ones and zeros) random values.

    The harness owns the weights (I3). With the defaults a kernel that ignores the affine part of
    a normalisation computes the same numbers as one that applies it (A13); after this it does not.
    Randomly initialised parameters are left as they are.
    """
    gen = torch.Generator().manual_seed(int(seed) ^ 0x5EED)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() > 0 and bool((p == p.reshape(-1)[0]).all()):
                base = float(p.reshape(-1)[0])
                noise = (
                    torch.randn(p.shape, generator=gen, dtype=torch.float32)
                    * PERTURB_SCALE
                    * max(abs(base), 1.0)
                )
                p.add_(noise.to(device=p.device, dtype=p.dtype))


def plan_cases(
    ctx_variants: list[str],
    light: set[str],
    distributions: tuple[str, ...],
    seeds_per_case: int,
    rng: random.Random,
) -> list[Case]:
    cases = []
    for v in ctx_variants:
        dists = [d for d in distributions if d in LIGHT_DISTRIBUTIONS] if v in light else list(distributions)
        k_seeds = 1 if v in light else seeds_per_case
        for d in dists:
            for k in range(k_seeds):
                cases.append(Case(f"{v}/{d}/{k}", v, d, rng.getrandbits(62)))
    return cases


def allowed_distributions(task: Task, n_inputs: int, requested: tuple[str, ...] | None) -> tuple[str, ...]:
    """Distributions admitted by at least one input's domain (others keep get_inputs' values)."""
    seen: list[str] = []
    for i in range(max(1, n_inputs)):
        for d in DOMAIN_DISTRIBUTIONS[task.meta.domain_of(i)]:
            if d not in seen:
                seen.append(d)
    if requested:
        seen = [d for d in seen if d in requested]
    return tuple(seen) or ("task",)


def drawable(ctx: VariantContext, distribution: str) -> bool:
    """Can this case be drawn from a seed alone (every tensor a float, not get_inputs' own values)?"""
    return (
        distribution != "task" and bool(ctx.slots) and all(s.kind in ("float", "scalar") for s in ctx.slots)
    )


def make_inputs(ctx: VariantContext, distribution: str, seed: int, *, on_device: bool = False) -> list[Any]:
    """The inputs of one case (timed as the step "inputs"): see :func:`_make_inputs`. With
    `on_device`, what ``get_inputs()`` drew on a GPU stays there instead of coming back to the
    host: every step copies a case's inputs to the device again (the reference, the oracle, the
    audit's controls, the worker's handoff), as it does a case drawn from a seed."""
    with steps.step("inputs"):
        return _make_inputs(ctx, distribution, seed, on_device)


def _make_inputs(ctx: VariantContext, distribution: str, seed: int, on_device: bool = False) -> list[Any]:
    """The inputs of one case: floats in the contract dtype (each slot in its own where the task
    keeps its dtypes), integers untouched.

    ``get_inputs()`` (the task's own code, :func:`_task_inputs`: on the device where it can be) is called for the
    "task" distribution and whenever the task has integer or fixed inputs; otherwise the shapes are
    known from an earlier call and every float input is drawn directly on the device, which keeps
    multi-GB cases from spending seconds in the CPU's random number generator.
    """
    if drawable(ctx, distribution):
        return case_inputs(ctx.slots, ctx.scalars, distribution, seed, ctx.device)
    raw = _task_inputs(ctx, seed, on_device)
    args: list[Any] = []
    slots: list[InputSlot] = []
    for i, x in enumerate(raw):
        domain = ctx.task.meta.domain_of(i)
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            if domain != "fixed" and distribution != "task" and distribution in DOMAIN_DISTRIBUTIONS[domain]:
                x = draw(
                    tuple(x.shape), distribution, domain, seed * 1009 + i, ctx.device, ctx.input_dtype(x)
                )
            else:
                x = x.to(ctx.input_dtype(x))
            kind = "fixed" if domain == "fixed" else "float"
            slots.append(InputSlot(i, kind, tuple(x.shape), dtype_name(x.dtype), domain))
        elif isinstance(x, torch.Tensor):
            slots.append(InputSlot(i, "fixed", tuple(x.shape), dtype_name(x.dtype), "fixed"))
        else:
            slots.append(InputSlot(i, "scalar", (), "", "fixed"))
        args.append(x)
    if not ctx.slots:
        ctx.slots = slots
        # on the host, wherever this call drew them: they live as long as the evaluation
        ctx.fixed = {s.index: args[s.index].cpu() for s in slots if s.kind == "fixed"}
        ctx.scalars = {s.index: args[s.index] for s in slots if s.kind == "scalar"}
    return args


def _task_inputs(ctx: VariantContext, seed: int, on_device: bool = False) -> list[Any]:
    """``get_inputs()``'s own values for ``seed``. On a GPU it runs first with the device as
    torch's default, so that its ``torch.randn(...)`` draws there: KernelBench's level-1 tasks draw
    gigabytes a tensor, and the CPU's generator took 12-15 s a call on the H200 host (40 s of a
    95 s evaluation of 4_Matrix_vector_multiplication). The values follow the seed on that device
    as they do on the CPU; a task whose ``get_inputs()`` fails there (numpy, a CPU-only op, the
    device's memory) runs again as written, on the CPU. Without `on_device` what it drew comes
    back to the CPU (a copy at the bus's speed). With it, it stays on the device, where a case
    drawn from a seed lives too (setup's probe, the audit and correctness's cases ask for it): on
    an H200 the copy back to the host took 3.6-4.2 s of a 6.4 GB-a-tensor draw, and each later
    step copied it up again (0.7 s a time; setup's randomness check alone runs the reference six
    times)."""
    if ctx.device.type == "cuda" and fastpath.ENABLED:
        try:
            with seeded(seed), torch.device(ctx.device):
                raw = ctx.module.get_inputs()
            if on_device:
                return list(raw)
            return [x.cpu() if isinstance(x, torch.Tensor) else x for x in raw]
        except TaskError:  # what it returned is not a list: the same on any device
            raise
        except Exception:  # noqa: BLE001 - the CPU decides whether get_inputs() itself fails
            pass
    try:
        with seeded(seed):
            return ctx.module.get_inputs()
    except (TaskError, torch.OutOfMemoryError):  # TaskError: what it returned is not a list
        raise
    except Exception as exc:
        raise TaskError(f"get_inputs() raised {type(exc).__name__}: {exc}", path=ctx.task.path) from None


def to_device(args: list[Any], device: torch.device, dtype: torch.dtype | None = None) -> list[Any]:
    """Fresh copies on the device: a reference that updates its inputs must not change the case.
    A cast to `dtype` (floating tensors only) is the copy itself: no second copy of the input in
    its own dtype exists beside it."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            cast = dtype if dtype is not None and a.is_floating_point() else a.dtype
            a = a.to(device=device, dtype=cast, copy=True)
        out.append(a)
    return out


def run_model(
    model: torch.nn.Module,
    args: list[Any],
    precision: str,
    inplace: tuple[int, ...] = (),
    scope: FactoryDtype | None = None,
) -> list[torch.Tensor]:
    """Forward under the contract's numeric flags and no_grad; outputs as a flat list.

    For a task that updates arguments in place (``inplace``), the call gets copies of those
    arguments (the caller's stay as they were, for the oracle and the candidate) and their values
    after the call follow the returned outputs: they are results like any other.
    """
    args = list(args)
    for i in inplace:
        if i >= len(args) or not isinstance(args[i], torch.Tensor):
            raise TaskError(
                f"KERNELPROOF inplace names argument {i}, which is not a tensor input of forward()"
            )
        args[i] = args[i].clone()
    try:
        with numeric_flags.pinned(precision), torch.no_grad(), scope or contextlib.nullcontext():
            out = model(*args)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:
        raise TaskError(f"the reference raised {type(exc).__name__}{_where(exc)}: {exc}") from None
    flat = list(out) if isinstance(out, (tuple, list)) else [out]
    for t in flat:
        if not isinstance(t, torch.Tensor):
            raise TaskError(f"the reference returned {type(t).__name__}, not a tensor")
    # Detached copies: a returned output may be the updated argument itself.
    return flat + [args[i].detach().clone() for i in inplace]


def _where(exc: BaseException) -> str:
    """' at FILE:LINE' of the deepest frame outside torch and kernelproof (the task's own line);
    nothing when there is none (a call with the wrong arguments fails in kernelproof's own call,
    a line that says nothing about the task)."""
    import traceback

    ours = str(Path(__file__).resolve().parents[1]) + os.sep  # the kernelproof package
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if "/torch/" not in f.filename and not os.path.abspath(f.filename).startswith(ours)
    ]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def reference_and_oracle(
    ctx: VariantContext, args: list[Any]
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The reference's outputs in the contract precision and the float64 oracle's, on one case.

    Only the reference raising is the task's error. An oracle that still cannot run in float64
    (a model that mixes dtypes in ways the oracle's scope does not cover) falls back to the
    reference's outputs, widened, and says so (``ctx.oracle_note``, a verdict flag): the tolerance
    is then the contract's floor, not a multiple of a measured error.
    """
    try:
        with steps.step("reference"):
            ref = run_model(ctx.reference, to_device(args, ctx.device), ctx.precision, ctx.inplace)
    except (TaskError, torch.OutOfMemoryError):
        raise
    except Exception as exc:
        raise TaskError(f"the reference raised {type(exc).__name__}: {exc}", path=ctx.task.path) from None
    try:
        with steps.step("oracle"):
            orc = oracle_of(ctx, args)
    except torch.OutOfMemoryError:
        raise  # never a weaker oracle for want of memory
    except Exception as exc:  # noqa: BLE001 - the task runs; only its float64 twin does not
        ctx.oracle_note = (
            f"oracle_fallback: the float64 oracle raised {type(exc).__name__}: {str(exc)[:200]}; "
            "outputs are compared with the reference's own, at the contract's floor tolerance"
        )
        orc = [t.detach().to(torch.float64) if t.is_floating_point() else t for t in ref]
    if not ctx.output_nbytes:
        ctx.output_nbytes = [t.numel() * t.element_size() for t in ref]
    return ref, orc


def oracle_of(ctx: VariantContext, args: list[Any]) -> list[torch.Tensor]:
    """The float64 oracle's outputs on `args`, on slices of the batch where the parent showed the
    task allows it (kernelproof/verify/chunks.py): every caller, the cases and the timed rounds'
    re-check of a timed call alike, holds one slice of the float64 inputs at a time, as the
    device's reservation counts (kernelproof/verify/footprint.py). On an H100 a re-check that ran
    the oracle whole asked for 16 GiB at once for level1/47_Sum's 8.6 GB input."""
    chunks = chunks_for(args) if ctx.batch_separable else 1
    if chunks > 1:
        return oracle_in_chunks(lambda a: oracle_outputs(ctx, a), args, chunks)
    return oracle_outputs(ctx, args)


def oracle_outputs(ctx: VariantContext, args: list[Any]) -> list[torch.Tensor]:
    """The float64 oracle's outputs on `args` (a float64 copy of them, on the device)."""
    return run_model(
        ctx.oracle, to_device(args, ctx.device, torch.float64), "fp32", ctx.inplace, oracle_scope()
    )


def check_batch_separable(ctx: VariantContext, args: list[Any]) -> bool:
    """May the oracle run in chunks of the batch for this task? Checked on the first rows of
    `args` (a small shape: at most CHECK_ROWS rows), never assumed (kernelproof/verify/chunks.py)."""
    b = batch_of(args)
    if b is None:
        return False
    rows = min(b, CHECK_ROWS)
    small = [a.narrow(0, 0, rows) if isinstance(a, torch.Tensor) else a for a in args]
    return batch_separable(lambda a: oracle_outputs(ctx, a), small)


CHECK_ROWS = 8  # rows of the batch on which the chunked oracle is checked against the whole one


def reference_randomness(ctx: VariantContext, args: list[Any]) -> Randomness:
    """Do the reference's outputs depend on the random number generator (dropout in training mode),
    or only differ by rounding between runs (atomics in cuDNN's transposed convolutions)?

    Weighed against the correctness tolerance of this case (verify/oracle.py's rule)."""

    # The copies to the device are made before the seeded block: it holds the process-wide lock
    # (torch_globals), and a copy from the host is synchronous: on an H200 a reference run at 6.4 GB
    # a tensor took about 0.7 s, nearly all of it that copy, while every other evaluation in flight
    # waited for the lock.
    def run(seed: int) -> list[torch.Tensor]:
        on_device = to_device(args, ctx.device)
        with seeded(seed), steps.step("reference"):
            return run_model(ctx.reference, on_device, ctx.precision, ctx.inplace)

    # The yardstick is the tolerance of a deterministic twin: the reference and the oracle under
    # one seed and in eval() mode. Under one seed a factory's random tensor is the same in both (the
    # oracle widens what the reference draws), but dropout's masks need not be (on CUDA their
    # generation depends on the dtype), and a random reference's error against an oracle with other
    # masks is as large as the randomness it is weighed against: eval() turns dropout off.
    with _eval_mode(ctx.reference, ctx.oracle):
        on_device = to_device(args, ctx.device)
        with seeded(1), steps.step("reference"):
            ref = run_model(ctx.reference, on_device, ctx.precision, ctx.inplace)
        del on_device
        try:
            widened = to_device(args, ctx.device, torch.float64)
            with seeded(1), steps.step("oracle"):
                orc = run_model(ctx.oracle, widened, "fp32", ctx.inplace, oracle_scope())
            del widened
        except torch.OutOfMemoryError:
            raise
        except Exception:  # noqa: BLE001 - no float64 twin (reference_and_oracle says so): the floor
            orc = [t.detach().to(torch.float64) if t.is_floating_point() else t for t in ref]
    tol = min(
        (tolerance_for(r, o, ctx.dtype).rel_norm for r, o in zip(ref, orc) if r.is_floating_point()),
        default=0.0,
    )
    del ref, orc  # the runs below hold their own outputs: these two would only add to the peak
    return decide_randomness(run, tol)


@contextlib.contextmanager
def _eval_mode(*models: torch.nn.Module):
    """Every module of `models` in eval() mode for the block; each one's own mode restored after."""
    modes = [(m, m.training) for model in models for m in model.modules()]
    for model in models:
        model.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


def inplace_findings(ctx: VariantContext, args: list[Any]) -> list[str]:
    """Where the task's ``inplace`` declaration and its reference disagree (flags for the author).

    An argument the reference changes but the task does not declare: a solution that mirrors the
    reference fails with input_mutated, and one that skips the update is not caught. An argument
    declared but left unchanged: the declaration only relaxes the checks for nothing.
    """
    before = to_device(args, ctx.device)
    after = [a.clone() if isinstance(a, torch.Tensor) else a for a in before]
    try:
        with numeric_flags.pinned(ctx.precision), torch.no_grad():
            ctx.reference(*after)
    except torch.OutOfMemoryError:
        raise
    except Exception:  # noqa: BLE001 - a reference that raises is reported by the cases themselves
        return []
    out = []
    for i, (b, a) in enumerate(zip(before, after)):
        if not isinstance(b, torch.Tensor):
            continue
        changed = not same_bits(b, a)
        if changed and i not in ctx.inplace:
            out.append(
                f"inplace_undeclared: the reference changes forward() argument {i}, which KERNELPROOF "
                f'does not declare in place: add "inplace": [{i}] so the update is compared, not forbidden'
            )
        elif not changed and i in ctx.inplace:
            out.append(
                f"inplace_unused: KERNELPROOF declares argument {i} in place, but the reference leaves it unchanged"
            )
    return out
