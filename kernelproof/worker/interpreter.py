"""Triton's interpreter without a GPU driver: what it lacks is the machine's, not the solution's.

``@triton.autotune`` benchmarks every config through the active GPU driver's benchmarker (and
keys its disk cache by the driver's target), so under ``TRITON_INTERPRET=1`` on a CPU machine it
raised "0 active drivers" and a correct solution failed as a ``runtime_error``. Here the tuner
takes the first config (after the solution's own pruning), as Triton does for a single config: the
interpreter's timings say nothing about the GPU, and every config computes the same function.
Anything else that fails only because no GPU driver exists is named by :func:`environment_cause`,
and the worker answers it with the error ``environment`` (never stored, never the solution's).
"""

from __future__ import annotations

import re
import traceback
from typing import Any

# Messages of exceptions that say only that this machine has no GPU driver or device.
_NO_DRIVER = (
    "0 active drivers",
    "found no nvidia driver",
    "no cuda gpus are available",
    "torch not compiled with cuda enabled",
    "cuda driver initialization failed",
    "libcuda.so",
)


# A check of the solution's own that refuses tensors off a CUDA device (``assert x.is_cuda``,
# ``if x.device.type != "cuda": raise ...``, ``TORCH_CHECK(x.is_cuda(), ...)``): its statement, or
# its message ("Input must be a CUDA tensor"), names CUDA. Published GPU kernels check their inputs so.
_CUDA_CHECK_LINE = re.compile(r"""\bis_cuda\b|device\.type\s*[!=]=\s*["']cuda["']|["']cuda["']\s*[!=]=""")
_CUDA_CHECK_MESSAGE = re.compile(
    r"\b(must|should|expected|expects|requires?|only|needs?|not)\b[^.\n]{0,40}\bcuda\b"
    r"|\bcuda\b[^.\n]{0,20}\b(tensors?|device|inputs?)\b[^.\n]{0,20}\b(required|expected|only)\b",
    re.IGNORECASE,
)
_CHECK_ERRORS = (AssertionError, ValueError, RuntimeError, TypeError, NotImplementedError)


def environment_cause(exc: BaseException, path: str = "") -> str:
    """The sentence naming what this machine lacks, when `exc` says only that; else "".

    Two kinds: the words of a missing GPU driver, and a check of the solution's own (raised at a
    line of `path`, its file) that refuses tensors off a CUDA device. The parent keeps either claim
    only where its own facts agree (kernelproof.evaluate.machine.judged_lack): never on a CUDA device.
    """
    text = f"{type(exc).__name__}: {exc}".lower()
    if any(k in text for k in _NO_DRIVER):
        return (
            "this machine has no GPU driver or device, which the solution needs here "
            f"({type(exc).__name__}: {str(exc)[:200]}); run it on a GPU (--device cuda)"
        )
    check = _cuda_check(exc, path)
    if check:
        return (
            f"the solution accepts CUDA tensors only ({check}) and this evaluation runs on the CPU; "
            "run it on a GPU (--device cuda), or launch on x.device to run it here"
        )
    return ""


def _cuda_check(exc: BaseException, path: str) -> str:
    """The solution's line (or message) that refused a tensor off a CUDA device, or ""."""
    if not isinstance(exc, _CHECK_ERRORS) or not path:
        return ""
    stack = traceback.extract_tb(exc.__traceback__)
    if not stack or stack[-1].filename != path:
        return ""  # raised deeper, in a library's Python: not the solution's own check
    line = (stack[-1].line or "").strip()
    if _CUDA_CHECK_LINE.search(line) or _CUDA_CHECK_MESSAGE.search(str(exc)):
        return f"line {stack[-1].lineno}: `{line[:120]}`"
    return ""


def _first_config(kernel_call: Any, quantiles: Any = None) -> list[float]:
    """The autotuner's benchmark under the interpreter: every config ties, so the first is taken."""
    return [0.0, 0.0, 0.0]


def install_autotune() -> bool:
    """Make ``@triton.autotune`` choose without a driver; True when Triton's autotuner was patched."""
    try:
        from triton.runtime.autotuner import Autotuner
    except Exception:  # noqa: BLE001 - no Triton here: nothing to patch
        return False

    tuner_file = getattr(getattr(Autotuner.__init__, "__code__", None), "co_filename", "")

    def do_bench(self):
        # A do_bench the solution passed itself runs as given. The one Triton makes for the
        # deprecated warmup=, rep= and use_cuda_graph= arguments (a lambda of its own autotuner
        # module over triton.testing's driver benchmarkers) is the driver's, and ties as the rest.
        own = self.__dict__.get("_do_bench")
        made_by_triton = getattr(getattr(own, "__code__", None), "co_filename", None) == tuner_file
        return own if own is not None and not made_by_triton else _first_config

    def check_disk_cache(self, tuning_key, configs, bench_fn):
        bench_fn()  # the disk cache is keyed by the driver's target: never read or written here
        return False

    Autotuner.do_bench = property(do_bench)
    Autotuner.check_disk_cache = check_disk_cache
    return True
