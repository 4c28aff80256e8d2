"""benchmarks/service_throughput.py: the candidate set through ``kernelproof serve`` (issue 48).

The smoke run starts the real server and checks every verdict of the smoke set against the
manifest's expectation; the other tests check the benchmark's own reading and arithmetic without a
server. No timing is asserted: the machine's load decides the numbers.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "benchmarks" / "candidates" / "manifest.json"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    return importlib.import_module("service_throughput")


@pytest.mark.slow
@pytest.mark.skipif(not MANIFEST.is_file(), reason="the candidate set (benchmarks/candidates) is not here")
def test_the_smoke_set_through_the_service_gets_every_expected_verdict(tmp_path):
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "service_throughput.py"), "--smoke", "--passes", "cold",
         "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    doc = json.loads((tmp_path / "service-throughput.json").read_text())
    assert doc["schema"] == "kernelproof.service-throughput/1"
    (only,) = doc["runs"]
    smoke = json.loads(MANIFEST.read_text())["smoke"]
    want = sum(len(group["candidates"]) for group in smoke) + 1  # and the A/A copy
    assert len(only["rows"]) == want
    assert [r for r in only["rows"] if r["expected"] is not True] == [], run.stdout[-3000:]
    assert doc["all_expected"] and run.returncode == 0, run.stdout[-3000:]
    assert only["busy_share"] == "not measured (CPU)"
    by_level = only["latency_by_level"]  # the target is a warm level-1 candidate's p50
    assert set(by_level) == {"level1", "level2"} and sum(k["n"] for k in by_level.values()) == want
    # the server warmed its spare workers before it listened, and the pass says how long that took
    assert only["server_start_s"] > 0 and "spare worker(s) up" in only["server_warmed"], run.stdout[-3000:]
    assert "meta device ready in" in only["server_warmed"]
    assert f"server up in {only['server_start_s']} s before the wall" in run.stdout
    assert only["costs"]["steps_total_s"], "the cost table comes from the verdicts' step records"
    # the device's admission, sampled from the server's own gauges each second of the pass
    assert only["admission"]["samples"] > 0 and only["admission"]["mean_running"] > 0, only["admission"]
    sampled = [json.loads(x) for x in (tmp_path / "admission.jsonl").read_text().splitlines()]
    assert sampled and all(s["pass"] == "cold" and s["slots"] == 1 for s in sampled)
    assert "device: alone 0%" in run.stdout
    # each row keeps what its evaluation reserved; the CPU admits memory uncounted: no device floor
    assert any(r["reserved_bytes"] > 0 for r in only["rows"]), [r["reserved_bytes"] for r in only["rows"]]
    assert only["device_floor"]["applies"] is False and "device floor: none" in run.stdout
    # a row keeps why a verdict is what it is beyond its codes: its flags and a withheld speed claim
    assert all(isinstance(r["flags"], list) and isinstance(r["speed_withheld"], str) for r in only["rows"])
    assert any(r["flags"] for r in only["rows"]), [r["flags"] for r in only["rows"]]
    assert all(len(line) <= 80 for line in run.stdout.splitlines() if not line.startswith("written:"))


def _write_manifest(tmp_path: Path) -> Path:
    (tmp_path / "a").mkdir()
    for name in ("honest", "wrong"):
        (tmp_path / "a" / f"{name}.py").write_text(f"# {name}\n")
    doc = {
        "schema": "kernelproof.candidates/1",
        "tasks": {},
        "smoke": [{"task_file": "7_Op.py", "candidates": ["level1/7_Op/honest", "level1/7_Op/wrong"]}],
        "candidates": [
            {"id": "level1/7_Op/honest", "task": "level1/7_Op.py", "file": "a/honest.py", "kind": "honest_triton",
             "expect": {"gpu": {"verdict": "pass", "codes": []}, "cpu": {"verdict": "pass", "codes": []}}},
            {"id": "level1/7_Op/wrong", "task": "level1/7_Op.py", "file": "a/wrong.py", "kind": "wrong_math",
             "expect": {"gpu": {"verdict": "fail", "codes": ["mismatch", "nonfinite"]}, "cpu": None}},
        ],
    }  # fmt: skip
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_manifest_reader_names_tasks_as_the_server_does_and_takes_the_devices_expectation(
    bench, tmp_path
):
    path = _write_manifest(tmp_path)
    gpu = bench.read_manifest(path, smoke=False, device="cuda")
    assert [(c.task, c.kind, c.source) for c in gpu] == [
        ("level1/7_Op", "honest_triton", "# honest\n"),
        ("level1/7_Op", "wrong_math", "# wrong\n"),
    ]
    assert gpu[1].expect == {"verdict": "fail", "codes": ["mismatch", "nonfinite"]}
    smoke = bench.read_manifest(path, smoke=True, device="cpu")
    assert [c.task for c in smoke] == ["7_Op", "7_Op"]  # the smoke tasks are files named by their stems
    assert smoke[1].expect is None  # the CPU cannot show it: not checked


def test_a_verdict_matches_its_expectation_by_outcome_any_listed_code_and_every_flag(bench, tmp_path):
    wrong = bench.read_manifest(_write_manifest(tmp_path), smoke=False, device="cuda")[1]
    fail = {"verdict": "fail", "reasons": [{"code": "nonfinite"}], "flags": []}
    assert bench.expected(wrong, fail) is True
    assert bench.expected(wrong, fail | {"reasons": [{"code": "timeout"}]}) is False
    assert bench.expected(wrong, fail | {"verdict": "pass"}) is False
    flagged = bench.Candidate("x", "t", "k", "", {"verdict": "pass", "codes": [], "flags": ["plain-torch"]})
    assert bench.expected(flagged, {"verdict": "pass", "reasons": [], "flags": ["plain-torch: no kernel"]})
    assert not bench.expected(flagged, {"verdict": "pass", "reasons": [], "flags": []})


def test_the_aa_copy_differs_in_bytes_only_and_a_pair_beyond_three_percent_breaks_its_concurrency(
    bench, tmp_path
):
    honest = bench.read_manifest(_write_manifest(tmp_path), smoke=False, device="cuda")
    twin = bench.aa_pair(honest)
    assert twin.task == honest[0].task and twin.source != honest[0].source
    assert twin.source.startswith(honest[0].source)

    def row(task, speedup):
        return {"task": task, "kind": "honest_triton", "latency_s": 1.0, "seconds": 1.0, "stored": False,
                "built": False, "expected": True, "expect": None, "outcome": "pass", "codes": [],
                "speedup_eager": speedup, "steps": {}}  # fmt: skip

    close = bench._summary("warm", 2, [row("a", 2.00), row("a#aa", 2.05)], 10.0, "not measured (CPU)")
    assert close["aa"]["checked"] and close["aa"]["ok"]
    far = bench._summary("warm", 4, [row("a", 2.00), row("a#aa", 2.20)], 10.0, "not measured (CPU)")
    assert far["aa"]["checked"] and not far["aa"]["ok"]
    untimed = bench._summary("warm", 1, [row("a", None), row("a#aa", None)], 10.0, "not measured (CPU)")
    assert not untimed["aa"]["checked"] and untimed["unmeasured"] == []  # correctness only: nothing to say
    assert close["evaluations_per_gpu_hour"] == 720.0


def test_a_pass_whose_eager_baseline_was_dropped_is_listed_with_why(bench):
    """A pass is as expected with or without a speedup; one that was timed and lost its baseline is
    the gallery's and the A/A check's missing figure, and the report says so."""
    dropped = "baseline eager was dropped mid-run: a timed call raised OutOfMemoryError"
    rows = [
        {"task": "t/honest", "outcome": "pass", "speedup_eager": None, "flags": ["2 timed calls", dropped]},
        {
            "task": "t/withheld",
            "outcome": "pass",
            "speedup_eager": None,
            "speed_withheld": "timing_unconfirmed",
        },
        {"task": "t/fast", "outcome": "pass", "speedup_eager": 1.5, "flags": []},
        {"task": "t/wrong", "outcome": "fail", "speedup_eager": None, "flags": [dropped]},
    ]
    assert bench._unmeasured(rows) == [
        {"task": "t/honest", "why": dropped},
        {"task": "t/withheld", "why": "timing_unconfirmed"},
    ]


def test_a_row_keeps_the_baselines_lost_by_code_and_an_out_of_memory_message_whole(bench):
    """What the next look at a dropped baseline needs: its code from every timed shape, and the
    allocator's figures at the end of the flag (in use, free), not cut off."""
    oom = (
        "baseline eager was dropped mid-run: a timed call raised OutOfMemoryError: "
        + "x" * 300
        + " 2.1 GiB free"
    )
    verdict = {
        "verdict": "pass",
        "flags": [oom],
        "timing": {"shapes": [{"baselines_lost": {}}, {"baselines_lost": {"eager": "crash"}}]},
    }
    got = bench._row(bench.Candidate("t/honest", "t", "honest_triton", "", None), {"verdict": verdict}, 1.0)
    assert got["baselines_lost"] == {"eager": "crash"} and got["flags"] == [oom]
    untimed = bench._row(
        bench.Candidate("t/wrong", "t", "wrong_math", "", None), {"verdict": {"verdict": "fail"}}, 1.0
    )
    assert untimed["baselines_lost"] == {}


