"""Has a GPU gone quiet? NVML's utilisation samples, read for the device gate's lending check.

The gate (kernelproof.host.gate) stops a hung holder's worker and asks this check whether the
device still runs kernels before it counts that holder absent; the check lives here, beside the
other NVML readings (measure/telemetry.py), and is handed to the gate by the executor.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable


class QuietGpu:
    """Has one GPU stopped running kernels? Read from NVML's utilisation samples (the fraction of
    each sample period in which any kernel ran). The first sample newer than the call may still
    cover work from before it, so it is skipped; then ``SAMPLES`` zero samples in a row mean
    quiet. A nonzero sample does not end the wait: a stopped worker's last kernels drain, and
    NVML's figure may trail the work by a sample or two, so only ``WAIT_S`` without such a run
    means busy. Without NVML (or on any NVML error) the answer is no, and nothing is lent."""

    SAMPLES = 2
    WAIT_S = 4.0  # NVML's sample period is 1/6 s to 1 s depending on the GPU

    def __init__(self, device_index: int) -> None:
        self.error = ""
        self.last_samples: list[int] = []  # what the last call read (percent), for reports and tests
        try:
            import pynvml

            from kernelproof.measure.telemetry import nvml_handle

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = nvml_handle(pynvml, device_index)
        except Exception as exc:  # noqa: BLE001 - no NVML: never lend
            self.nvml = None
            self.error = f"{type(exc).__name__}: {exc}"

    def __call__(self) -> bool:
        if self.nvml is None:
            return False
        self.last_samples = []
        try:
            last = max((ts for ts, _ in self.newer_samples(0)), default=0)
            deadline = time.monotonic() + self.WAIT_S
            skipped = False
            zeros = 0
            while time.monotonic() < deadline:
                time.sleep(0.05)
                for ts, value in self.newer_samples(last):
                    last = ts
                    self.last_samples.append(value)
                    if not skipped:
                        skipped = True
                        continue
                    zeros = zeros + 1 if value == 0 else 0
                    if zeros >= self.SAMPLES:
                        return True
            return False
        except Exception:  # noqa: BLE001 - cannot tell: do not lend
            return False

    def newer_samples(self, since: int) -> list[tuple[int, int]]:
        """(timestamp, percent) of every sample taken after `since`, oldest first. NVML answers
        NOT_FOUND while it has none (it samples every 200 ms on an H200, and this polls faster)."""
        n = self.nvml
        try:
            _, samples = n.nvmlDeviceGetSamples(self.handle, n.NVML_GPU_UTILIZATION_SAMPLES, since)
        except n.NVMLError as exc:
            if getattr(exc, "value", None) == n.NVML_ERROR_NOT_FOUND:
                return []
            raise
        return sorted((int(s.timeStamp), int(s.sampleValue.uiVal)) for s in samples if s.timeStamp > since)


def quiet_probe(device: str) -> Callable[[], bool] | None:
    """The check :class:`DeviceGate` lends with on this device: NVML on a GPU; on the CPU a stopped
    worker runs nothing, so always quiet. ``KERNELPROOF_LEND=0`` turns lending off."""
    if os.environ.get("KERNELPROOF_LEND", "1") == "0":
        return None
    if not device.startswith("cuda"):
        return lambda: True
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    probe = QuietGpu(index)
    return probe if probe.nvml is not None else None
