"""``kernelproof serve``: the evaluator as an HTTP reward service, registered by ``kernelproof.cli``.

A thin layer (house rule 10): it reads the options into a :class:`~kernelproof.serve.config.ServeConfig`
and runs :func:`kernelproof.serve.listener.serve` until stopped. docs/serve.md shows the endpoints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelproof.commands.cli_options import (
    Address,
    Baselines,
    BuildCacheOpt,
    BuildWorkers,
    CorrectnessOnly,
    CpuThreads,
    Db,
    Device,
    EvaluationTimeout,
    Executor,
    MaxRounds,
    PerDevice,
    Policy,
    Seed,
    SeedsPerCase,
    ShapeVariants,
    TimeBudget,
    Timeout,
    TimeWhenBusy,
    eval_options,
)
from kernelproof.errors import UsageError
from kernelproof.rewards import RewardWeights

# The verb's own options (the shared ones: commands/options.py), in the order --help lists them.
Tasks = Annotated[
    list[Path],
    typer.Option(
        "--tasks",
        help="A folder of tasks served by id (repeatable): suite/, a prepared KernelBench folder, any folder.",
    ),
]
Host = Annotated[
    str,
    typer.Option("--host", help="Address to bind (loopback by default; any other needs --token-file)."),
]
Port = Annotated[int, typer.Option("--port", help="Port to bind (0: any free one, printed on stdout).")]
TokenFile = Annotated[
    Path | None,
    typer.Option("--token-file", help="A file holding the bearer token every request must carry."),
]
TrustClientTasks = Annotated[
    bool,
    typer.Option(
        "--trust-client-tasks",
        help="Accept a client's own reference source (it runs in the trusted parent): only for clients you trust.",
    ),
]
JobsPerSlot = Annotated[
    int,
    typer.Option(
        "--jobs-per-slot",
        help="Local executor: jobs taken at once for each of a device's --per-device slots "
        "(a job waiting for its build or a large task's memory holds no slot).",
    ),
]
QueueLimit = Annotated[int, typer.Option("--queue-limit", help="Jobs queued or running before 429.")]
MaxBodyBytes = Annotated[int, typer.Option("--max-body-bytes", help="Largest request body (413 above).")]
RaySlots = Annotated[
    int, typer.Option("--ray-slots", help="Ray: evaluations in flight (0: the cluster's slots).")
]
StateDir = Annotated[
    Path | None,
    typer.Option("--state-dir", help="Where the job book lives (default: beside the store)."),
]
RewardCorrect = Annotated[float, typer.Option("--reward-correct", help="Weight of a pass (docs/rewards.md).")]
RewardSpeed = Annotated[float, typer.Option("--reward-speed", help="Weight of the speed term.")]
RewardCoverage = Annotated[float, typer.Option("--reward-coverage", help="Weight of the coverage term.")]
RewardSpeedCap = Annotated[
    float, typer.Option("--reward-speed-cap", help="Lower-bound speedup earning the whole speed term.")
]


def serve_command(
    ctx: typer.Context,
    tasks: Tasks,
    host: Host = "127.0.0.1",
    port: Port = 8000,
    token_file: TokenFile = None,
    trust_client_tasks: TrustClientTasks = False,
    per_device: PerDevice = 1,
    jobs_per_slot: JobsPerSlot = 2,
    queue_limit: QueueLimit = 256,
    max_body_bytes: MaxBodyBytes = 1_000_000,
    executor: Executor = "local",
    address: Address = None,
    ray_slots: RaySlots = 0,
    state_dir: StateDir = None,
    reward_correct: RewardCorrect = 0.5,
    reward_speed: RewardSpeed = 1.0,
    reward_coverage: RewardCoverage = 0.5,
    reward_speed_cap: RewardSpeedCap = 4.0,
    time_budget: TimeBudget = 20.0,
    max_rounds: MaxRounds = 50,
    seed: Seed = None,
    time_when_busy: TimeWhenBusy = False,
    device: Device = "auto",
    baselines: Baselines = "eager",
    correctness_only: CorrectnessOnly = False,
    seeds_per_case: SeedsPerCase = 2,
    shape_variants: ShapeVariants = "probe",
    policy: Policy = None,
    cpu_threads: CpuThreads = 1,
    timeout: Timeout = 600.0,
    evaluation_timeout: EvaluationTimeout = 3600.0,
    db: Db = None,
    build_cache: BuildCacheOpt = None,
    build_workers: BuildWorkers = 0,
) -> int:
    """Serve verdicts, rewards and feedback over HTTP to RL trainers (docs/serve.md)."""
    from kernelproof.preflight import checked_options, require_extra

    require_extra("serve", "starlette", "uvicorn")
    from kernelproof.serve.config import ServeConfig, read_token
    from kernelproof.serve.listener import serve
    from kernelproof.store import db_path

    options = checked_options(eval_options(ctx.params))
    store = db_path(options.db)
    if state_dir is None:
        if store is None:
            raise UsageError("with no store (--db ''), give --state-dir for the job book")
        state_dir = Path(store).parent / "serve"
    try:
        weights = RewardWeights(reward_correct, reward_speed, reward_coverage, reward_speed_cap)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    config = ServeConfig(
        task_dirs=tuple(tasks),
        options=options,
        state_dir=state_dir,
        host=host,
        port=port,
        token=read_token(token_file) if token_file is not None else None,
        trust_client_tasks=trust_client_tasks,
        max_body_bytes=max_body_bytes,
        queue_limit=queue_limit,
        jobs_per_slot=jobs_per_slot,
        executor=executor,
        address=address,
        ray_slots=ray_slots,
        weights=weights,
    )
    serve(config)
    return 0
