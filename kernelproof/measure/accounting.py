"""Launch accounting: which kernels a call really ran, and how much GPU time is the submission's (E1-E3).

A decoy kernel that is defined but never launched, a try/except that falls back to torch, or a
"custom" kernel that calls cuBLAS all look fine statically. One hidden timed call runs under the
profiler; every device activity it caused is listed with its GPU time and attributed by name: the
kernels the solution defines (Triton ``@triton.jit`` functions, CUDA ``__global__`` functions),
library GEMM/convolution kernels (cuBLAS, cuDNN, CUTLASS), and everything else (ATen). The share
in the submission's kernels, against the task's kernel policy, decides ``no_custom_kernel`` /
``low_kernel_coverage``.
"""

from __future__ import annotations

import re

from kernelproof.measure.coverage import shares
from kernelproof.sandbox.process import WorkerDied, WorkerProcess
from kernelproof.verdict import Coverage
from kernelproof.verify.cases import VariantContext
from kernelproof.worker.protocol import ProtocolError
from kernelproof.worker.replies import reason_of

# Vendor-library kernels (cuBLAS/cuBLASLt, cuDNN, cuFFT, CUTLASS, cuTENSOR) by name. cuDNN may pick
# an FFT algorithm for a convolution (seen on an H200: DSE::regular_fft_*, vector_fft,
# pointwise_mult_and_sum_complex) and wraps its kernels in layout transforms (nchwToNhwc...).
LIBRARY_PATTERN = re.compile(
    r"gemm|gemv|cublas|cutlass|xmma|cudnn|conv|winograd|implicit_convolve|sm\d+_|nvjet|splitKreduce"
    r"|fft|DSE::|pointwise_mult_and_sum_complex|nchwToNhwc|nhwcToNchw|cutensor",
    re.IGNORECASE,
)
TOP_KERNELS = 8  # kernels listed in the verdict


def origin_of(name: str, own: tuple[str, ...]) -> str:
    base = name.split("(")[0]
    tokens = set(re.split(r"[^A-Za-z0-9_]+", base))
    if any(k in tokens for k in own):
        return "solution"
    if LIBRARY_PATTERN.search(base):
        return "library"
    return "aten"


def account(
    worker: WorkerProcess,
    ctx: VariantContext,
    seed: int,
    own: tuple[str, ...],
    policy: str,
    timeout_s: float,
    floor_us: float | None = None,
) -> Coverage:
    """One hidden call under the profiler: its kernels, and the submission's share of the work
    above the launch floor (`floor_us`, measured apart: kernelproof/measure/floor.py)."""
    if ctx.device.type != "cuda":
        return Coverage(None, (), policy, "launch accounting needs CUDA; skipped on the CPU")
    spec, fixed_tensors = ctx.input_spec()
    reply, _ = worker.request({"op": "profile", **spec, "seed": seed}, fixed_tensors, timeout_s)
    if not reply.get("ok"):
        try:
            why = reason_of(reply)
        except ProtocolError as exc:  # a code kernelproof does not know: the worker is broken
            worker.kill()
            raise WorkerDied("crash", f"the candidate: {exc}") from None
        return Coverage(None, (), policy, f"profiling failed ({why.code.value}): {why.message}")
    rows = [(str(n), origin_of(str(n), own), float(ms)) for n, _stream, ms in reply.get("kernels", [])]
    total = sum(ms for _, _, ms in rows)
    share = shares(rows, floor_us)
    other = "library-ok" if policy == "strict" else "strict"
    merged: dict[tuple[str, str], float] = {}
    for n, o, ms in rows:
        merged[(n[:120], o)] = merged.get((n[:120], o), 0.0) + ms
    top = sorted(((n, o, ms) for (n, o), ms in merged.items()), key=lambda r: -r[2])[:TOP_KERNELS]
    note = f"{len(rows)} device activities, {total:.3f} ms GPU time"
    if floor_us:
        note += f"; each counted above the launch floor of {floor_us:.2f} us"
    return Coverage(
        share.above_floor[policy] if rows else 0.0,
        tuple(top),
        policy,
        note,
        custom_fraction_raw=share.raw[policy] if rows else 0.0,
        floor_us=floor_us,
        other_policy_fraction=share.above_floor[other] if rows else 0.0,
    )
