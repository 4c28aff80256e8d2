"""Measured ceilings of the device: what good code reaches (copy bandwidth, library matmul peaks).

Measured once per device model and cached as JSON under the user's cache dir, beside the
datasheet table in :mod:`kernelproof.measure.roofline`. Each figure is the median of timed
repetitions with CUDA events after a warm-up, on random data (zeros run faster than real data).
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

COPY_BYTES = 2 * 1024**3  # 2 GiB: far beyond L2, bandwidth-bound
MATMUL_N = 8192  # large enough to reach the tensor cores' steady rate
REPEATS = 10


def cache_path(device_name: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    safe = "".join(c if c.isalnum() else "_" for c in device_name)
    return Path(base) / "kernelproof" / "ceilings" / f"{safe}.json"


def load(device_name: str) -> dict[str, Any] | None:
    p = cache_path(device_name)
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def measure(device: str = "cuda:0") -> dict[str, Any]:
    import torch

    dev = torch.device(device)
    name = torch.cuda.get_device_name(dev)

    def time_ms(fn) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize(dev)
        times = []
        for _ in range(REPEATS):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize(dev)
            times.append(s.elapsed_time(e))
        return statistics.median(times)

    src = torch.randn(COPY_BYTES // 4, device=dev)
    dst = torch.empty_like(src)
    copy_ms = time_ms(lambda src=src, dst=dst: dst.copy_(src))
    out: dict[str, Any] = {"device": name, "copy_bandwidth_TBps": 2 * COPY_BYTES / (copy_ms * 1e-3) / 1e12}
    del src, dst
    tflops = {}
    flops = 2 * MATMUL_N**3
    for label, dtype, tf32 in (
        ("bf16", torch.bfloat16, False),
        ("fp16", torch.float16, False),
        ("tf32", torch.float32, True),
        ("fp32", torch.float32, False),
    ):
        a = torch.randn(MATMUL_N, MATMUL_N, device=dev, dtype=dtype)
        b = torch.randn(MATMUL_N, MATMUL_N, device=dev, dtype=dtype)
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            ms = time_ms(lambda a=a, b=b: a @ b)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        tflops[label] = flops / (ms * 1e-3) / 1e12
    out["matmul_TFLOPs"] = tflops
    out["method"] = (
        f"median of {REPEATS} CUDA-event timings after 3 warm-ups; copy of {COPY_BYTES >> 30} GiB (read+write counted); {MATMUL_N}^3 matmuls on random data"
    )
    p = cache_path(name)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(out, indent=1))
    return out
