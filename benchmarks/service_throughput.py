"""Evaluations per GPU-hour through ``kernelproof serve``, the path a trainer uses (issue 48).

Starts the real server as a subprocess for each concurrency (``--per-device`` 1, 2, 4, 6 by
default), sends the candidate set (benchmarks/candidates/manifest.json) to it with httpx in one
streamed batch, and reads each answer as it finishes. Every check stays on; timing against eager
is on unless ``--correctness-only`` (``--smoke`` implies it). Each concurrency runs twice:

- cold: a fresh build cache, a fresh results store, a fresh server;
- warm: the same build cache, a fresh results store (so that nothing is answered from the store)
  and a fresh server.

It reports evaluations per GPU-hour, p50 and p95 latency by kind of candidate (the evaluation's
own seconds and the seconds from the batch's submission), the GPU's busy share (NVML where it is
installed; "not measured" otherwise), the sweep's cost table built from each verdict's step
records (benchmarks/_costs.py: builds, setup, audit, correctness, timing, waits for memory), and
whether every verdict is the one the manifest expects.

The A/A check: the first honest candidate of the set is submitted a second time in the same batch,
its bytes changed by a trailing comment so that neither the store nor the in-flight deduplication
answers it from the first. Their speedups against eager must agree within 3 %; a concurrency
where they do not is reported as broken and left out of the headline figure. Without timing
(``--correctness-only``) the check has nothing to compare and says so.

    python benchmarks/service_throughput.py --smoke                       # CI: CPU, 12 candidates
    python benchmarks/service_throughput.py --tasks .kernelbench-prepared --device cuda
    python benchmarks/service_throughput.py --tasks DIR --per-device 2,4 --passes warm
    python benchmarks/service_throughput.py --tasks DIR --part 1/2 --out part1   # half the tasks (then 2/2)
    python benchmarks/service_throughput.py --merge part1/service-throughput.json part2/service-throughput.json

Writes ``service-throughput.json`` (schema ``kernelproof.service-throughput/1``) under $OUT (or
/tmp/kernelproof-bench) and prints an 80-column table.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _admission_timeline as timeline
import _device_floor as device_floor
from _common import ROOT, out_dir
from _costs import cost_table, row_steps

SCHEMA = "kernelproof.service-throughput/1"
MANIFEST = ROOT / "benchmarks" / "candidates" / "manifest.json"
AA_TOLERANCE = 0.03  # the A/A pair's speedups may differ by this share of each other
SHUFFLE_SEED = 48  # the order of each task's candidates in a batch: fixed, so passes compare
AA_SUFFIX = "\n# A/A copy: the same kernel under other bytes\n"


@dataclass(frozen=True)
class Candidate:
    """One entry of the manifest: what is sent, and the verdict it should get."""

    id: str
    task: str  # the task's id on the server
    kind: str
    source: str
    expect: dict[str, Any] | None  # {"verdict", "codes", "flags"} for this device; None: not checked


def read_manifest(path: Path, smoke: bool, device: str) -> list[Candidate]:
    """The candidates to send. With `smoke`, the manifest's smoke subset on its task files kept in
    the repository (their ids are the files' stems); otherwise every candidate, its task id being
    its KernelBench path without ``.py`` (as the server names a task under ``--tasks``)."""
    doc = json.loads(path.read_text())
    by_id = {c["id"]: c for c in doc["candidates"]}
    side = "cpu" if device == "cpu" else "gpu"
    picked: list[tuple[str, dict]] = []
    if smoke:
        for group in doc.get("smoke", []):
            stem = Path(group["task_file"]).stem
            picked += [(stem, by_id[i]) for i in group["candidates"]]
    else:
        picked = [(c["task"].removesuffix(".py"), c) for c in doc["candidates"]]
    out = []
    for task, c in picked:
        expect = c.get("expect") or {}
        if "verdict" not in expect:  # per device: {"gpu": {...}, "cpu": {...}}
            expect = expect.get(side)
        out.append(
            Candidate(c["id"], task, c.get("kind", ""), (path.parent / c["file"]).read_text(), expect or None)
        )
    return out


def part_of(candidates: list[Candidate], part: str) -> list[Candidate]:
    """The candidates of the K-th of N parts ("K/N") of the set's tasks: every N-th task in sorted
    order from the K-th, so that each part mixes the levels and sizes, and the parts split the set."""
    k, _, n = part.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise ValueError(f"--part is K/N with 1 <= K <= N, not {part!r}")
    tasks = sorted({c.task for c in candidates})
    mine = set(tasks[int(k) - 1 :: int(n)])
    return [c for c in candidates if c.task in mine]


def interleaved(candidates: list[Candidate]) -> list[Candidate]:
    """The set in rounds over its tasks (each task's first candidate, then each one's second, ...),
    each task's candidates in a fixed shuffled order: several tasks are in flight together, as in a
    training batch of many problems, and a pass cut at the deadline has judged every task and every
    kind alike rather than the manifest's first few (in the manifest's order, a cut pass on an H100
    judged only honest kernels, the slowest kind)."""
    by_task: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_task.setdefault(c.task, []).append(c)
    queues = list(by_task.values())
    shuffle = random.Random(SHUFFLE_SEED)
    for q in queues:  # each task's kinds in an order of their own: a cut pass sees every kind
        shuffle.shuffle(q)
    out: list[Candidate] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out += [q[i] for q in queues if i < len(q)]
    return out


def aa_pair(candidates: list[Candidate]) -> Candidate | None:
    """The A/A copy of the first honest candidate expected to pass (None where there is none)."""
    for c in candidates:
        if c.kind.startswith("honest") and c.expect and c.expect.get("verdict") == "pass":
            return Candidate(c.id + "#aa", c.task, c.kind, c.source + AA_SUFFIX, c.expect)
    return None


def expected(c: Candidate, verdict: dict[str, Any]) -> bool | None:
    """Whether the verdict is the one the manifest expects (None: the manifest expects nothing here).
    `codes`: any one of them among the verdict's codes; `flags`: each opens one of its flags."""
    if not c.expect:
        return None
    if verdict.get("verdict") != c.expect.get("verdict"):
        return False
    codes = {r.get("code") for r in verdict.get("reasons", [])}
    want = c.expect.get("codes") or []
    if want and not codes & set(want):
        return False
    flags = verdict.get("flags", [])
    return all(any(f.startswith(w) for f in flags) for w in c.expect.get("flags") or [])


