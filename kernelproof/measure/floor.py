"""The device's launch floor: the shortest device duration any kernel has, whatever its work.

Launch accounting weighs kernels by their device-side durations (CUPTI, through torch's profiler).
A kernel that does almost nothing still lasts a couple of microseconds on the device, so a small
ATen epilogue (sum 125 partial sums, divide once) outweighed a Triton kernel that did all the real
work, and an honest solution failed ``low_kernel_coverage``. Each kernel therefore counts only its
duration above this floor (kernelproof/measure/coverage.py).

The floor is measured once per device and parent process, in a process of its own (trusted code,
never a candidate's worker): ``FLOOR_LAUNCHES`` launches of a one-block kernel under the same
profiler, and the minimum of their device durations.

    python -m kernelproof.measure.floor --device cuda:0     # prints the floor as JSON
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from dataclasses import dataclass

FLOOR_LAUNCHES = 200  # at least 100 (issue #18); the minimum of 200 is stable to a few tens of ns
_cache: dict[str, LaunchFloor] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class LaunchFloor:
    us: float | None  # the shortest device duration seen (None: not measured)
    launches: int  # how many launches it is the minimum of
    how: str  # where it came from, or why it is missing


def for_device(device: str) -> LaunchFloor:
    """The device's floor, measured at first use in a separate process; cached for this process."""
    if not device.startswith("cuda"):
        return LaunchFloor(None, 0, "no launch floor on the CPU")
    with _lock:
        floor = _cache.get(device)
        if floor is None:
            floor = _cache[device] = _measure_apart(device)
        return floor


def _measure_apart(device: str) -> LaunchFloor:
    cmd = [sys.executable, "-m", "kernelproof.measure.floor", "--device", device]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        doc = json.loads(done.stdout.strip().splitlines()[-1])
        return LaunchFloor(float(doc["us"]), int(doc["launches"]), doc["how"])
    except Exception as exc:  # noqa: BLE001 - no floor: every kernel counts whole, as before
        return LaunchFloor(None, 0, f"launch floor not measured: {type(exc).__name__}: {exc}"[:300])


def measure(device: str, launches: int = FLOOR_LAUNCHES) -> LaunchFloor:
    """In this process: `launches` one-element increments under the profiler, the shortest duration."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    dev = torch.device(device)
    x = torch.zeros(1, device=dev)
    for _ in range(10):
        x.add_(1)
    torch.cuda.synchronize(dev)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(launches):
            x.add_(1)
        torch.cuda.synchronize(dev)
    durations = [
        (ev.end_ns() - ev.start_ns()) / 1e3
        for ev in prof.profiler.kineto_results.events()
        if "CUDA" in str(ev.device_type()) and ev.end_ns() > ev.start_ns()
    ]
    if len(durations) < launches // 2:
        return LaunchFloor(None, len(durations), "the profiler saw too few kernels")
    name = torch.cuda.get_device_name(dev)
    return LaunchFloor(
        min(durations), len(durations), f"min over {len(durations)} one-block kernels on {name}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelproof.measure.floor")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--launches", type=int, default=FLOOR_LAUNCHES)
    ns = ap.parse_args(argv)
    floor = measure(ns.device, ns.launches)
    print(json.dumps({"us": floor.us, "launches": floor.launches, "how": floor.how}))
    return 0 if floor.us is not None else 1


if __name__ == "__main__":
    sys.exit(main())
