"""On Ray with ``per_device`` 2, the evaluations of one device pass through one gate: no timing
of ours shares the device with anything else of ours (the invariant the actor exists for).

The real evaluator runs in the device's actor; the actor's pool's gate is instrumented in place
to log, inside each hold, when a shared stretch (untimed GPU work) or an exclusive one (timing)
begins and ends. Replayed in order, the log must never show a timing beside another stretch.
The CPU case is slow (timed evaluations on the CPU); the GPU case is for a machine with one.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from kernelproof.options import EvalOptions

ray = pytest.importorskip("ray", reason='Ray is the optional extra: pip install -e ".[ray]"')

from kernelproof.executors.ray_executor import evaluate_many_ray  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tests" / "data" / "tasks" / "scale_relu.py"
GOOD = REPO / "tests" / "data" / "solutions" / "scale_relu_triton.py"

pytestmark = pytest.mark.xdist_group("ray")


def _log(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def gate_logged_evaluate(log: Path):
    """kernelproof.api.evaluate with the actor's pool, whose gates log their holds (in the actor)."""

    def instrument(pool) -> None:
        lock = pool.__dict__.setdefault("_gate_log_lock", threading.Lock())  # atomic: one lock per pool
        with lock:
            if getattr(pool, "_gate_logged", False):
                return
            pool._gate_logged = True
        real_gate = pool.gate
        seen: set[int] = set()

        def gate(device):
            g = real_gate(device)
            if id(g) not in seen:
                seen.add(id(g))
                where = f"{os.getpid()}/{device}"
                for name, mark in (("shared", "S"), ("exclusive", "X")):
                    held = getattr(g, name)

                    @contextmanager
                    def logged(held=held, mark=mark):
                        with held() as waited:
                            _log(log, f"{mark}+ {where} {threading.get_ident()}")
                            try:
                                yield waited
                            finally:
                                _log(log, f"{mark}- {where} {threading.get_ident()}")

                    setattr(g, name, logged)
            return g

        pool.gate = gate

    def evaluate(task, solution, options, pool):
        from kernelproof import api

        instrument(pool)
        return api.evaluate(task, solution, options, pool=pool)

    return evaluate


def assert_timing_alone(log: Path) -> dict[str, set[str]]:
    """Replay the holds: at every timing's start nothing else is held on its device; returns the
    threads seen on each device."""
    open_: dict[str, dict[str, int]] = {}
    threads: dict[str, set[str]] = {}
    timings = 0
    for line in log.read_text().splitlines():
        event, where, thread = line.split()
        held = open_.setdefault(where, {"S": 0, "X": 0})
        threads.setdefault(where, set()).add(thread)
        mark, edge = event[0], event[1]
        if edge == "+":
            if mark == "X":
                timings += 1
                assert held == {"S": 0, "X": 0}, f"a timing began beside {held} on {where}"
            else:
                assert held["X"] == 0, f"untimed work began during a timing on {where}"
            held[mark] += 1
        else:
            held[mark] -= 1
    assert timings >= 3 and all(h == {"S": 0, "X": 0} for h in open_.values())
    return threads


def run_timed_batch(tmp_path: Path, device: str, num_gpus: int) -> None:
    """Three timed evaluations on one device (one CPU, or one GPU) of a local Ray."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=1 if num_gpus == 0 else 2,
        num_gpus=num_gpus,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    try:
        log = tmp_path / "holds"
        pairs = []
        for i in range(3):
            solution = tmp_path / f"solution{i}.py"
            solution.write_text(GOOD.read_text() + f"\n# copy {i}\n")
            pairs.append((TASK, solution))
        options = EvalOptions(
            device=device,
            db="",
            seed=5,
            seeds_per_case=1,
            time_budget_s=0.5,
            min_rounds=3,
            max_rounds=4,
            time_when_busy=True,  # a busy machine is flagged in the verdict, not refused
            time_interpreted=True,  # on the CPU a Triton kernel runs interpreted: timed only when asked
            per_device=2,
        )
        verdicts = list(evaluate_many_ray(pairs, options, evaluate=gate_logged_evaluate(log)))
    finally:
        ray.shutdown()
    assert [v.verdict.value for v in verdicts] == ["pass"] * 3, [v.reasons for v in verdicts]
    assert all(v.timing is not None for v in verdicts)
    threads = assert_timing_alone(log)
    assert len(threads) == 1  # one device, one actor: its evaluations all passed through its gate


@pytest.mark.slow
def test_on_the_cpu_timings_in_one_device_actor_never_share_the_device(tmp_path):
    run_timed_batch(tmp_path, "cpu", num_gpus=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_timings_in_one_device_actor_never_share_the_gpu(tmp_path):
    run_timed_batch(tmp_path, "auto", num_gpus=1)
