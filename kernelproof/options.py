"""What an evaluation is asked to do: one typed options object for every verb (docs/architecture.md, house rule 1)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# Baseline names accepted by --baselines. "compile" is shorthand for "compile:default".
BASELINE_NAMES = (
    "eager",
    "compile:default",
    "compile:max-autotune-no-cudagraphs",
    "compile:reduce-overhead",  # steady regime only
    "compile:max-autotune",  # steady regime only
)
STEADY_ONLY = ("compile:reduce-overhead", "compile:max-autotune")  # baselines of the steady regime


def cold_baselines(names: tuple[str, ...]) -> tuple[str, ...]:
    """The baselines timed in the cold regime, each in a worker of its own beside the candidate's."""
    return tuple(n for n in names if n not in STEADY_ONLY)


# Options that are time limits: kept out of the store's key and checked when a stored verdict is
# served instead (a timeout at a small limit is not a timeout at a larger one). A new per-phase
# limit joins this list.
# The time limits (recorded with a stored verdict; a timeout is served only under equal or smaller
# limits). Each worker step is bounded by its phase's limit and by timeout_s; the whole evaluation
# by evaluation_timeout_s. The phase a limit cut is named in the verdict.
TIME_LIMITS = ("timeout_s", "import_timeout_s", "case_timeout_s", "timing_timeout_s", "evaluation_timeout_s")
# The conditions a stored verdict was reached under and is checked against when served: the time
# limits, and how many evaluations shared the device (per_device). Kept out of the store's key so
# that a pass at per_device 4 answers a sweep resumed at 6; a timeout or crash is served only under
# conditions as hard or harder (store.served).
SERVING_CONDITIONS = (*TIME_LIMITS, "per_device")


@dataclass(frozen=True)
class TimingPolicy:
    """How one shape is timed: what ``measure/`` reads of an evaluation's options, and nothing else
    (the rounds, when to stop, what to keep, whether a busy machine is timed, the cores a timed call
    runs on). Derived from :class:`EvalOptions` (``options.timing``)."""

    time_budget_s: float = 20.0  # timing budget per timed shape (adaptive stopping caps here)
    min_rounds: int = 5  # interleaved rounds before the CI may stop timing
    max_rounds: int = 50  # hard cap on interleaved rounds
    calls_per_round: int = 5  # timed calls per program per round
    target_ci_halfwidth: float = 0.01  # stop when the speedup CI half-width is under 1 %
    keep_samples: bool = False  # put raw samples into the verdict JSON
    # time on a machine too busy to (measure/busy.py) and flag it, instead of the error machine_busy
    time_when_busy: bool = False
    cpu_threads: int = 1  # cores for the candidate's worker and, apart, for the baselines' (host/cpus.py)


@dataclass(frozen=True)
class TimeLimits:
    """The time limits of an evaluation (:data:`TIME_LIMITS`): each worker step bounded by its
    phase's limit and by ``timeout_s``, the whole evaluation by ``evaluation_timeout_s``. Derived from
    :class:`EvalOptions` (``options.limits``)."""

    timeout_s: float = 600.0
    import_timeout_s: float = 60.0
    case_timeout_s: float = 300.0
    timing_timeout_s: float = 600.0
    evaluation_timeout_s: float = 3600.0

    def step_limit(self, phase: str) -> float:
        """Seconds one worker step of `phase` (import | case | timing) may take: its limit, capped
        by timeout_s."""
        return min(float(getattr(self, f"{phase}_timeout_s")), float(self.timeout_s))


@dataclass(frozen=True)
class Placement:
    """Where an evaluation runs: its device, how many evaluations share it (their untimed stretches
    overlap, their timings never do: host/gate.py), and the cores of its workers. Derived from
    :class:`EvalOptions` (``options.placement``)."""

    device: str = "auto"
    per_device: int = 1
    cpu_threads: int = 1


