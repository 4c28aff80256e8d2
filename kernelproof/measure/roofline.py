"""Speed of light: where a result sits against the device's physical limits.

Two tables. The datasheet peaks bound what is physically possible: a cold-regime time below
FLOPs / peak-of-the-fastest-allowed-unit or below min-bytes / datasheet bandwidth is rejected as
impossible (``below_physical_floor``). Measured ceilings (a large copy, large library matmuls)
are what good code reaches; the speed-of-light fraction is relative to them.

Legitimate tricks must not be rejected: split precision (3xTF32 for fp32) runs on tensor cores,
and algorithmic savings (Winograd, Strassen-like) do fewer multiplies than the task's useful
FLOPs, so the compute floor divides by ALGORITHMIC_SAVINGS and uses the fastest unit the contract
permits. The memory floor stands as it is: every input must be read and every output written.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelproof.verdict import Roofline

ALGORITHMIC_SAVINGS = 4.0  # Winograd F(4x4,3x3) does 4x fewer multiplies than direct convolution


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    datasheet_tbps: float  # HBM bandwidth, TB/s
    datasheet_tflops: dict[str, float]  # dense peak per unit: fp64, fp32, tf32, bf16, fp16, fp8
    measured_tbps: float | None = None  # a large device-to-device copy
    measured_tflops: dict[str, float] | None = None  # large library matmuls
    source: str = ""


# Datasheet dense peaks (NVIDIA H100/H200 SXM product briefs); measured figures from
# shared/device/h200-ceilings.json (2026-11-30, one H200, clocks as found).
KNOWN_DEVICES = {
    "H200": DeviceSpec(
        "NVIDIA H200",
        4.8,
        {"fp64": 67, "fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979},
        4.28,
        {"bf16": 730, "fp16": 668, "tf32": 364, "fp32": 51},
        "datasheet; measured on an H200 2026-11-30",
    ),
    "H100": DeviceSpec(
        "NVIDIA H100",
        3.35,
        {"fp64": 67, "fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979},
        None,
        None,
        "datasheet",
    ),
}

# The fastest unit each precision contract allows a kernel to use.
FASTEST_UNIT = {
    ("fp32", True): "fp16",  # split precision may run on any tensor-core format
    ("fp32", False): "fp32",
    ("tf32", True): "fp16",
    ("tf32", False): "tf32",
    ("bf16", True): "bf16",
    ("bf16", False): "bf16",
    ("fp16", True): "fp16",
    ("fp16", False): "fp16",
}
MEASURED_UNIT = {"fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16"}
SPLIT_PRODUCTS = 3  # 3xTF32: three tensor-core products per emulated fp32 product


def measured_peak(measured: dict[str, float], precision: str, split: bool) -> float | None:
    """The attainable matmul rate a result's speed-of-light fraction is taken against.

    fp32 with split precision allowed can be emulated on TF32 tensor cores at a third of their rate
    (on an H200 364 / 3 = 121 TFLOP/s against 51 for IEEE fp32): its ceiling is the faster of the
    two, so a correct 3xTF32 kernel is not shown above 100 % of a ceiling it may legally beat.
    """
    peak = measured.get(MEASURED_UNIT[precision])
    if precision == "fp32" and split and "tf32" in measured:
        peak = max(peak or 0.0, measured["tf32"] / SPLIT_PRODUCTS)
    return peak


def device_spec(name: str) -> DeviceSpec | None:
    """The datasheet table for the device, with this machine's measured ceilings where cached."""
    import dataclasses

    from kernelproof.measure import ceilings

    for key, spec in KNOWN_DEVICES.items():
        if key in name:
            cached = ceilings.load(name)
            if cached:
                return dataclasses.replace(
                    spec,
                    measured_tbps=cached["copy_bandwidth_TBps"],
                    measured_tflops=cached["matmul_TFLOPs"],
                    source=f"datasheet; measured here ({ceilings.cache_path(name)})",
                )
            return spec
    return None


def floor_ms(
    spec: DeviceSpec, flops: float | None, min_bytes: float | None, precision: str, split: bool
) -> float | None:
    """The physical floor: no implementation of the task can be faster on this device."""
    parts = []
    if min_bytes:
        parts.append(min_bytes / (spec.datasheet_tbps * 1e12) * 1e3)
    if flops:
        unit = FASTEST_UNIT[(precision, split)]
        parts.append(flops / (spec.datasheet_tflops[unit] * 1e12 * ALGORITHMIC_SAVINGS) * 1e3)
    return max(parts) if parts else None


def place(
    device_name: str,
    flops: float | None,
    min_bytes: float | None,
    time_ms: float,
    precision: str,
    split: bool,
) -> Roofline:
    spec = device_spec(device_name)
    tflops = flops / (time_ms * 1e-3) / 1e12 if flops and time_ms > 0 else None
    tbps = min_bytes / (time_ms * 1e-3) / 1e12 if min_bytes and time_ms > 0 else None
    if spec is None:
        return Roofline(flops, min_bytes, None, tflops, tbps, None, f"no ceilings known for {device_name!r}")
    floor = floor_ms(spec, flops, min_bytes, precision, split)
    sol = None
    mt = spec.measured_tflops or {}
    mbw = spec.measured_tbps
    parts = []
    if min_bytes and mbw:
        parts.append(min_bytes / (mbw * 1e12) * 1e3)
    peak = measured_peak(mt, precision, split)
    if flops and peak:
        parts.append(flops / (peak * 1e12) * 1e3)
    if parts and time_ms > 0:
        sol = max(parts) / time_ms
    return Roofline(flops, min_bytes, floor, tflops, tbps, sol, spec.source)