def test_percentiles_are_nearest_rank(bench):
    assert bench._pct([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert bench._pct([float(i) for i in range(1, 21)], 95) == 19.0
    assert bench._pct([], 95) == 0.0


def _row(task, speedup=None, outcome="pass"):
    return {"task": task, "kind": "honest_triton", "latency_s": 1.0, "seconds": 1.0, "stored": False,
            "built": False, "expected": True, "expect": None, "outcome": outcome, "codes": [],
            "speedup_eager": speedup, "steps": {}}  # fmt: skip


def test_parts_measured_in_separate_calls_merge_into_one_rate_over_their_summed_walls(bench, tmp_path):
    """Three answers in 10 s and one in 20 s: 4 answers in 30 s, 480 an hour (not the mean of the
    parts' rates); the busy share weighted by wall; overlapping parts refused."""
    one = bench._summary("cold", 4, [_row("t1/a", 2.0), _row("t1/a#aa", 2.02), _row("t1/b")], 10.0, 0.5)
    two = bench._summary("cold", 4, [_row("t2/a")], 20.0, 0.2)
    one["cut"], two["cut"] = False, True
    one["server_start_s"], two["server_start_s"] = 6.0, 7.5
    docs = [bench._document({"commit": "x"}, [one]), bench._document({"commit": "y"}, [two])]
    doc = bench.merged(docs)
    (run,) = doc["runs"]
    assert run["evaluations"] == 4 and run["wall_s"] == 30.0 and run["evaluations_per_gpu_hour"] == 480.0
    assert run["busy_share"] == pytest.approx((0.5 * 10 + 0.2 * 20) / 30)
    assert run["aa"]["checked"] and run["aa"]["ok"] and run["cut"] and run["parts"] == 2
    assert run["server_start_s"] == 13.5  # each part's server, outside the summed walls
    assert doc["best"]["cold"]["evaluations_per_gpu_hour"] == 480.0 and doc["settings"]["commit"] == [
        "x",
        "y",
    ]
    assert "measured in 2 parts; cut at the deadline: 4 of " in bench.terminal(doc)
    with pytest.raises(ValueError, match="overlap"):
        bench.merged([docs[0], docs[0]])
    other_candidate = bench._document({"commit": "z"}, [bench._summary("cold", 4, [_row("t1/c")], 5.0, 0.1)])
    with pytest.raises(ValueError, match="overlap"):  # one task in two parts, whatever its candidates
        bench.merged([docs[0], other_candidate])
    for i, d in enumerate(docs):
        (tmp_path / f"{i}.json").write_text(json.dumps(d))
    assert (
        bench.main(
            ["--merge", str(tmp_path / "0.json"), str(tmp_path / "1.json"), "--out", str(tmp_path / "m")]
        )
        == 0
    )
    assert json.loads((tmp_path / "m" / "service-throughput.json").read_text())["runs"][0]["parts"] == 2


def test_the_parts_of_the_set_split_its_tasks_with_every_level_in_each(bench):
    candidates = bench.read_manifest(MANIFEST, smoke=False, device="cuda")
    parts = [bench.part_of(candidates, f"{k}/2") for k in (1, 2)]
    tasks = [{c.task for c in p} for p in parts]
    assert not tasks[0] & tasks[1] and tasks[0] | tasks[1] == {c.task for c in candidates}
    assert sum(len(p) for p in parts) == len(candidates)
    for t in tasks:
        assert {x.split("/")[0] for x in t} == {"level1", "level2"}
    with pytest.raises(ValueError, match="K/N"):
        bench.part_of(candidates, "3/2")


def test_the_summary_names_evaluations_whose_large_tensors_took_host_memory(bench):
    """A run slowed by the machine (no device memory for the handoff's buffers) says which
    evaluations it was, so its rate is not read as the candidates' cost."""
    row = {"kind": "honest_cuda", "seconds": 1.0, "latency_s": 1.0, "stored": False, "expected": True}
    row |= {"outcome": "pass", "speedup_eager": 2.0, "built": False, "steps": {}, "codes": []}
    fell = "handoff_fell_back: 2 large tensors (12.8 GB) took host memory: no device memory"
    rows = [{**row, "task": "a/1", "flags": [fell]}, {**row, "task": "b/1", "flags": ["2 timed calls"]}]
    got = bench._summary("cold", 4, rows, 10.0, 0.5)
    assert got["handoff_fell_back"] == ["a/1"]
    assert "handoff fell back to host memory: 1 evaluations" in bench.terminal(
        {"runs": [got], "best": {}, "broken_concurrency": []}
    )


def test_the_admission_timeline_reads_the_services_gauges_and_says_where_the_device_stood(monkeypatch):
    """The gauges as the service writes them, read back for one device (``cuda`` names ``cuda:0``);
    the shares of the samples: alone, waiting for memory, nothing admitted; parts weighted by samples."""
    from kernelproof.executors.device_memory import MemoryState
    from kernelproof.executors.local import DeviceState
    from kernelproof.host.admission import SlotState
    from kernelproof.serve.prometheus import Metrics

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    timeline = importlib.import_module("_admission_timeline")
    page = Metrics().render(
        [
            DeviceState("cuda:0", SlotState(4, 1, 3, True), MemoryState(100, 90, 1, 2, 0)),
            DeviceState("cuda:1", SlotState(4, 4, 0, False), MemoryState(100, 10, 4, 0, 0)),
        ]
    )
    gauges = timeline.parse(page, "cuda")
    assert gauges == {
        "slots": 4, "running": 1, "standing_aside": 3, "alone": 1, "memory_capacity_bytes": 100,
        "memory_reserved_bytes": 90, "memory_holders": 1, "memory_waiting_arrive": 2, "memory_waiting_grow": 0,
    }  # fmt: skip
    assert timeline.parse(page, "cuda:1")["running"] == 4
    idle = {"running": 0, "standing_aside": 0, "alone": 0, "memory_holders": 0, "memory_capacity_bytes": 100,
            "memory_reserved_bytes": 0, "memory_waiting_arrive": 0, "memory_waiting_grow": 0}  # fmt: skip
    summary = timeline.summarize([gauges, gauges, idle, {**idle, "running": 2, "memory_holders": 2}])
    assert summary == {
        "samples": 4, "alone_share": 0.5, "memory_wait_share": 0.5, "nothing_admitted_share": 0.25,
        "mean_running": 1.0, "mean_standing_aside": 1.5, "mean_reserved_share": 0.45, "capacity_bytes": 100,
    }  # fmt: skip
    both = timeline.merged([summary, timeline.summarize([idle] * 4), {}])
    assert both["capacity_bytes"] == 100
    assert both["samples"] == 8 and both["alone_share"] == 0.25 and both["nothing_admitted_share"] == 0.625
    assert both["mean_reserved_share"] == pytest.approx(0.225, abs=1e-3)
    assert timeline.line(summary) == (
        "device: alone 50%, waiting for memory 50%, nothing admitted 25%; running 1.0, reserved 45% (4 s)"
    )
    assert timeline.summarize([]) == {"samples": 0} and timeline.line({"samples": 0}).endswith("not sampled")


def test_the_device_floor_adds_up_the_own_seconds_of_evaluations_too_large_to_run_beside_each_other(
    monkeypatch,
):
    """Two evaluations reserving more than half of 100 bytes can never hold the device together:
    their seconds less their waits (a wait nested in a wait counted once) bound the pass; the rest,
    and a row from the store, do not. 4 answers over a 10 s floor: at best 1,440 an hour."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    floor = importlib.import_module("_device_floor")
    big = {**_row("t/big"), "seconds": 9.0, "reserved_bytes": 60, "steps": {
        "setup": {"s": 5.0, "n": 1}, "setup/admission": {"s": 3.0, "n": 1},
        "setup/admission/lock_wait": {"s": 1.0, "n": 1},  # inside a wait: already counted
        "alone_wait": {"s": 1.0, "n": 1}, "correctness/device_wait": {"s": 0.5, "n": 1},
    }}  # fmt: skip
    assert floor.own_seconds(big) == 4.5
    other_big = {**_row("t/big2"), "seconds": 5.5, "reserved_bytes": 51}
    half = {**_row("t/half"), "seconds": 30.0, "reserved_bytes": 50}  # two of these fit together
    stopped = {**_row("t/stopped"), "seconds": 0.1, "reserved_bytes": 0}
    served = {**other_big, "task": "t/served", "stored": True}
    rows = [big, other_big, half, stopped, served]
    got = floor.floor(rows, 100, 20.0)
    assert got == {
        "applies": True, "capacity_bytes": 100, "exclusive": 2, "evaluations": 4, "floor_s": 10.0,
        "mean_own_s": 5.0, "floor_share_of_wall": 0.5, "ceiling_per_gpu_hour": 1440.0,
    }  # fmt: skip
    assert floor.line(got) == "floor: 2/4 need >1/2 device, 10 s own (50% of wall): at best 1,440/GPU-h"
    assert floor.floor(rows, 1000, 20.0)["exclusive"] == 0
    assert "none of 4" in floor.line(floor.floor(rows, 1000, 20.0))
    unsized = floor.floor(rows, None, 20.0)
    assert unsized["applies"] is False and "not counted" in floor.line(unsized)
    assert floor.exclusive({"task": "old row, no reservation"}, 100) is False


def test_a_row_keeps_the_memory_its_evaluation_reserved_and_the_merge_keeps_the_floor(bench):
    """The reservation a verdict's environment names (cases, timed rounds) is the row's; merged
    parts get one floor over their rows and summed walls, against the largest capacity sampled."""
    from types import SimpleNamespace

    c = SimpleNamespace(id="level1/7_Op/honest", kind="honest_triton", expect=None)
    memory = {"correctness_bytes": 90, "footprint_bytes": 120}
    verdict = {"verdict": "pass", "elapsed_s": 3.0, "environment": {"memory": memory, "steps": {}}}
    row = bench._row(c, {"state": "done", "verdict": verdict}, 4.0)
    assert row["reserved_bytes"] == 90 and row["timed_bytes"] == 120
    assert bench._row(c, {"state": "done", "verdict": {"verdict": "fail"}}, 1.0)["reserved_bytes"] == 0
    parts = []
    for task, wall in (("t1/a", 10.0), ("t2/a", 20.0)):
        run = bench._summary("cold", 4, [{**_row(task), "seconds": 6.0, "reserved_bytes": 90}], wall, 0.5)
        run["admission"] = {"samples": 3, "alone_share": 0, "memory_wait_share": 0,
                            "nothing_admitted_share": 0, "mean_running": 1, "mean_standing_aside": 0,
                            "mean_reserved_share": 0.5, "capacity_bytes": 100}  # fmt: skip
        parts.append(bench._document({"commit": "x"}, [run]))
    (merged,) = bench.merged(parts)["runs"]
    assert merged["device_floor"]["exclusive"] == 2 and merged["device_floor"]["floor_s"] == 12.0
    assert merged["device_floor"]["ceiling_per_gpu_hour"] == 600.0
    assert "floor: 2/2 need >1/2 device" in bench.terminal(bench.merged(parts))