def _record(cls, options: EvalOptions):
    return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class EvalOptions:
    """Everything an evaluation is asked, flat: the public type of the api and the store's key
    (:meth:`cache_key_fields`). The layers read the small records they need from it:
    :attr:`timing` (``measure/``), :attr:`limits` and :attr:`placement`."""

    device: str = "auto"  # "auto" | "cuda" | "cuda:N" | "cpu"
    baselines: tuple[str, ...] = ("eager",)  # baselines to time against
    seed: int | None = None  # None: a secret seed from the OS, recorded in the verdict afterwards
    correctness_only: bool = False  # skip timing
    # cores (and threads) for the candidate's worker and, apart from them, for the baselines'
    # (kernelproof.host.cpus)
    cpu_threads: int = 1
    # time on a machine too busy to (measure/busy.py) and flag it, instead of the error machine_busy
    time_when_busy: bool = False
    # time a CPU candidate whose kernels run in Triton's interpreter (its speed is no claim there,
    # so by default it is judged on correctness and its launch count alone: evaluate/timing.py)
    time_interpreted: bool = False
    kernelbench_compat: bool = False  # also report KernelBench's own allclose rule
    eval_mode: bool = False  # run reference and candidate in eval() mode
    # a reference whose output depends on the RNG (dropout in training mode): False evaluates it in
    # eval() mode with the flag random_reference; True refuses it as task_error
    refuse_random_reference: bool = False
    # "probe": the task's variants are the contract, perturbed size constants are also run and a
    # failure there is the flag shape_specialized; "auto": the perturbed shapes are in the contract
    # (a failure there fails, as shape_specialized); "task": the task's variants alone
    shape_variants: str = "probe"
    # the kernel policy the launch accounting applies: "strict" | "library-ok"; None: the task's own
    # (its KERNELPROOF metadata, "strict" when it names none)
    policy: str | None = None
    # the precision contract for everyone alike, "fp32" | "fp16" | "bf16" (KernelBench's --precision:
    # parameters and floating inputs cast to it); None: the task's declared one, else its own dtypes
    # (kernelproof/verify/contract.py)
    precision: str | None = None
    seeds_per_case: int = 2  # hidden seeds per (shape, distribution)
    distributions: tuple[str, ...] | None = None  # None: every distribution the domain allows
    timeout_s: float = 600.0  # ceiling on any one worker step (each phase's limit below is capped by it)
    # importing the solution and constructing ModelNew in the worker (its compilers' time is the
    # build's: a CUDA or native solution is built before, by the builder pool, under timeout_s)
    import_timeout_s: float = 60.0
    case_timeout_s: float = 300.0  # one correctness case, both runs (Triton's first compile included)
    timing_timeout_s: float = 600.0  # one timing request (a batch of timed calls, a profile, a fetch)
    evaluation_timeout_s: float = 3600.0  # the whole evaluation, wall clock
    time_budget_s: float = 20.0  # timing budget per timed shape (adaptive stopping caps here)
    min_rounds: int = 5  # interleaved rounds before the CI may stop timing
    max_rounds: int = 50  # hard cap on interleaved rounds
    calls_per_round: int = 5  # timed calls per program per round
    target_ci_halfwidth: float = 0.01  # stop when the speedup CI half-width is under 1 %
    keep_samples: bool = False  # put raw samples into the verdict JSON
    steady: bool = False  # also measure the steady (back-to-back) regime
    sanitize: bool = False  # run the first case under compute-sanitizer (GPU only)
    fresh: bool = False  # ignore a stored verdict for the same inputs and settings
    db: str | None = None  # SQLite path; None: the default under the user's home; "": no store
    # build cache root; None: $KERNELPROOF_CACHE_DIR or ~/.cache/kernelproof/builds
    build_cache: str | None = None
    build_workers: int = 0  # builder processes for CUDA and native solutions; 0: one per 4 cores, at least 1
    # evaluations in flight per device (evaluate_many): their untimed stretches overlap on the GPU,
    # their timings never do (host/gate.py)
    per_device: int = 1
    require_sandbox: bool = False  # refuse to evaluate unless every containment layer holds
    # a GPU solution that defines no kernel of its own is profiled on one call before any batch and
    # refused there (no_custom_kernel, evaluate/timing.py); False takes it through the timed rounds,
    # refused after them by the same coverage rule: the reference's re-run alone (evaluate/
    # memory_blame.py), which must reach the phase a candidate ran out of memory in
    refuse_plain_first: bool = True

    def replace(self, **changes: Any) -> EvalOptions:
        return dataclasses.replace(self, **changes)

    def cache_key_fields(self) -> dict[str, Any]:
        """Settings that change a verdict, JSON-ready (store keys, the verdict's ``settings``).

        Every option that can change the outcome is in the key. Left out, one by one:

        - ``timeout_s`` and the phase limits: not in the key but recorded with the stored row and
          checked when it is served (store.served): a ``timeout`` or ``crash`` verdict answers
          only equal or smaller limits, any other verdict answers whatever the limits. See
          :meth:`serving_conditions`.
        - ``fresh``, ``db``: whether and where the store is read; not what is measured.
        - ``build_cache``: where built extensions are kept. Entries are content-addressed and
          hash-checked, so any cache root yields the same build of the same source.
        - ``build_workers``: how many builder processes run at once; each build is the same.
        - ``require_sandbox``: whether to refuse running without every containment layer; a verdict
          that was produced at all was produced under the layers it records.
        - ``refuse_plain_first``: where a solution with no kernel of its own is refused
          (``no_custom_kernel``), at one profiled call or after the timed rounds; the outcome is the
          same. Off only for the reference's re-run alone, which is never stored.

        - ``per_device``: evaluations in flight on one device share its memory in their untimed
          stretches (never its timed ones), so an out-of-memory crash at ``per_device=2`` says
          nothing about one evaluation alone, while a pass or a mismatch is the same at any
          sharing. It is recorded with the row like the time limits, and a ``crash`` or
          ``timeout`` is served only to an equal or larger ``per_device``.
        """
        skip = {
            "fresh",
            "db",
            "build_cache",
            "build_workers",
            "require_sandbox",
            "refuse_plain_first",
            *SERVING_CONDITIONS,
        }
        out = {}
        for f in dataclasses.fields(self):
            if f.name not in skip:
                value = getattr(self, f.name)
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @property
    def timing(self) -> TimingPolicy:
        """How each shape is timed: all that ``measure/`` reads."""
        return _record(TimingPolicy, self)

    @property
    def limits(self) -> TimeLimits:
        """The time limits of each worker step and of the whole evaluation."""
        return _record(TimeLimits, self)

    @property
    def placement(self) -> Placement:
        """The device, its sharing and the workers' cores."""
        return _record(Placement, self)

    def step_limit(self, phase: str) -> float:
        """Seconds one worker step of `phase` (import | case | timing) may take: its limit, capped by
        timeout_s."""
        return self.limits.step_limit(phase)

    def time_limits(self) -> dict[str, float]:
        """The time limits of an evaluation."""
        return {name: float(getattr(self, name)) for name in TIME_LIMITS}

    def serving_conditions(self) -> dict[str, float]:
        """The time limits and per_device: recorded with a stored verdict, checked when it is
        served (see cache_key_fields)."""
        return {**self.time_limits(), "per_device": float(self.per_device)}


def normalize_baselines(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name == "compile":
            name = "compile:default"
        if name not in BASELINE_NAMES:
            raise ValueError(f"unknown baseline {raw!r}; choose from {', '.join(BASELINE_NAMES)}")
        if name not in out:
            out.append(name)
    return tuple(out)
