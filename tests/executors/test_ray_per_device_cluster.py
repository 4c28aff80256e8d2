"""``per_device`` 2 on a Ray cluster of two nodes on this machine (``ray.cluster_utils.Cluster``):
each node's CPU is a device with one actor evaluating two at once through one pool. A small
correctness-only batch with the real evaluator: every verdict right, none lost, and the log of
start and end events the actors wrote shows at most two in flight on each device."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kernelproof.options import EvalOptions
from kernelproof.verdict import Outcome

ray = pytest.importorskip("ray", reason='Ray is the optional extra: pip install -e ".[ray]"')
from ray.cluster_utils import Cluster  # noqa: E402

from kernelproof.executors.ray_executor import RayOptions, evaluate_many_ray  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tests" / "data" / "tasks" / "scale_relu.py"
GOOD = REPO / "tests" / "data" / "solutions" / "scale_relu_triton.py"
WRONG = REPO / "tests" / "serve" / "solutions" / "scale_relu_no_bias.py"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture
def two_nodes(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the nodes' workers import this checkout
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


def logged_evaluate(log: Path):
    """kernelproof.api.evaluate with the actor's pool, its start and end written to ``log`` under
    the device's identity (the actor's process and its pool)."""

    def evaluate(task, solution, options, pool):
        from kernelproof import api

        device = f"{os.getpid()}/{id(pool)}"
        for event in ("start", "end"):
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, f"{event} {device}\n".encode())
            finally:
                os.close(fd)
            if event == "start":
                verdict = api.evaluate(task, solution, options, pool=pool)
        return verdict

    return evaluate


def test_two_in_flight_per_device_on_two_nodes_every_verdict_right(tmp_path, two_nodes):
    pairs, expected = [], []
    for i, (source, outcome) in enumerate([(GOOD, "pass"), (WRONG, "fail")] * 3):
        solution = tmp_path / f"solution{i}.py"
        solution.write_text(source.read_text() + f"\n# copy {i}\n")  # six distinct evaluations
        pairs.append((TASK, solution))
        expected.append(outcome)
    log = tmp_path / "events"
    options = EvalOptions(
        device="cpu", correctness_only=True, seeds_per_case=1, shape_variants="task", per_device=2, db=""
    )
    verdicts = list(
        evaluate_many_ray(
            pairs, options, RayOptions(address=two_nodes.address), evaluate=logged_evaluate(log)
        )
    )
    got = {v.solution.path: v for v in verdicts}
    assert len(verdicts) == len(got) == 6  # none lost, none twice
    for (_, solution), outcome in zip(pairs, expected):
        v = got[str(solution)]
        assert v.verdict is Outcome(outcome), (solution.name, v.codes)
    running: dict[str, int] = {}
    most: dict[str, int] = {}
    for line in log.read_text().splitlines():
        event, device = line.split()
        running[device] = running.get(device, 0) + (1 if event == "start" else -1)
        most[device] = max(most.get(device, 0), running[device])
    assert set(running.values()) == {0}  # every start has its end
    assert len(most) == 2 and max(most.values()) <= 2  # one device per node, never three at once on one
