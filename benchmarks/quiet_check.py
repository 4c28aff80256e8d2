"""How fast the lending check answers, and how NVML's utilisation trails the work it reports.

A timing that waits for a hung evaluation stops that worker and asks ``QuietGpu`` whether the GPU
has gone quiet (host/gate.py); each answer costs the waiting timing its latency. This prints
NVML's sample period on the idle device, the check's latency there, and, after another process
keeps the GPU busy with matmuls and exits, every sample around its end and the check's answer.

    python benchmarks/quiet_check.py            # on the GPU machine (device 0 as torch numbers it)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from _common import ROOT, table, write_json

from kernelproof.measure.quiet import QuietGpu

BUSY = ROOT / "scripts" / "busy-gpu"  # another process keeping the GPU busy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--busy-s", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    probe = QuietGpu(0)
    if probe.nvml is None:
        sys.exit(f"no NVML: {probe.error}")
    doc: dict = {}

    t0_us = int(time.time() * 1e6)
    time.sleep(3.0)
    idle = probe.newer_samples(t0_us)
    gaps = [(b[0] - a[0]) / 1e3 for a, b in zip(idle, idle[1:], strict=False)]
    doc["idle_period_ms"] = statistics.median(gaps) if gaps else None
    doc["idle_values"] = [v for _, v in idle]
    print(f"idle: {len(idle)} samples in 3 s, period {doc['idle_period_ms']} ms, values {doc['idle_values']}")

    rows = []
    for i in range(args.repeats):
        t = time.perf_counter()
        ok = probe()
        rows.append(["idle", str(i), str(ok), f"{time.perf_counter() - t:.2f}", str(probe.last_samples)])

    doc["after_busy"] = []
    for i in range(args.repeats):
        busy = subprocess.Popen(
            [sys.executable, str(BUSY), str(args.busy_s)], stdout=subprocess.PIPE, text=True
        )
        assert busy.stdout.readline().strip() == "busy"
        end = float(busy.stdout.readline())
        busy.wait(60)
        t = time.perf_counter()
        ok = probe()
        latency = time.perf_counter() - t
        rows.append(["after busy", str(i), str(ok), f"{latency:.2f}", str(probe.last_samples)])
        time.sleep(2.0)
        trail = [((ts - end * 1e6) / 1e3, v) for ts, v in probe.newer_samples(int((end - 2.0) * 1e6))]
        doc["after_busy"].append({"quiet": ok, "latency_s": latency, "samples_ms_value": trail})
        print(f"after busy #{i}: samples (ms from the busy process's last sync, percent):")
        print("  " + ", ".join(f"{ms:+.0f}:{v}" for ms, v in trail))
    print(table(rows, ["state", "#", "quiet", "seconds", "samples read (the first is skipped)"]))
    write_json("quiet_check.json", doc)


if __name__ == "__main__":
    main()
