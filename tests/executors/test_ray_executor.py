"""The Ray executor on a local CPU cluster: placement, the driver's store, retries, partial results.

The cluster declares two logical GPUs (Ray's accounting only; nothing touches a device), so the
one-evaluation-per-GPU rule is checked on a CPU machine. Evaluators here are fakes that return
real verdicts; the last test runs the real evaluator when it exists.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
import time
from pathlib import Path

import pytest

from kernelproof.options import EvalOptions
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode, Speedup, Verdict

ray = pytest.importorskip("ray", reason='Ray is the optional extra: pip install -e ".[ray]"')

from kernelproof.executors.ray_executor import RayOptions, evaluate_many_ray  # noqa: E402
from kernelproof.store import Store  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "report" / "data"


# One xdist worker runs the whole module (--dist loadgroup), so the local Ray starts once, not on each.
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local Ray for the module: 4 CPUs and 2 logical GPUs; this module's functions ship by value."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=4,
        num_gpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    yield
    ray.shutdown()


def node_verdict(task: Path, solution: Path, options: EvalOptions, note: str = "") -> Verdict:
    """A passing verdict built from the files the node actually received."""
    return Verdict(
        verdict=Outcome.PASS,
        reasons=(),
        task=FileRef(str(task), hashlib.sha256(Path(task).read_bytes()).hexdigest()),
        solution=FileRef(str(solution), hashlib.sha256(Path(solution).read_bytes()).hexdigest(), "triton"),
        correctness=None,
        timing=None,
        speedup={"eager": Speedup("eager", 2.0, (1.9, 2.1))},
        roofline=None,
        coverage=None,
        environment={
            "device": options.device,
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
            "note": note,
        },
        reward=0.0,
        settings={"device": options.device, "db": options.db},
    )


class MemoryStore:
    """The two calls the driver makes of a store, kept in a dict."""

    def __init__(self):
        self.rows: dict[str, Verdict] = {}
        self.puts: list[str] = []
        self.written: dict[str, tuple[str, dict | None]] = {}  # key -> (options_sha256, limits)

    def get(self, key):
        return self.rows.get(key)

    def put(self, key, verdict, *, options_sha256="", limits=None):
        self.rows[key] = verdict
        self.puts.append(verdict.solution.path)
        self.written[key] = (options_sha256, limits)


def make_pairs(tmp_path: Path, n: int) -> list[tuple[Path, Path]]:
    pairs = []
    for i in range(n):
        task, sol = tmp_path / f"task{i}.py", tmp_path / f"sol{i}.py"
        task.write_text(f"# task {i}\n")
        sol.write_text(f"# solution {i}\n")
        pairs.append((task, sol))
    return pairs


def test_yields_every_verdict_with_the_users_paths_and_stores_each(tmp_path):
    pairs = make_pairs(tmp_path, 4)
    store = MemoryStore()
    verdicts = list(evaluate_many_ray(pairs, EvalOptions(device="cpu"), store=store, evaluate=node_verdict))
    assert sorted(v.task.path for v in verdicts) == sorted(str(t) for t, _ in pairs)
    for v in verdicts:
        task = Path(v.task.path)
        assert v.task.sha256 == hashlib.sha256(task.read_bytes()).hexdigest()  # the node got the bytes
        assert v.settings == {"device": "cpu", "db": ""}  # the node's own store is off
    assert store.puts == [v.solution.path for v in verdicts]  # written as they arrived


def test_stores_as_the_local_executor_does_with_limits_and_never_a_machines_error(tmp_path):
    """One rule for every executor (kernelproof.store.keep): a verdict is stored with its settings'
    digest and the time limits it ran under, and machine_busy, too_large and environment (errors of
    the machine at the time, not of the bytes) are yielded but never stored."""
    from kernelproof.store import options_digest

    machine_errors = {"sol1.py": ReasonCode.MACHINE_BUSY, "sol2.py": ReasonCode.TOO_LARGE}
    machine_errors["sol3.py"] = ReasonCode.ENVIRONMENT

    def judged(task, solution, options):
        verdict = node_verdict(task, solution, options)
        code = {"sol1": "machine_busy", "sol2": "too_large", "sol3": "environment"}.get(Path(solution).stem)
        if code is None:
            return verdict
        return dataclasses.replace(verdict, verdict=Outcome.ERROR, reasons=(Reason(ReasonCode(code), "x"),))

    pairs = make_pairs(tmp_path, 4)
    store = MemoryStore()
    options = EvalOptions(device="cpu", timeout_s=123.0)
    verdicts = list(evaluate_many_ray(pairs, options, store=store, evaluate=judged))
    codes = {Path(v.solution.path).name: v.codes for v in verdicts}
    assert {n: c[0] for n, c in codes.items() if c} == {n: c.value for n, c in machine_errors.items()}
    assert [Path(p).name for p in store.puts] == ["sol0.py"]  # the machine's errors are never stored
    ((digest, limits),) = store.written.values()
    assert digest == options_digest(options) and limits == options.serving_conditions()
    assert limits["timeout_s"] == 123.0


def test_pairs_given_as_bytes_are_judged_on_those_bytes_and_no_file_is_read(tmp_path):
    """A service hands the driver the bytes it received (kernelproof.submission.Submitted): their
    paths only name them (none exists here), and the node judges exactly those bytes."""
    from kernelproof.submission import submitted_bytes

    task = submitted_bytes(str(tmp_path / "absent" / "task.py"), b"# task as posted\r\n")
    solution = submitted_bytes(str(tmp_path / "absent" / "sol.py"), "# solution, naïve\n".encode())
    store = MemoryStore()
    (verdict,) = evaluate_many_ray(
        [(task, solution)], EvalOptions(device="cpu"), store=store, evaluate=node_verdict
    )
    assert (verdict.task.path, verdict.solution.path) == (task.path, solution.path)
    assert (verdict.task.sha256, verdict.solution.sha256) == (task.sha256, solution.sha256)
    assert not (tmp_path / "absent").exists() and store.puts == [solution.path]


def test_one_evaluation_per_gpu_at_a_time(tmp_path):
    def timed(task, solution, options):
        start = time.time()
        time.sleep(0.4)
        return node_verdict(task, solution, options, note=f"{start},{time.time()}")

    verdicts = list(
        evaluate_many_ray(
            make_pairs(tmp_path, 6),
            EvalOptions(),
            RayOptions(resource="gpu"),
            store=MemoryStore(),
            evaluate=timed,
        )
    )
    spans = [(*map(float, v.environment["note"].split(",")), v.environment["visible"]) for v in verdicts]
    assert all(v.environment["device"] == "cuda" for v in verdicts)
    for start, _, _ in spans:  # at every start, what runs: at most two, on different GPUs
        running = [g for s, e, g in spans if s <= start < e]
        assert len(running) == len(set(running)) <= 2
    assert {g for _, _, g in spans} == {"0", "1"}


def test_resubmits_an_evaluation_whose_worker_died(tmp_path):
    marker = tmp_path / "died-once"

    def dies_once(task, solution, options):
        if task.name == "task1.py" and not marker.exists():
            marker.write_text("x")
            os._exit(1)  # the Ray worker process dies mid-evaluation
        return node_verdict(task, solution, options)

    store = MemoryStore()
    verdicts = list(
        evaluate_many_ray(make_pairs(tmp_path, 3), EvalOptions(device="cpu"), store=store, evaluate=dies_once)
    )
    assert marker.exists()
    assert sorted(Path(v.task.path).name for v in verdicts) == ["task0.py", "task1.py", "task2.py"]
    assert all(v.passed for v in verdicts) and len(store.puts) == 3


def test_keeps_partial_results_when_an_evaluation_keeps_dying(tmp_path):
    def always_dies(task, solution, options):
        if task.name == "task0.py":
            os._exit(1)
        return node_verdict(task, solution, options)

    db = tmp_path / "driver.sqlite"
    verdicts = list(
        evaluate_many_ray(
            make_pairs(tmp_path, 3),
            EvalOptions(device="cpu"),
            RayOptions(max_retries=1),
            store=Store(db),
            evaluate=always_dies,
        )
    )
    lost = [v for v in verdicts if not v.passed]
    assert len(verdicts) == 3 and len(lost) == 1
    assert lost[0].verdict is Outcome.ERROR and lost[0].codes == [ReasonCode.MISSING_RESULT.value]
    assert "lost 2 times" in lost[0].reasons[0].message
    docs = Store(db).query()
    assert sorted(Path(d["task"]["path"]).name for d in docs) == ["task1.py", "task2.py"]


def counting_evaluator(tmp_path: Path):
    """An evaluator that leaves one file per call in ``calls`` (the nodes share this filesystem)."""
    calls = tmp_path / "calls"
    calls.mkdir()

    def counted(task, solution, options):
        (calls / f"{task.name}-{time.time_ns()}").write_text("")
        return node_verdict(task, solution, options)

    return counted, calls


def test_a_rerun_evaluates_only_what_the_store_lacks_unless_fresh(tmp_path):
    counted, calls = counting_evaluator(tmp_path)
    store, pairs = MemoryStore(), make_pairs(tmp_path, 3)
    list(evaluate_many_ray(pairs[:2], EvalOptions(device="cpu"), store=store, evaluate=counted))
    again = list(evaluate_many_ray(pairs, EvalOptions(device="cpu"), store=store, evaluate=counted))
    assert len(again) == 3 and len(list(calls.iterdir())) == 3  # the interrupted batch resumes
    list(evaluate_many_ray(pairs[:1], EvalOptions(device="cpu", fresh=True), store=store, evaluate=counted))
    assert len(list(calls.iterdir())) == 4


def test_a_stored_harness_error_is_evaluated_again_as_the_local_executor_does(tmp_path):
    counted, calls = counting_evaluator(tmp_path)
    store, pairs = MemoryStore(), make_pairs(tmp_path, 2)
    list(evaluate_many_ray(pairs, EvalOptions(device="cpu"), store=store, evaluate=counted))
    key = next(k for k, v in store.rows.items() if v.task.path.endswith("task0.py"))
    failed = store.rows[key]
    store.rows[key] = dataclasses.replace(
        failed, verdict=Outcome.ERROR, reasons=(Reason(ReasonCode.INTERNAL_ERROR, "kernelproof failed"),)
    )
    again = list(evaluate_many_ray(pairs, EvalOptions(device="cpu"), store=store, evaluate=counted))
    assert all(v.passed for v in again)  # the harness error was not served
    assert sorted(p.name.split("-")[0] for p in calls.iterdir()) == ["task0.py", "task0.py", "task1.py"]


def test_an_exception_from_the_evaluator_is_a_harness_bug_and_propagates(tmp_path):
    def broken(task, solution, options):
        raise NotImplementedError("evaluate is not written yet")

    with pytest.raises(NotImplementedError):
        list(
            evaluate_many_ray(
                make_pairs(tmp_path, 1), EvalOptions(device="cpu"), store=MemoryStore(), evaluate=broken
            )
        )


def test_a_gpu_request_on_a_cluster_without_gpus_is_misuse(tmp_path, monkeypatch):
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 4.0})
    with pytest.raises(ValueError, match="no GPU"):
        list(
            evaluate_many_ray(
                make_pairs(tmp_path, 1),
                EvalOptions(),
                RayOptions(resource="gpu"),
                store=MemoryStore(),
                evaluate=lambda task, solution, options: pytest.fail("nothing may be evaluated"),
            )
        )


def test_end_to_end_with_the_real_evaluator_on_cpu():
    """The real evaluator (kernelproof.api.evaluate, as api.evaluate_many passes it) on a tiny Triton task."""
    from kernelproof import api

    # time_when_busy: the evaluation runs in a Ray worker, which the suite's switch for a loaded
    # machine does not reach; a busy machine is then flagged, as in every other test
    options = EvalOptions(
        device="cpu", time_budget_s=1.0, min_rounds=3, max_rounds=5, db="", time_when_busy=True
    )
    pair = (DATA / "scale_task.py", DATA / "scale_solution.py")
    (verdict,) = list(evaluate_many_ray([pair], options, evaluate=api.evaluate))
    assert verdict.task.path == str(pair[0]) and verdict.verdict in (Outcome.PASS, Outcome.FAIL)
    assert isinstance(verdict.reasons, tuple) and all(isinstance(r, Reason) for r in verdict.reasons)


# --- per_device above 1: one actor per device, its evaluations through one pool -----------------


def record(log: Path, event: str, device: str, name: str) -> None:
    """Append one event to a log the nodes share (O_APPEND: lines never interleave)."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{event} {device} {name}\n".encode())
    finally:
        os.close(fd)


