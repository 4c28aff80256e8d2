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


def environment_cause(exc: BaseException) -> str:
    """The sentence naming what this machine lacks, when `exc` says only that; else ""."""
    text = f"{type(exc).__name__}: {exc}".lower()
    if any(k in text for k in _NO_DRIVER):
        return (
            "this machine has no GPU driver or device, which the solution needs here "
            f"({type(exc).__name__}: {str(exc)[:200]}); run it on a GPU (--device cuda)"
        )
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

    def do_bench(self):
        own = self.__dict__.get("_do_bench")  # a do_bench the solution passed itself runs as given
        return own if own is not None else _first_config

    def check_disk_cache(self, tuning_key, configs, bench_fn):
        bench_fn()  # the disk cache is keyed by the driver's target: never read or written here
        return False

    Autotuner.do_bench = property(do_bench)
    Autotuner.check_disk_cache = check_disk_cache
    return True
