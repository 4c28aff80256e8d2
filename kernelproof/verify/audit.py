"""Task audit: negative controls that must fail, or the task cannot tell right from wrong (A4, A5, A7, A12).

Sakana's 38x "kernel" returned zeros on a task whose true output was ~1e-9; METR and robust-kbench
filter such tasks. Here every shape variant is audited against the same comparison the candidate
faces: all-zeros, the output's mean, an input passed through, the reference on another seed's
inputs, the reference built with other weights, and (under an fp32 contract) a bf16 reference.
Each must be rejected on at least one audit distribution; a variant where one is not is
degenerate and is not scored. Results are cached per (task hash, variant, device type), since
degeneracy depends on size, in this process and, in the results store, across runs
(kernelproof/verify/audit_store.py). A served report was made under another evaluation's weights,
and whether a task can tell right from wrong can depend on them: KernelBench's level-2 task 58
subtracts a scalar drawn by ``torch.randn`` and clamps to [-1, 1], so for about a third of the
draws every output is clamped and a constant is correct. The controls that need no other model
(zeros, the mean, an input passed through, another seed's inputs) are therefore run again under
this evaluation's own weights whenever a sound report is served (:func:`check_these_weights`),
unless it was made under the same ones (:func:`weights_digest`): a constant output would otherwise
pass on a task whose stored audit was sound. A degenerate
report is served as it is: under clamping weights the other-weights and bf16 controls pass too,
so only a whole audit under another draw can tell the draw from the task (the evaluation's setup
draws the weights again and asks for one, ``refresh``). Each control is compared and freed before
the next is made:
at KernelBench's published sizes one output is 6.4 GB. Each control's cost (its run and its
comparison) is a step of the verdict's ``environment["steps"]`` (kernelproof/verify/steps.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from kernelproof import jsonsafe
from kernelproof.task import Task
from kernelproof.verify import steps
from kernelproof.verify.audit_store import AuditStore
from kernelproof.verify.case_plan import (
    VariantContext,
    build_reference,
    build_variant,
    init_inputs,
    make_inputs,
    reference_and_oracle,
    run_model,
    to_device,
)
from kernelproof.verify.oracle_compare import compare, tolerance_for
from kernelproof.verify.precision import lower_precision_outputs
from kernelproof.verify.single_flight import KeyedLocks

# Version 1: the first with a version; non-finite errors are the strings "inf", "-inf", "nan".
AUDIT_SCHEMA = "kernelproof.audit/1"
AUDIT_DISTRIBUTIONS = ("task", "normal")  # KernelBench's own inputs, and zero-mean ones
# The controls a served report is checked with under this evaluation's weights: those that need
# no model but the reference (other_weights builds a second model, bf16_reference a third).
WEIGHTS_CONTROLS = ("zeros", "mean", "passthrough", "other_seed")
CONTROLS = ("zeros", "mean", "passthrough", "other_seed", "other_weights", "bf16_reference")  # report order
_CACHE: dict[tuple[str, str, str, str, str], AuditReport] = {}  # the persisted key, less the source
_IN_FLIGHT = KeyedLocks()  # the keys being audited now (kernelproof/verify/single_flight.py)


@dataclass(frozen=True)
class Control:
    name: str  # zeros | mean | passthrough | other_seed | other_weights | bf16_reference
    failed_as_it_should: bool  # rejected on at least one audit distribution
    rel_norm_err: float  # largest normwise error it reached
    note: str = ""


@dataclass(frozen=True)
class AuditReport:
    task: str
    variant: str
    degenerate: bool
    controls: tuple[Control, ...] = field(default_factory=tuple)
    # True for a report of this evaluation's weights: the controls of WEIGHTS_CONTROLS ran again
    # under them, the report served having been made under another draw's. Never persisted.
    these_weights: bool = False
    draws: int = 1  # draws of the weights, all degenerate (kernelproof/evaluate/setup.py draws again)
    # The weights, tensor attributes and init arguments the controls ran under (weights_digest;
    # "" where too large to hash): a served report made under the same ones is not checked again
    weights: str = ""

    def passed(self) -> list[str]:
        """The controls that passed the comparison (that should have failed it)."""
        return [c.name for c in self.controls if not c.failed_as_it_should]

    def summary(self) -> str:
        bad = self.passed()
        text = "controls that passed the comparison: " + ", ".join(bad) if bad else "all controls rejected"
        if self.these_weights and bad and self.draws == 1:
            text += (
                " under this evaluation's weights (drawn from its secret seed; the task's stored audit "
                "was made under another draw's): with these weights the comparison cannot tell a "
                "correct output from these stand-ins"
            )
        elif self.these_weights and bad:
            text += (
                f" under each of {self.draws} draws of the weights (from the evaluation's secret seed): "
                "under none of them can the comparison tell a correct output from these stand-ins"
            )
        return text

    def to_json(self) -> dict[str, Any]:
        """The report as JSON. A control's error is often infinite (a zero oracle makes any other
        output infinitely wrong): it is written "inf" (or "nan"), as kernelproof/jsonsafe.py says."""
        return jsonsafe.encode(
            {
                "schema": AUDIT_SCHEMA,
                "task": self.task,
                "variant": self.variant,
                "degenerate": self.degenerate,
                "controls": [asdict(c) for c in self.controls],
                "weights": self.weights,
            }
        )

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> AuditReport:
        """Read a report back; ValueError if it is not one (the error a number only where one stands)."""
        if not isinstance(doc, dict) or doc.get("schema") != AUDIT_SCHEMA:
            raise ValueError(f"not a {AUDIT_SCHEMA} document")
        try:
            controls = tuple(
                Control(
                    str(c["name"]),
                    bool(c["failed_as_it_should"]),
                    float(jsonsafe.number(c["rel_norm_err"])),  # type: ignore[arg-type]
                    str(c.get("note", "")),
                )
                for c in doc["controls"]
            )
            weights = str(doc.get("weights") or "")  # absent in a report kept before it was recorded
            return cls(
                str(doc["task"]), str(doc["variant"]), bool(doc["degenerate"]), controls, weights=weights
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed {AUDIT_SCHEMA} document: {exc!r}") from None


def audit_variant(
    task: Task,
    ctx: VariantContext,
    seed: int,
    persist: AuditStore | None = None,
    task_inputs: list[Any] | None = None,
    refresh: bool = False,
) -> AuditReport:
    """The audit of one variant: served from this process's memory, else from `persist` (an
    earlier run's, same task content, variant, mode, device type and kernelproof), else run.

    `task_inputs`: inputs of this variant already drawn by ``get_inputs()`` from a secret seed
    (setup's probe), used as the "task" distribution's first inputs instead of a new call: at
    KernelBench's level-1 sizes one call draws GBs in the CPU's generator. Its other-seed control
    still draws its own. `refresh`: run it whatever is kept, and keep this one instead (weights
    drawn again after a degenerate report, kernelproof/evaluate/setup.py)."""
    key = (task.sha256, ctx.variant, ctx.mode, ctx.device.type, ctx.contract_key)
    if refresh:
        return _run_audit(task, ctx, seed, persist, task_inputs, key)
    served = _CACHE.get(key)
    if served is None:
        # one audit per key at a time: the candidates of a task that arrive together wait for the
        # first one's and are served it, with the check under their own weights below
        with _IN_FLIGHT.hold(key):
            served = _CACHE.get(key)
            if served is None:
                with steps.step("stored"):
                    served = persist.get(task, ctx) if persist is not None else None
                if served is None:
                    return _run_audit(task, ctx, seed, persist, task_inputs, key)
                _CACHE[key] = served
    if served.degenerate:
        return served
    if served.weights and served.weights == weights_digest(ctx):
        return served  # made under these very weights (a task without any, or with fixed ones)
    with steps.step("these_weights"):
        check = check_these_weights(task, ctx, seed, task_inputs)
    return check if check.degenerate else served


def _run_audit(
    task: Task,
    ctx: VariantContext,
    seed: int,
    persist: AuditStore | None,
    task_inputs: list[Any] | None,
    key: tuple[Any, ...],
) -> AuditReport:
    """Run the whole audit of one variant, and keep it in memory and in `persist`."""
    with steps.step("other_weights"):
        other_weights = _other_weights_model(task, ctx, seed)
    controls = _run_controls(ctx, seed, task_inputs, other_weights, CONTROLS)
    del other_weights
    report = AuditReport(task.path, ctx.variant, _any_passed(controls), controls, weights=weights_digest(ctx))
    _CACHE[key] = report
    if persist is not None:
        persist.put(task, ctx, report)
    return report


WEIGHTS_DIGEST_MAX_BYTES = 256 << 20  # larger weights are not hashed: their served audit is checked again


def weights_digest(ctx: VariantContext) -> str:
    """A sha256 of what the reference was built with: its weights (parameters and buffers), its
    plain tensor attributes and its init arguments, with their names, dtypes and shapes; "" where
    these exceed ``WEIGHTS_DIGEST_MAX_BYTES`` (hashing them would cost what the check does).

    Why: a served audit is checked again under this evaluation's weights (check_these_weights),
    since a draw can make a task degenerate. Where nothing was drawn (KernelBench level 1's
    elementwise tasks have no weights) the check ran the served report's controls again under the
    same model, about 1.1 s of each 6.3 s evaluation of level 1's 6.4 GB tasks on an H200. An init
    argument whose repr differs between draws (a random scalar, an object named by its address)
    makes the digests differ, and the check runs."""
    tensors = list(ctx.weight_tensors) + list(ctx.attribute_tensors)
    tensors += [a for a in ctx.init_args if isinstance(a, torch.Tensor)]
    if sum(t.numel() * t.element_size() for t in tensors) > WEIGHTS_DIGEST_MAX_BYTES:
        return ""
    h = hashlib.sha256()
    init = [
        f"tensor {a.dtype} {tuple(a.shape)}" if isinstance(a, torch.Tensor) else repr(a)
        for a in ctx.init_args
    ]
    h.update(repr((ctx.weight_names, ctx.attribute_names, init)).encode())
    for t in tensors:
        flat = t.detach().reshape(-1).contiguous().cpu()
        h.update(f"{flat.dtype} {tuple(t.shape)}".encode())
        h.update(flat.view(torch.uint8).numpy())  # its buffer, not a copy of it
    return h.hexdigest()


def check_these_weights(
    task: Task, ctx: VariantContext, seed: int, task_inputs: list[Any] | None = None
) -> AuditReport:
    """The controls of :data:`WEIGHTS_CONTROLS` under `ctx`'s weights (this evaluation's), on the
    audit's distributions, judged by the audit's own rule (each must be rejected on at least one).
    Run when the task's audit is served from an earlier evaluation, whose weights were drawn from
    another seed. Its cost is, a distribution, one case's reference and oracle and one more
    reference run."""
    controls = _run_controls(ctx, seed, task_inputs, None, WEIGHTS_CONTROLS)
    return AuditReport(task.path, ctx.variant, _any_passed(controls), controls, these_weights=True)


def _run_controls(
    ctx: VariantContext,
    seed: int,
    task_inputs: list[Any] | None,
    other_weights: torch.nn.Module | None,
    only: tuple[str, ...],
) -> tuple[Control, ...]:
    """The controls in `only` on every audit distribution (the "task" one starting from
    `task_inputs` where given), one Control a name in report order: rejected if it was on any."""
    results: dict[str, list[tuple[bool, float, str]]] = {}
    for i, dist in enumerate(AUDIT_DISTRIBUTIONS):
        given = task_inputs if dist == "task" else None
        _audit_distribution(ctx, dist, seed + i, other_weights, results, given, only)
    return tuple(
        Control(
            name, any(ok for ok, _, _ in rs), max(e for _, e, _ in rs), next((n for _, _, n in rs if n), "")
        )
        for name, rs in sorted(results.items(), key=lambda kv: CONTROLS.index(kv[0]))
    )


def _any_passed(controls: tuple[Control, ...]) -> bool:
    """Degenerate: a control that should have failed the comparison passed it."""
    return any(not c.failed_as_it_should for c in controls)


def _audit_distribution(
    ctx: VariantContext,
    dist: str,
    seed: int,
    other_weights: torch.nn.Module | None,
    results: dict[str, list[tuple[bool, float, str]]],
    given: list[Any] | None = None,
    only: tuple[str, ...] = CONTROLS,
) -> None:
    """The controls named in `only` on one distribution, each compared and freed before the next is
    made: at the published sizes of KernelBench's level 1 (6.4 GB a tensor) the audit holds the
    case's inputs, reference and oracle, plus one control at a time. Nothing for an output that is
    not a float."""
    args = list(given) if given is not None else make_inputs(ctx, dist, seed, on_device=True)
    ref, orc = reference_and_oracle(ctx, args)
    r, o = ref[0], orc[0]
    del ref, orc  # other outputs (and arguments updated in place) are not audited
    if not r.is_floating_point():
        return
    tol = tolerance_for(r, o, ctx.dtype, ctx.noise)

    def record(name: str, candidate: torch.Tensor | None, note: str = "") -> None:
        if candidate is None:
            results.setdefault(name, []).append((True, 0.0, note or "not applicable"))
            return
        with steps.step(name):
            cmp = compare(candidate.to(r.device).to(r.dtype), o, r, tol)
        results.setdefault(name, []).append((not cmp.passed, cmp.rel_norm_err, note))

    record("zeros", torch.zeros_like(r))  # a temporary: freed when record returns
    if r.numel() > 1:
        record("mean", torch.full_like(r, float(r.float().mean())))
    else:  # a scalar (a loss) is its own mean: the control says nothing there
        record("mean", None, "a single-element output is its own mean")
    same = [
        a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel() == r.numel()
    ]
    note = "" if same else "no input of the output's size"
    record("passthrough", same[0].reshape(r.shape) if same else None, note)
    del same
    if "other_weights" in only:
        if other_weights is not None:
            with steps.step("other_weights"):
                out = run_model(other_weights, to_device(args, ctx.device), ctx.precision, ctx.inplace)[0]
            record("other_weights", out)
            del out
        else:
            record("other_weights", None, "the model has no floating parameters")
    if "bf16_reference" in only and ctx.precision == "fp32":
        with steps.step("bf16_reference"):
            low, note = _bf16_reference(ctx, args)
        record("bf16_reference", low, note)
        del low
    del args  # the other seed's inputs take their place
    with steps.step("other_seed"):
        other_args = make_inputs(ctx, dist, seed + 7919, on_device=True)
        other = run_model(ctx.reference, to_device(other_args, ctx.device), ctx.precision, ctx.inplace)[0]
    del other_args
    record("other_seed", other)


def _bf16_reference(ctx: VariantContext, args: list[Any]) -> tuple[torch.Tensor | None, str]:
    """The reference's first output in bf16 (it must fail an fp32 contract), or why there is none."""
    try:
        low = lower_precision_outputs(ctx, args, "bf16")
    except torch.OutOfMemoryError:
        raise  # never a missing control for want of memory
    except Exception as exc:  # noqa: BLE001 - a model that cannot run in bf16 has no bf16 control
        return None, f"the bf16 reference could not run: {type(exc).__name__}"
    return (low[0] if low else None), ""


def _other_weights_model(task: Task, ctx: VariantContext, seed: int) -> torch.nn.Module | None:
    if not any(p.is_floating_point() for p in ctx.reference.parameters()):
        return None
    seed = (ctx.init_seed + 104729) & 0x7FFFFFFF
    # get_init_inputs() again under the other seed: a Model whose weights come from tensors it is
    # given gets other ones too (with the same arguments its weights would be the reference's)
    init_args = init_inputs(task, ctx.module, seed)
    return build_reference(task, ctx.module, init_args, ctx.device, ctx.mode, seed)


def audit_task(task: Task, device: torch.device, variants: tuple[str, ...], seed: int) -> list[AuditReport]:
    reports = []
    for v in variants:
        ctx = build_variant(task, v, device, task.meta.mode, seed & 0x7FFFFFFF)
        reports.append(audit_variant(task, ctx, seed))
    return reports