def most_in_flight(log: Path) -> dict[str, int]:
    """Replay the log's start/end events in order: the most evaluations running at once per device."""
    running: dict[str, int] = {}
    most: dict[str, int] = {}
    for line in log.read_text().splitlines():
        event, device, _ = line.split()
        running[device] = running.get(device, 0) + (1 if event == "start" else -1)
        most[device] = max(most.get(device, 0), running[device])
    assert all(n == 0 for n in running.values()), "an evaluation started and never ended"
    return most


def pooled_evaluator(log: Path, hold_s: float = 0.0, dies: Path | None = None):
    """An evaluator as the actors call it (with the device's pool), logging its start and end under
    the actor's device identity: its process and the GPU Ray granted it."""

    def evaluate(task, solution, options, pool):
        device = f"{os.getpid()}/{os.environ.get('CUDA_VISIBLE_DEVICES', '')}/{id(pool)}"
        record(log, "start", device, task.name)
        if dies is not None and task.name == "task1.py" and not dies.exists():
            dies.write_text("x")
            os._exit(1)  # the actor's process dies with its evaluations in flight
        time.sleep(hold_s)
        record(log, "end", device, task.name)
        return node_verdict(task, solution, options, note=type(pool).__name__)

    return evaluate


@pytest.mark.slow  # actors start a torch-importing pool each
def test_per_device_runs_that_many_at_once_on_each_gpu_through_one_pool(tmp_path):
    log = tmp_path / "events"
    store = MemoryStore()
    verdicts = list(
        evaluate_many_ray(
            make_pairs(tmp_path, 8),
            EvalOptions(per_device=2),
            RayOptions(resource="gpu"),
            store=store,
            evaluate=pooled_evaluator(log, hold_s=1.0),
        )
    )
    assert sorted(Path(v.task.path).name for v in verdicts) == [f"task{i}.py" for i in range(8)]
    assert len(store.puts) == 8 and all(v.passed for v in verdicts)
    assert all(v.environment["device"] == "cuda" and v.environment["note"] == "LocalPool" for v in verdicts)
    most = most_in_flight(log)
    assert len(most) == 2  # one actor (process, GPU, pool) per logical GPU, every evaluation on one
    assert {d.split("/")[1] for d in most} == {"0", "1"}
    assert max(most.values()) == 2  # two at once on a GPU, never three