# -- the server ---------------------------------------------------------------------------------
class Server:
    """``kernelproof serve`` as a subprocess of this one, on a free loopback port."""

    def __init__(self, args: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelproof.cli", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=ROOT,
        )
        self.log: list[str] = []
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._drain, args=(lines,), daemon=True).start()
        began = time.monotonic()
        deadline = began + 180
        self.warmed = ""  # what the server did before it listened (its line), outside the pass's wall
        while True:
            try:
                line = lines.get(timeout=1.0)  # short: a server that exits at once is seen at once
            except queue.Empty:
                line = ""
            if "kernelproof serve: warmed" in line:
                self.warmed = line.split("kernelproof serve: ", 1)[1].strip()
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].strip()
                self.start_s = round(time.monotonic() - began, 1)
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("kernelproof serve did not start:\n" + "".join(self.log[-40:]))

    def _drain(self, lines: queue.Queue[str]) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.log.append(line)
            lines.put(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class BusyShare:
    """The GPU's busy share over a pass, sampled through NVML every half second."""

    def __init__(self, device: str):
        self.samples: list[int] = []
        self.why = ""
        self._stop = threading.Event()
        self._handle = None
        if device == "cpu":
            self.why = "not measured (CPU)"
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            index = int(device.split(":", 1)[1]) if ":" in device else 0
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as e:  # noqa: BLE001 - no NVML: the share is not measured, the run goes on
            self.why = f"not measured (NVML: {type(e).__name__})"
            return
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        import pynvml

        while not self._stop.wait(0.5):
            self.samples.append(pynvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)

    def stop(self) -> float | str:
        self._stop.set()
        if not self.samples:
            return self.why or "not measured (no sample)"
        return round(statistics.fmean(self.samples) / 100, 3)


# -- one pass -----------------------------------------------------------------------------------
def one_pass(ns, candidates: list[Candidate], per_device: int, cache: Path, label: str) -> dict[str, Any]:
    """Start a server with a fresh store and the given build cache, send the whole set as one
    streamed batch, and read the answers as they finish. Each answer is appended to
    ``service-throughput.rows.jsonl`` as it arrives; past ``--deadline-s`` the pass is cut (the
    server stopped, the answers so far kept, the pass marked ``cut``)."""
    state = Path(tempfile.mkdtemp(prefix=f"service-throughput-{label}-"))
    args = [
        "--device", ns.device, "--per-device", str(per_device), "--db", str(state / "store.sqlite"),
        "--state-dir", str(state / "serve"), "--build-cache", str(cache), "--queue-limit", "4096",
    ]  # fmt: skip
    for t in ns.tasks:
        args += ["--tasks", str(t)]
    if ns.correctness_only:
        args.append("--correctness-only")
    args += ns.serve_arg
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    server = Server(args, env)
    busy = BusyShare(ns.device)
    rows: list[dict[str, Any]] = []
    prefilled = any(cache.iterdir()) if cache.is_dir() else False
    failure: list[BaseException] = []
    started = time.monotonic()
    sampled = timeline.AdmissionTimeline(
        server.url,
        ns.device,
        ns.out / "admission.jsonl",
        started,
        {"pass": label, "per_device": per_device},
    )
    reader = threading.Thread(
        target=_read_answers, args=(ns, server, candidates, label, started, rows, failure), daemon=True
    )
    try:
        reader.start()
        reader.join(timeout=None if ns.deadline is None else max(1.0, ns.deadline - time.monotonic()))
        cut = reader.is_alive()
        wall = time.monotonic() - started
    finally:
        share = busy.stop()
        device = sampled.stop()
        server.close()
        reader.join(timeout=30)
        shutil.rmtree(state, ignore_errors=True)
    if failure and not cut:
        raise RuntimeError(f"the {label} pass at {per_device} in flight failed") from failure[0]
    summary = _summary(label, per_device, list(rows), wall, share)
    summary["cut"] = cut
    summary["sent"] = len(candidates)
    summary["admission"] = device  # the device's gauges each second (_admission_timeline.py)
    summary["device_floor"] = device_floor.floor(summary["rows"], device.get("capacity_bytes"), wall)
    summary["builds_cached_before"] = prefilled  # a "cold" pass on a cache a former pass or call filled
    # the server's start to its listening line (spares started, the launch floor measured): once
    # per server, before the pass's wall begins; a trainer's long-lived service pays it once
    summary["server_start_s"] = server.start_s
    summary["server_warmed"] = server.warmed
    return summary


def _read_answers(ns, server: Server, candidates, label, started, rows, failure) -> None:
    """Send the batch on one stream and record each answer as it arrives (a thread of its own, so
    that the pass can be cut at the deadline)."""
    import httpx

    items = [{"task": c.task, "solution": c.source} for c in candidates]
    log = (ns.out / "service-throughput.rows.jsonl").open("a")
    try:
        with httpx.Client(base_url=server.url, timeout=None) as client:
            with client.stream("POST", "/v1/jobs/stream", json={"items": items}) as response:
                response.raise_for_status()
                lines = response.iter_lines()
                head = json.loads(next(lines))
                by_id = dict(zip(head["jobs"], candidates, strict=True))
                for line in lines:
                    if not line.strip():
                        continue
                    answer = json.loads(line)
                    row = _row(by_id[answer["id"]], answer, time.monotonic() - started)
                    rows.append(row)
                    log.write(json.dumps({"pass": label, **row}, default=str) + "\n")
                    log.flush()
                    if ns.verbose:
                        print(
                            f"  {label:5s} {row['task'][:44]:44s} {row['outcome']:5s} {row['seconds']:6.1f}s",
                            flush=True,
                        )
    except BaseException as e:  # noqa: BLE001 - the pass reports it (a cut pass ends here too)
        failure.append(e)
    finally:
        log.close()


def _row(c: Candidate, answer: dict[str, Any], arrived: float) -> dict[str, Any]:
    v = answer.get("verdict") or {}
    eager = (v.get("speedup") or {}).get("eager") or {}
    memory = (v.get("environment") or {}).get("memory") or {}
    return {
        "task": c.id,
        "kind": c.kind,
        "state": answer.get("state"),
        "outcome": v.get("verdict", answer.get("state", "")),
        "codes": [r.get("code") for r in v.get("reasons", [])],
        # the first reason's words, cut: what an unexpected verdict is, without the whole verdict
        "message": ((v.get("reasons") or [{}])[0].get("message") or "")[:400],
        "expected": expected(c, v),
        "expect": c.expect,
        "seconds": round(float(v.get("elapsed_s") or 0.0), 2),
        "latency_s": round(arrived, 2),
        "stored": bool(v.get("stored")),
        "speedup_eager": eager.get("median"),
        "speedup_eager_ci95": eager.get("ci95"),  # the bootstrap CI of the median, reported with it
        # why a passing verdict has no speedup (a withheld claim names itself here), cut
        "speed_withheld": ((v.get("claims") or {}).get("speed_withheld") or "")[:200],
        # cut long enough to keep an out-of-memory message's figures (in use, free, reserved)
        "flags": [str(f)[:600] for f in v.get("flags") or []][:12],
        "baselines_lost": _baselines_lost(v),
        "built": (v.get("build") or {}).get("cached") is False,
        "steps": row_steps(v.get("environment") or {}),
        # the device memory it reserved for its cases and for its timed rounds (0: none, stopped first)
        "reserved_bytes": int(memory.get("correctness_bytes") or 0),
        "timed_bytes": int(memory.get("footprint_bytes") or 0),
    }


def _baselines_lost(v: dict[str, Any]) -> dict[str, str]:
    """The baselines dropped from any timed shape's rounds, each with its batch's code (a crash:
    out of device memory, the case for running the evaluation again alone)."""
    lost: dict[str, str] = {}
    for shape in (v.get("timing") or {}).get("shapes") or []:
        lost.update(shape.get("baselines_lost") or {})
    return lost


def _unmeasured(rows: list[dict]) -> list[dict[str, str]]:
    """Passes that were timed and have no speedup against eager, with why: a withheld claim, or a
    baseline dropped from the rounds (its flag). A pass is as expected either way; these are the
    gallery's and the A/A check's missing figures (on an H200, every honest kernel of level 1's
    6.4 GB tasks, eager having run out of memory mid-run)."""
    out = []
    for r in rows:
        if r["outcome"] != "pass" or r["speedup_eager"] is not None:
            continue
        dropped = next((f for f in r.get("flags") or [] if f.startswith("baseline ") and "dropped" in f), "")
        why = r.get("speed_withheld") or dropped
        if why:
            out.append({"task": r["task"], "why": why[:160]})
    return out


def _summary(label: str, per_device: int, rows: list[dict], wall: float, share) -> dict[str, Any]:
    arrivals = {r["task"]: r["latency_s"] for r in rows}
    fresh = [r for r in rows if not r["stored"]]
    aa = [r for r in rows if r["task"].endswith("#aa")]
    aa_doc: dict[str, Any] = {"checked": False, "why": "no honest candidate expected to pass"}
    if aa:
        first = next((r for r in rows if r["task"] == aa[0]["task"][:-3]), None)
        a, b = (first or {}).get("speedup_eager"), aa[0]["speedup_eager"]
        if a is None or b is None:
            aa_doc = {"checked": False, "why": "no speedup against eager (correctness only, or not timed)"}
        else:
            diff = abs(a - b) / max(min(a, b), 1e-12)
            aa_doc = {
                "checked": True,
                "speedups": [a, b],
                "difference": round(diff, 4),
                "ok": diff <= AA_TOLERANCE,
            }
    return {
        "label": label,
        "per_device": per_device,
        "wall_s": round(wall, 2),
        "evaluations": len(fresh),
        # verdicts on merit; the rest are errors of the machine (too_large, machine_busy, ...)
        "judged": sum(1 for r in fresh if r["outcome"] in ("pass", "fail")),
        "evaluations_per_gpu_hour": round(len(fresh) / wall * 3600, 1) if wall > 0 else None,
        "busy_share": share,
        "builds": sum(1 for r in rows if r["built"]),
        "latency_by_kind": _latencies(rows),
        "latency_by_level": _latencies(rows, _level),
        "all_expected": all(r["expected"] is not False for r in rows),
        "unexpected": [
            {
                "task": r["task"],
                "got": [r["outcome"], r["codes"]],
                "expect": r["expect"],
                "message": r["message"],
            }
            for r in rows
            if r["expected"] is False
        ],
        "unmeasured": _unmeasured(rows),
        # evaluations whose large tensors took host memory where the device handoff was meant to
        # carry them (no device memory for the parent's buffers): slower for the machine's reasons
        "handoff_fell_back": [
            r["task"]
            for r in rows
            if any(str(f).startswith("handoff_fell_back") for f in r.get("flags") or [])
        ],
        "aa": aa_doc,
        "costs": cost_table(rows, wall, arrivals),
        "rows": rows,
    }


def _level(row: dict) -> str:
    """The KernelBench level of a row's task (``level1/19_ReLU/...``), for the issue's target: the
    p50 evaluation time of a warm level-1 candidate."""
    return row["task"].split("/", 1)[0]


def _latencies(rows: list[dict], group=lambda r: r["kind"]) -> dict[str, dict[str, float]]:
    out = {}
    for kind in sorted({group(r) for r in rows}):
        mine = [r for r in rows if group(r) == kind]
        out[kind] = {
            "n": len(mine),
            "p50_s": _pct([r["seconds"] for r in mine], 50),
            "p95_s": _pct([r["seconds"] for r in mine], 95),
            "p50_from_submit_s": _pct([r["latency_s"] for r in mine], 50),
            "p95_from_submit_s": _pct([r["latency_s"] for r in mine], 95),
        }
    return out


def _pct(values: list[float], p: int) -> float:
    """The nearest-rank percentile (of few values: no interpolation between them)."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, -(-p * len(s) // 100) - 1))] if s else 0.0


# -- the report ---------------------------------------------------------------------------------
def terminal(doc: dict[str, Any]) -> str:
    """The runs, their latencies by kind and the costliest steps, 80 columns wide."""
    out = [f"{'pass':5s} {'in flight':>9s} {'evals':>5s} {'wall s':>8s} {'evals/GPU-h':>11s} "
           f"{'busy':>8s} {'A/A':>9s} {'expected':>8s}"]  # fmt: skip
    for r in doc["runs"]:
        aa = r["aa"]
        aa_s = (
            ("ok" if aa["ok"] else "BROKEN") + f" {100 * aa['difference']:.1f}%" if aa["checked"] else "n/a"
        )
        busy = r["busy_share"] if isinstance(r["busy_share"], str) else f"{100 * r['busy_share']:.0f}%"
        out.append(
            f"{r['label']:5s} {r['per_device']:9d} {r['evaluations']:5d} {r['wall_s']:8.1f} "
            f"{r['evaluations_per_gpu_hour'] or 0:11.1f} {busy[:8]:>8s} {aa_s[:9]:>9s} "
            f"{'yes' if r['all_expected'] else 'NO':>8s}"
        )
        said = [f"measured in {r['parts']} parts" if r.get("parts", 1) > 1 else "",
                f"cut at the deadline: {r['evaluations']} of {r['sent']} answered" if r.get("cut") else "",
                "builds cached before" if r["label"] == "cold" and r.get("builds_cached_before") else "",
                f"server up in {r['server_start_s']} s before the wall" if r.get("server_start_s") else ""]  # fmt: skip
        if any(said):
            out.append("  " + "; ".join(x for x in said if x))
        if r.get("admission"):
            out.append("  " + timeline.line(r["admission"]))
        if r.get("device_floor"):
            out.append("  " + device_floor.line(r["device_floor"]))
    for r in doc["runs"]:
        if r["judged"] != r["evaluations"]:
            out.append(f"{r['label']} at {r['per_device']}: {r['judged']} of {r['evaluations']} judged on merit "
                       "(the rest errors of the machine)")  # fmt: skip
    if doc["runs"] and isinstance(doc["runs"][0]["busy_share"], str):
        out.append(f"busy: {doc['runs'][0]['busy_share']}")
    for label in ("cold", "warm"):
        best = doc["best"].get(label)
        if best:
            out.append(f"best {label}: {best['evaluations_per_gpu_hour']} evaluations per GPU-hour "
                       f"at {best['per_device']} in flight" + (" (cut at the deadline)" if best["cut"] else ""))  # fmt: skip
    if doc["broken_concurrency"]:
        out.append(f"A/A broken (left out): in flight {doc['broken_concurrency']}")
    last = doc["runs"][-1] if doc["runs"] else None
    if last:
        out += ["", f"latency by kind ({last['label']}, {last['per_device']} in flight): evaluation s, "
                "from submission s"]  # fmt: skip
        out.append(f"{'kind':28s} {'n':>3s} {'p50':>8s} {'p95':>8s} {'p50 sub':>9s} {'p95 sub':>9s}")
        by_level = {f"{level} (every kind)": k for level, k in last.get("latency_by_level", {}).items()}
        for kind, k in {**last["latency_by_kind"], **by_level}.items():
            out.append(
                f"{kind[:28]:28s} {k['n']:3d} {k['p50_s']:8.1f} {k['p95_s']:8.1f} "
                f"{k['p50_from_submit_s']:9.1f} {k['p95_from_submit_s']:9.1f}"
            )
        costs = last["costs"]
        whole = max(costs["evaluation_s"], 1e-9)
        out += ["", f"where the seconds go ({costs['evaluation_s']} s of evaluation summed)"]
        for name, s in [kv for kv in costs["steps_total_s"].items() if kv[0].count("/") < 2][:12]:
            out.append(f"  {name[:56]:56s} {s:9.2f} {100 * s / whole:5.0f}%")
        unexplained = costs.get("in_no_step_s", 0.0)
        out.append(f"  {'(in no step)':56s} {unexplained:9.2f} {100 * unexplained / whole:5.0f}%")
        if last.get("handoff_fell_back"):
            out.append(f"handoff fell back to host memory: {len(last['handoff_fell_back'])} evaluations")
        for u in last.get("unmeasured", []):
            out.append(f"NO SPEEDUP {u['task'][:40]}: {u['why'][:36]}")
        for u in last["unexpected"]:
            out.append(f"UNEXPECTED {u['task'][:40]}: {u['got'][0]} {','.join(u['got'][1])[:24]}")
            if u.get("message"):
                out.append(f"  {u['message'][:76]}")
    return "\n".join(line[:80] for line in out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", type=Path, default=MANIFEST)
    ap.add_argument("--tasks", type=Path, action="append", default=[], help="the server's --tasks folder(s)")
    ap.add_argument(
        "--smoke", action="store_true", help="CI: the smoke set on the CPU, correctness only, 1 in flight"
    )
    ap.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: cuda, cpu with --smoke)")
    ap.add_argument("--per-device", default=None, help="comma-separated (default 1,2,4,6; 1 with --smoke)")
    ap.add_argument("--passes", default="cold,warm")
    ap.add_argument("--correctness-only", action="store_true")
    ap.add_argument(
        "--serve-arg", action="append", default=[], help="one more argument for kernelproof serve"
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--verbose", action="store_true", help="a line per answer")
    ap.add_argument(
        "--build-cache", type=Path, default=None,
        help="keep builds in this folder across calls (a warm pass in a later call; default: a fresh one per concurrency)",
    )  # fmt: skip
    ap.add_argument(
        "--only", action="append", default=[], help="only the tasks whose path contains this (repeatable)"
    )
    ap.add_argument(
        "--part", default=None, metavar="K/N",
        help="only the K-th of N parts of the set's tasks (every N-th task, sorted; --merge joins the parts)",
    )  # fmt: skip
    ap.add_argument(
        "--deadline-s", type=float, default=None,
        help="stop by this many seconds from the start: the pass under way is cut, its answers kept",
    )  # fmt: skip
    ap.add_argument(
        "--merge", type=Path, nargs="+", default=None, metavar="JSON",
        help="combine service-throughput.json files of parts of the set measured apart, and report them as one",
    )  # fmt: skip
    ns = ap.parse_args(argv)
    if ns.merge:
        doc = merged([json.loads(path.read_text()) for path in ns.merge])
        ns.out = ns.out or out_dir()
        ns.out.mkdir(parents=True, exist_ok=True)
        _write(ns.out, doc)
        print(terminal(doc))
        print(f"\nwritten: {ns.out / 'service-throughput.json'}")
        return 0 if doc["all_expected"] else 1
    ns.deadline = None if ns.deadline_s is None else time.monotonic() + ns.deadline_s
    if ns.smoke:
        ns.device = ns.device or "cpu"
        ns.correctness_only = True
        ns.tasks = ns.tasks or [ns.manifest.parent / "tasks"]
        ns.per_device = ns.per_device or "1"
    ns.device = ns.device or "cuda"
    ns.per_device = ns.per_device or "1,2,4,6"
    if not ns.tasks:
        ap.error("--tasks DIR (a prepared KernelBench folder) is required without --smoke")
    if not ns.manifest.is_file():
        ap.error(f"no candidate manifest at {ns.manifest}")
    candidates = read_manifest(ns.manifest, ns.smoke, ns.device)
    if ns.only:
        candidates = [c for c in candidates if any(pat in c.task for pat in ns.only)]
        if not candidates:
            ap.error(f"no candidate's task matches {ns.only}")
    if ns.part:
        try:
            candidates = part_of(candidates, ns.part)
        except ValueError as exc:
            ap.error(str(exc))
    ns.out = ns.out or out_dir()
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "service-throughput.rows.jsonl").write_text("")
    candidates = interleaved(candidates)
    twin = aa_pair(candidates)
    if twin is not None:  # beside its original: a pass cut at the deadline still compares them
        at = next(i for i, c in enumerate(candidates) if c.id == twin.id.removesuffix("#aa"))
        candidates = candidates[: at + 1] + [twin] + candidates[at + 1 :]
    runs: list[dict[str, Any]] = []
    settings = {
        "manifest": str(ns.manifest),
        "tasks": [str(t) for t in ns.tasks],
        "only": ns.only,
        "part": ns.part,
        "smoke": ns.smoke,
        "device": ns.device,
        "correctness_only": ns.correctness_only,
        "per_device": ns.per_device,
        "passes": ns.passes,
        "candidates": len(candidates),
        "aa_tolerance": AA_TOLERANCE,
        "deadline_s": ns.deadline_s,
        "serve_args": ns.serve_arg,  # e.g. --jobs-per-slot N (the service's default: 2)
        "commit": _commit(),
    }
    doc = _document(settings, runs)
    for per_device in [int(x) for x in ns.per_device.split(",") if x.strip()]:
        # cold: nothing built yet, unless --build-cache names a folder a former call filled
        cache = ns.build_cache or Path(tempfile.mkdtemp(prefix="service-throughput-builds-"))
        try:
            for label in [p.strip() for p in ns.passes.split(",") if p.strip()]:
                if ns.deadline is not None and time.monotonic() >= ns.deadline:
                    break
                runs.append(one_pass(ns, candidates, per_device, cache, label))
                doc = _document(settings, runs)
                _write(ns.out, doc)  # after each pass: a call cut by its limit keeps them
        finally:
            if ns.build_cache is None:
                shutil.rmtree(cache, ignore_errors=True)
    _write(ns.out, doc)
    print(terminal(doc))
    print(f"\nwritten: {ns.out / 'service-throughput.json'}")
    return 0 if doc["all_expected"] else 1


def merged(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """One report from parts of the set measured in separate calls (a device call is ten minutes;
    the whole set, cold, takes longer): for each pass and concurrency, the parts' answers together
    over the sum of their walls, each part's own server start and cut included. A task in two
    parts is refused: the parts must split the set, not overlap."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for doc in docs:
        if doc.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document: {doc.get('schema')!r}")
        for run in doc["runs"]:
            groups.setdefault((run["label"], run["per_device"]), []).append(run)
    runs = []
    for (label, per_device), parts in groups.items():
        seen: set[str] = set()
        for part in parts:
            tasks = {r["task"].rsplit("/", 1)[0] for r in part["rows"]}  # a row's is its candidate's id
            if seen & tasks:
                raise ValueError(
                    f"the {label} parts at {per_device} in flight overlap: {sorted(seen & tasks)[:3]}"
                )
            seen |= tasks
        rows = [r for part in parts for r in part["rows"]]
        wall = sum(part["wall_s"] for part in parts)
        shares = [(part["busy_share"], part["wall_s"]) for part in parts]
        share: float | str = (
            sum(x * w for x, w in shares) / wall
            if wall > 0 and all(isinstance(x, (int, float)) for x, _ in shares)
            else "not measured in every part"
        )
        run = _summary(label, per_device, rows, wall, share)
        checked = [part["aa"] for part in parts if part["aa"].get("checked")]
        run["aa"] = checked[0] if checked else parts[0]["aa"]
        run["cut"] = any(part.get("cut") for part in parts)
        run["sent"] = sum(part.get("sent", 0) for part in parts)
        run["builds_cached_before"] = any(part.get("builds_cached_before") for part in parts)
        run["parts"] = len(parts)
        run["admission"] = timeline.merged([part.get("admission") or {} for part in parts])
        run["device_floor"] = device_floor.floor(rows, run["admission"].get("capacity_bytes"), wall)
        starts = [part.get("server_start_s") for part in parts]
        run["server_start_s"] = round(sum(starts), 1) if all(starts) else None  # one server per part
        runs.append(run)
    settings = {
        "merged": [d["settings"] for d in docs],
        "commit": sorted({d["settings"].get("commit", "") for d in docs}),
    }
    return _document(settings, runs)


def _write(out: Path, doc: dict[str, Any]) -> None:
    (out / "service-throughput.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")


def _document(settings: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The report: every pass, the concurrencies whose A/A check broke, and the best rate of each
    pass kind among the others (a pass cut at the deadline counts only what it finished)."""
    broken = sorted({r["per_device"] for r in runs if r["aa"].get("checked") and not r["aa"]["ok"]})
    best = {}
    for label in ("cold", "warm"):
        usable = [r for r in runs if r["label"] == label and r["per_device"] not in broken]
        if usable:
            top = max(usable, key=lambda r: r["evaluations_per_gpu_hour"] or 0)
            best[label] = {
                "per_device": top["per_device"],
                "evaluations_per_gpu_hour": top["evaluations_per_gpu_hour"],
                "cut": top.get("cut", False),
            }
    return {
        "schema": SCHEMA,
        "settings": settings,
        "runs": runs,
        "broken_concurrency": broken,
        "best": best,
        "all_expected": bool(runs) and all(r["all_expected"] for r in runs),
    }


def _commit() -> str:
    """The commit measured: ``KP_COMMIT`` where the caller says it (a copy of a working tree whose
    ``.git`` is not its own, as on a lent GPU machine), else ``git rev-parse HEAD``."""
    if os.environ.get("KP_COMMIT"):
        return os.environ["KP_COMMIT"]
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


if __name__ == "__main__":
    raise SystemExit(main())
