"""The verdict: the one language every stage of kernelproof shares.

One evaluation of a (task, solution) pair produces one :class:`Verdict`. It is decided in the
trusted parent (invariant I1) and serialised as a JSON document with a schema version, so stores,
reports, agents and RL trainers read the same thing. Records are frozen dataclasses with a unit in
every numeric name; there is no free-form metadata dict (docs/architecture.md, house rule 4).

Reason codes are stable: they may be added, never renamed or removed (I9). docs/verdict.md lists
each with the defence it belongs to.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from kernelproof import jsonsafe

# Version 2: non-finite numbers are the strings "inf", "-inf", "nan" (version 1 wrote null, which
# lost the figure), and a verdict served from the store says so (``stored``). Version 1 documents
# are still read.
SCHEMA = "kernelproof.verdict/2"
SCHEMA_V1 = "kernelproof.verdict/1"
READABLE_SCHEMAS = (SCHEMA, SCHEMA_V1)


class ReasonCode(str, enum.Enum):
    """Why a candidate was not accepted. Extend, never rename (I9)."""

    COMPILE_ERROR = "compile_error"  # the solution failed to import or build
    RUNTIME_ERROR = "runtime_error"  # construction or forward raised
    TIMEOUT = "timeout"  # the worker exceeded its time budget and was killed
    CRASH = "crash"  # the worker died (segfault, illegal memory access, OOM kill)
    MISSING_RESULT = "missing_result"  # the worker did not deliver a result it owed
    WRONG_SHAPE = "wrong_shape"  # output shape differs from the reference's
    WRONG_DTYPE = "wrong_dtype"  # output dtype differs from the reference's
    WRONG_TYPE = "wrong_type"  # output is not exactly torch.Tensor, or not materialised, or wrong device
    NONFINITE = "nonfinite"  # NaN/Inf where the reference is finite
    MISMATCH = "mismatch"  # values outside the precision contract's tolerance
    PRECISION_DOWNGRADE = "precision_downgrade"  # error consistent with a lower precision than allowed
    NONDETERMINISTIC = "nondeterministic"  # two runs of one case differ beyond tolerance
    INPUT_MUTATED = "input_mutated"  # the candidate changed its inputs
    OUTPUT_ALIASES_INPUT = "output_aliases_input"  # the output shares storage with an input
    STALE_OUTPUT = "stale_output"  # a timed call returned an output not computed from its inputs
    TIMING_TAMPER = "timing_tamper"  # reported times disagree with the parent's own clock
    THREAD_LEAK = "thread_leak"  # a call left threads running
    FORBIDDEN_CONSTRUCT = "forbidden_construct"  # a banned action (audit hook) or construct
    NO_CUSTOM_KERNEL = "no_custom_kernel"  # no GPU time in the submission's own kernels
    LOW_KERNEL_COVERAGE = "low_kernel_coverage"  # too little GPU time in the submission's kernels
    BELOW_PHYSICAL_FLOOR = "below_physical_floor"  # faster than the device can physically be
    DEGENERATE_TASK = "degenerate_task"  # the task fails its audit: it cannot tell right from wrong
    TASK_ERROR = "task_error"  # the task itself does not load or run
    FLAGS_CHANGED = "flags_changed"  # numeric flags (TF32, cuDNN) differ after the candidate ran
    BUILD_CACHE_TAMPER = "build_cache_tamper"  # the candidate wrote into the build cache
    SANITIZER_ERROR = (
        "sanitizer_error"  # compute-sanitizer found invalid accesses, races or uninitialised reads
    )
    INTERNAL_ERROR = "internal_error"  # kernelproof itself failed; the verdict says where (please report it)
    TOO_LARGE = "too_large"  # the task needs more GPU memory than the device has (never stored)
    SHAPE_SPECIALIZED = (
        "shape_specialized"  # passes the task's shapes, fails perturbed ones (--shape-variants auto)
    )
    HARNESS_HOOKED = "harness_hooked"  # a mode, aten override or hook left in the harness's torch calls
    ENVIRONMENT = "environment"  # the machine lacks what the solution needs (CUDA toolkit, device)
    PROTOCOL_VIOLATION = "protocol_violation"  # a worker sent bytes that break the protocol
    MACHINE_BUSY = "machine_busy"  # too busy to time: an error, never stored


class Outcome(str, enum.Enum):
    PASS = "pass"  # every case positively confirmed
    FAIL = "fail"  # the candidate was rejected (reasons say why)
    ERROR = "error"  # the task or harness could not produce a judgement


@dataclass(frozen=True)
class Reason:
    code: ReasonCode  # stable machine-readable code
    message: str  # one sentence a person (or an agent) can act on
    detail: str = ""  # optional evidence: a line number, a case id, a compiler excerpt
    # The candidate's worker found the exception's class (and every one it was raised from) to be
    # one no lack of device memory takes (a TypeError, an IndexError: kernelproof/worker/calls.py).
    # The parent's memory blame then leaves it the solution's (kernelproof/evaluate/memory_blame.py):
    # a word of the solution's process that can only file its own failure as its own. Not part of
    # the verdict's JSON; decides nothing else.
    memory_excluded: bool = field(default=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code.value, "message": self.message, "detail": self.detail}


@dataclass(frozen=True)
class FileRef:
    path: str  # path as given by the user
    sha256: str  # hash of the file's bytes
    backend: str = ""  # solutions: triton | cuda | native | torch ; tasks: ""


@dataclass(frozen=True)
class CaseResult:
    case_id: str  # "<shape>/<dist>/<seed-index>"
    shape: str  # name of the shape variant
    distribution: str  # input value distribution
    passed: bool  # positively confirmed
    max_abs_err: float  # worst |candidate - oracle|
    rel_norm_err: float  # ||candidate - oracle|| / ||oracle||
    tol_rel_norm: float  # normwise tolerance applied
    ref_rel_norm_err: float  # the reference's own normwise error against the oracle
    code: str = ""  # reason code when the case failed


@dataclass(frozen=True)
class Correctness:
    cases_run: int  # cases executed
    cases_passed: int  # cases positively confirmed
    worst_rel_norm_err: float  # worst normwise error over passed and failed cases
    worst_max_abs_err: float  # worst elementwise error
    tolerance: str  # human summary of the tolerance rule applied
    precision: str  # the precision contract (fp32, tf32, bf16, fp16)
    kernelbench_compatible: bool | None = (
        None  # would KernelBench's allclose rule accept it (None: not asked)
    )
    cases: tuple[CaseResult, ...] = ()  # per-case results
    # where the contract comes from: "declared" (the task's KERNELPROOF), "as written" (the dtypes
    # its get_inputs() and Model make), "flag" (--precision); "" in verdicts written before it existed
    precision_source: str = ""


@dataclass(frozen=True)
class TimeStats:
    n: int  # samples
    median_ms: float
    mean_ms: float
    max_ms: float
    min_ms: float
    iqr_ms: float  # interquartile range
    ci95_ms: tuple[float, float]  # bootstrap CI of the median
    outliers: int = 0  # samples beyond 1.5 IQR of the quartiles
    std_ms: float | None = None  # population standard deviation (KernelBench's "std"); None: not recorded


@dataclass(frozen=True)
class Speedup:
    baseline: str  # "eager", "compile:default", ...
    median: float | None  # median paired ratio baseline/candidate (>1: candidate faster)
    ci95: tuple[float, float] | None  # bootstrap CI of the median ratio
    geomean: float | None = None  # geometric mean of per-round ratios
    note: str = ""  # why it is missing, when it is
    # the paired per-round ratios baseline/candidate (each a round's mean of calls over its mean), in
    # round order: what ``median`` and ``ci95`` are computed from
    round_ratios: tuple[float, ...] = ()


@dataclass(frozen=True)
class ShapeTiming:
    shape: str  # shape variant name
    regime: str  # "cold" | "steady"
    clock: str  # how time was taken: "cuda-kineto-span", "cuda-event", "cpu-perf-counter"
    candidate: TimeStats
    baselines: dict[str, TimeStats]  # baseline name -> stats
    speedups: tuple[Speedup, ...]  # one per baseline, plus "best"
    rounds: int  # interleaved rounds run
    stopped_by: str  # "ci_target" | "max_time" | "max_rounds"
    samples_ms: dict[str, list[float]] = field(default_factory=dict)  # raw samples, when asked for
    throttled_rounds: int = 0  # rounds with a throttle reason set
    # Per program, per call, median over batches: time outside the window on the parent's clock
    # ("outside") and the worker's own account of it by part. What the tamper cross-check weighs.
    overhead_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    # Baselines dropped from this shape's rounds, by the reason code of the batch that dropped them
    # ("crash": out of device memory or a lost context): the API runs such an evaluation again alone
    baselines_lost: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Timing:
    regime: str  # headline regime ("cold")
    device: str  # "cuda:0" | "cpu"
    shapes: tuple[ShapeTiming, ...]  # timed shape variants
    skipped: str = ""  # why timing was not run, when it was not


@dataclass(frozen=True)
class Roofline:
    flops: float | None  # useful floating-point operations of the headline shape
    min_bytes: float | None  # each input, parameter and output moved once
    floor_ms: float | None  # physical floor from datasheet peaks
    achieved_tflops: float | None
    achieved_tbps: float | None
    sol_fraction: float | None  # floor at measured ceilings / candidate time
    ceilings: str = ""  # where the ceilings came from


@dataclass(frozen=True)
class Coverage:
    custom_fraction: (
        float | None
    )  # share of the GPU work (durations above the launch floor) in the submission's kernels
    kernels: tuple[tuple[str, str, float], ...] = ()  # (name, origin, gpu_ms), top entries
    policy: str = "strict"  # the kernel policy that applied (the task's, or --policy)
    note: str = ""
    custom_fraction_raw: float | None = None  # the same share of whole durations (the floor not subtracted)
    floor_us: float | None = (
        None  # the device's launch floor subtracted from each kernel (None: not measured)
    )
    other_policy_fraction: float | None = None  # the deciding share under the other policy, for comparison
    # CPU: launches of the solution's own kernels in one forward, the fewer of the two counted (what
    # decides there: a time share means nothing under Triton's interpreter); None: not counted (GPU)
    custom_launches: int | None = None
    aten_outside: tuple[str, ...] = ()  # CPU: ATen ops the profiled forward ran outside those launches
    # CPU: launches run by Triton's interpreter in the profiled forward; None: not counted (GPU)
    interpreted_launches: int | None = None
    # CPU: launches of the profiled forward whose work was ATen's (a wrapper of torch ops, a Python
    # impl behind a declared operator, a binary calling ATen's kernels): never the solution's kernels
    aten_launches: int | None = None


SPEED_WITHHELD_INTERPRETER = "triton_interpreter"  # Claims.speed_withheld: interpreted launches were timed
# Claims.speed_withheld: the parent's gap check saw work outside the windows once, not confirmed
# (a busy machine timed anyway, or not seen again in a confirmation round: measure/parent_clock.py)
SPEED_WITHHELD_UNCONFIRMED = "timing_unconfirmed"
# Claims.speed_withheld: on the CPU the solution's only launches ran ATen's work (a wrapper of torch
# ops): the time is ATen's, not a kernel's (measure/accounting.py, aten_launches)
SPEED_WITHHELD_ATEN = "aten_launches"
REFERENCE_OPS_OUTSIDE = "reference_ops_outside_kernels"  # flag: the reference's own ATen ops ran outside


@dataclass(frozen=True)
class Claims:
    """What this verdict claims about the solution, and what it does not (docs/verdict.md).

    Why: on the CPU, Triton kernels run in an interpreter whose speed says nothing about them, and
    kernel coverage is not judged; a verdict that printed a speedup or a pass there without saying
    so would be read as a claim it cannot make. Correctness is always a claim.
    """

    speed: bool  # the speedups are a claim about the solution's code (False: withheld, null)
    speed_withheld: str = (
        ""  # why not, a stable code: "triton_interpreter", "timing_unconfirmed"; "" when a claim
    )
    coverage_judged: bool = True  # the solution's share of the work in its kernels was judged (GPU only)
    # The reference's own ATen ops the profiled forward ran outside the solution's launches (CPU)
    reference_ops_outside: tuple[str, ...] = ()
    note: str = ""  # the same in one sentence


@dataclass(frozen=True)
class BuildRecord:
    """How a CUDA or native solution was built before its worker imported it (docs/builds.md)."""

    backend: str  # cuda | native
    ok: bool  # the build succeeded
    cached: bool  # served from the build cache (no compiler ran for this evaluation)
    strategy: str  # how load_inline built: split+pch | split | torch | prebuilt; "" for native or none
    build_s: float  # the builder's wall time (0 for a cache hit)
    wait_s: float  # how long the evaluation waited for the build after its setup
    rebuilt: bool = False  # a cache entry was refused on its hash check and built again
    worker_compiled: bool | None = (
        None  # the worker reported compiling instead of loading; None: not reported
    )


@dataclass(frozen=True)
class Provenance:
    """Where the verdict's judged fields come from: the parent's own checks, or the worker's word.

    Why (I10): the candidate shares its process with the harness that measures it, and pure Python
    can read and change that harness's state (docs/threat-model.md). What the worker reports is
    checked for form (kernelproof/wire/schemas.py) and cross-checked where the parent can, but
    it is evidence, never fact; a reader of the verdict must be able to tell which is which.
    """

    checked: tuple[str, ...]  # verdict fields the parent established itself (its comparisons, its clock)
    reported: tuple[str, ...]  # verdict fields as the candidate's worker reported them


@dataclass(frozen=True)
class Stored:
    """Set on a verdict the store answered with: it was decided earlier, not by this request.

    Why: a stored verdict must not pass for a fresh one (issue 19), so its text and JSON say when
    it was decided, how long that took, and under which conditions (time limits and per_device: a
    ``timeout`` or ``crash`` is served only under conditions as hard: a verdict that ran out of
    20 s says nothing about 600 s).
    """

    at: str  # ISO time the stored evaluation was decided
    elapsed_s_then: float  # that evaluation's wall time
    limits_then: dict[str, float] = field(default_factory=dict)  # its time limits and per_device, by option
    # History only: where the bytes were when they were first judged. The verdict's own task and
    # solution paths are the ones this request named (a verdict belongs to bytes, not to a path).
    task_path_then: str = ""
    solution_path_then: str = ""


@dataclass(frozen=True)
class Verdict:
    verdict: Outcome
    reasons: tuple[Reason, ...]
    task: FileRef
    solution: FileRef
    correctness: Correctness | None
    timing: Timing | None
    speedup: dict[str, Speedup]  # per baseline and "best"; headline geomean over timed shapes
    roofline: Roofline | None
    coverage: Coverage | None
    environment: dict[str, Any]  # device, versions, flags, seeds
    reward: float  # 0 unless pass, else max(0, lower CI bound of log speedup over the best baseline)
    flags: tuple[str, ...] = ()  # non-fatal observations (plain-torch solution, dropout, ...)
    settings: dict[str, Any] = field(default_factory=dict)  # what was asked for (device, seed, ...)
    elapsed_s: float = 0.0  # wall time of the evaluation (of the store's answer, when ``stored``)
    created_at: str = ""  # ISO time the verdict was decided
    build: BuildRecord | None = None  # CUDA and native solutions: how the build went
    stored: Stored | None = None  # set when the store answered with an earlier evaluation's verdict
    claims: Claims | None = None  # what the verdict claims (None: written before it existed, or not timed)
    provenance: Provenance | None = None  # parent-checked and worker-reported fields (absent before)
    schema: str = SCHEMA

    @property
    def passed(self) -> bool:
        return self.verdict is Outcome.PASS

    @property
    def codes(self) -> list[str]:
        return [r.code.value for r in self.reasons]

    def to_json(self) -> dict[str, Any]:
        """The JSON document: non-finite numbers as "inf", "-inf", "nan" (kernelproof/jsonsafe.py)."""
        return jsonsafe.encode(self)

    def dumps(self, indent: int | None = 2) -> str:
        return jsonsafe.dumps(self.to_json(), indent=indent)


def compute_reward(outcome: Outcome, best: Speedup | None) -> float:
    """The scalar for RL: 0 unless pass, else max(0, log of the lower CI bound of the best speedup).

    Why the lower bound: a noisy or lucky speedup earns nothing it cannot show with 95%
    confidence, and a slowdown earns 0 rather than a negative reward that would push a policy
    towards not answering at all.
    """
    if outcome is not Outcome.PASS or best is None or best.ci95 is None:
        return 0.0
    low = best.ci95[0]
    if low is None or low <= 0:
        return 0.0
    return max(0.0, math.log(low))


def from_json(doc: dict[str, Any]) -> Verdict:
    """Rebuild a :class:`Verdict` from its JSON document (the store, replay logs, certificates).

    Typed: every field is checked against its annotation, and the strings "inf", "-inf", "nan"
    become floats only where the schema says a number stands. A document that does not fit
    raises ``ValueError`` naming the field (``correctness.cases[2].max_abs_err: ...``), so a
    malformed stored row is reported, never half-read. Version 1 documents are read too; the
    record built is of the current version.
    """
    if not isinstance(doc, dict):
        raise ValueError(f"a verdict document is a JSON object, not {type(doc).__name__}")
    if doc.get("schema") not in READABLE_SCHEMAS:
        raise ValueError(f"not a {SCHEMA} document (schema={doc.get('schema')!r})")
    verdict = _decode(Verdict, {k: v for k, v in doc.items() if k != "schema"}, "")
    return verdict


def numbers_decoded(doc: dict[str, Any]) -> dict[str, Any]:
    """A verdict document as plain data with its numeric fields decoded to floats (inf, nan).

    For readers of the raw document (reports): nothing else is checked or changed, and fields
    this version does not know are kept as they are.
    """
    return _numbers(Verdict, doc)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _decode(tp: Any, value: Any, path: str) -> Any:
    """``value`` as type ``tp``, or ValueError naming ``path``. None stands for a missing figure
    anywhere (version 1 wrote null for non-finite numbers)."""
    if value is None or tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for arm in (a for a in args if a is not type(None)):
            try:
                return _decode(arm, value, path)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(errors[-1] if errors else f"{path or 'document'}: no type fits {value!r}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"{path or 'document'}: expected an object, found {type(value).__name__}")
        hints = _hints(tp)
        kwargs = {
            f.name: _decode(hints[f.name], value[f.name], f"{path}.{f.name}".lstrip("."))
            for f in dataclasses.fields(tp)
            if f.name in value and f.init
        }
        missing = [
            f.name
            for f in dataclasses.fields(tp)
            if f.name not in kwargs
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
        ]
        if missing:
            raise ValueError(f"{path or 'document'}: missing {', '.join(missing)}")
        return tp(**kwargs)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{path}: expected a list, found {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{path}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ValueError(f"{path}: expected {len(args)} items, found {len(value)}")
        return tuple(_decode(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{path}: expected a list, found {type(value).__name__}")
        return [_decode(args[0], v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected an object, found {type(value).__name__}")
        return {str(k): _decode(args[1], v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise ValueError(f"{path}: {value!r} is not a known {tp.__name__}") from None
    if tp is float:
        try:
            return jsonsafe.number(value)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    if tp is bool or tp is str:
        if not isinstance(value, tp):
            raise ValueError(f"{path}: expected {tp.__name__}, found {type(value).__name__}")
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{path}: expected an integer, found {type(value).__name__}")
        return value
    return value


def _numbers(tp: Any, value: Any) -> Any:
    """Like :func:`_decode`, but lenient: numeric fields decoded where they can be, all else kept."""
    if value is None or tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in args if a is not type(None)]
        return _numbers(arms[0], value) if len(arms) == 1 else value
    if dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = _hints(tp)
        return {k: _numbers(hints[k], v) if k in hints else v for k, v in value.items()}
    if origin is tuple and isinstance(value, list):
        if len(args) == 2 and args[1] is Ellipsis:
            return [_numbers(args[0], v) for v in value]
        return [_numbers(a, v) for a, v in zip(args, value)] + value[len(args) :]
    if origin is list and isinstance(value, list):
        return [_numbers(args[0], v) for v in value]
    if origin is dict and isinstance(value, dict):
        return {k: _numbers(args[1], v) for k, v in value.items()}
    if tp is float:
        try:
            return jsonsafe.number(value)
        except ValueError:
            return value
    return value
