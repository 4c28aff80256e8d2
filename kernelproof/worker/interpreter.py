"""Triton's interpreter without a GPU driver: autotune chooses a config as it would with one config.

``@triton.autotune`` benchmarks every config through the active GPU driver's benchmarker (and
keys its disk cache by the driver's target), so under ``TRITON_INTERPRET=1`` on a CPU machine it
raised "0 active drivers" and a correct solution failed as a ``runtime_error``. Here the tuner
takes the first config (after the solution's own pruning), as Triton does for a single config: the
interpreter's timings say nothing about the GPU, and every config computes the same function.

Nothing else here names what this machine lacks: an exception's text is the solution's (it can
raise any words, "0 active drivers" included), so the worker reports it as the solution's own
failure, and only the parent decides ``environment``, from its own facts (I10, I11;
kernelproof/evaluate/machine.py).
"""

from __future__ import annotations

from typing import Any


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
