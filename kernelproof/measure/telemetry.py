"""GPU telemetry through NVML: clocks, throttle reasons, power, temperature, other processes.

Read by the parent once per timing round (nvbench records clocks per sample and drops throttled
ones; here a throttled round is counted and reported, and the paired ratio already cancels slow
drift). NVML comes from nvidia-ml-py (the ``gpu`` extra); without it telemetry is reported as
unavailable, never guessed. Clocks are only read, never set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

# Throttle reasons that mean the GPU ran slower than it could (NVML clocksThrottleReasons bits).
_SLOWDOWN_BITS = {
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000020: "sw_thermal_slowdown",
    0x0000000000000040: "hw_thermal_slowdown",
    0x0000000000000080: "hw_power_brake_slowdown",
}


@dataclass(frozen=True)
class Sample:
    sm_clock_mhz: int
    mem_clock_mhz: int
    power_w: float
    temperature_c: int
    throttle: tuple[str, ...]  # slowdown reasons active at the time of the sample


def nvml_handle(pynvml, device_index: int):
    """NVML's handle for torch's CUDA device `device_index`. NVML numbers every GPU of the machine
    and ignores CUDA_VISIBLE_DEVICES, so the device is found by its UUID (then by the visible list,
    then by the bare index)."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(device_index).uuid)
        return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:  # noqa: BLE001 - an older torch or driver: fall back to the numbering
        pass
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
    if device_index < len(visible) and visible[device_index].strip().isdigit():
        return pynvml.nvmlDeviceGetHandleByIndex(int(visible[device_index]))
    return pynvml.nvmlDeviceGetHandleByIndex(device_index)


class Telemetry:
    def __init__(self, device_index: int):
        self.ok = False
        self.error = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = nvml_handle(pynvml, device_index)
            self.ok = True
        except Exception as exc:  # noqa: BLE001 - no NVML here: report, do not guess
            self.error = f"NVML unavailable ({type(exc).__name__}: {exc}); install kernelproof[gpu]"

    def sample(self) -> Sample | None:
        if not self.ok:
            return None
        n = self.nvml
        try:
            reasons = n.nvmlDeviceGetCurrentClocksThrottleReasons(self.handle)
            return Sample(
                sm_clock_mhz=int(n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM)),
                mem_clock_mhz=int(n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_MEM)),
                power_w=float(n.nvmlDeviceGetPowerUsage(self.handle)) / 1000.0,
                temperature_c=int(n.nvmlDeviceGetTemperature(self.handle, n.NVML_TEMPERATURE_GPU)),
                throttle=tuple(name for bit, name in _SLOWDOWN_BITS.items() if reasons & bit),
            )
        except Exception:  # noqa: BLE001
            return None

    def environment(self) -> dict[str, Any]:
        if not self.ok:
            return {"nvml": self.error}
        n = self.nvml
        env: dict[str, Any] = {}
        try:
            env["driver"] = _s(n.nvmlSystemGetDriverVersion())
            env["gpu"] = _s(n.nvmlDeviceGetName(self.handle))
            env["max_sm_clock_mhz"] = int(n.nvmlDeviceGetMaxClockInfo(self.handle, n.NVML_CLOCK_SM))
            procs = n.nvmlDeviceGetComputeRunningProcesses(self.handle)
            env["gpu_processes"] = len(procs)
        except Exception as exc:  # noqa: BLE001
            env["nvml_error"] = str(exc)
        return env


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)