@pytest.mark.slow  # actors start a torch-importing pool each
def test_an_actor_that_dies_is_recreated_and_its_evaluations_run_again(tmp_path):
    log, marker = tmp_path / "events", tmp_path / "died-once"
    store = MemoryStore()
    verdicts = list(
        evaluate_many_ray(
            make_pairs(tmp_path, 6),
            EvalOptions(device="cpu", per_device=2),
            store=store,
            evaluate=pooled_evaluator(log, hold_s=0.3, dies=marker),
        )
    )
    assert marker.exists()
    assert sorted(Path(v.task.path).name for v in verdicts) == [f"task{i}.py" for i in range(6)]
    assert all(v.passed for v in verdicts) and len(store.puts) == 6  # none lost, none failed
    ended = {line.split()[1] for line in log.read_text().splitlines() if line.startswith("end")}
    started = {line.split()[1] for line in log.read_text().splitlines() if line.startswith("start")}
    assert len(started) == 5  # 4 CPUs: 4 actors, and the dead one's replacement
    assert ended < started  # the dead actor ended nothing; its evaluations finished on live ones


@pytest.mark.slow  # actors start a torch-importing pool each
def test_an_evaluation_that_keeps_killing_its_actor_is_kernelproofs_error_not_a_fail(tmp_path):
    def always_dies(task, solution, options, pool):
        if task.name == "task0.py":
            os._exit(1)
        return node_verdict(task, solution, options)

    store = MemoryStore()
    verdicts = list(
        evaluate_many_ray(
            make_pairs(tmp_path, 3),
            EvalOptions(device="cpu", per_device=2),
            RayOptions(max_retries=1),
            store=store,
            evaluate=always_dies,
        )
    )
    lost = [v for v in verdicts if not v.passed]
    assert len(verdicts) == 3 and len(lost) == 1
    assert lost[0].verdict is Outcome.ERROR and lost[0].codes == [ReasonCode.MISSING_RESULT.value]
    assert sorted(Path(p).name for p in store.puts) == ["sol1.py", "sol2.py"]  # the error is not stored
