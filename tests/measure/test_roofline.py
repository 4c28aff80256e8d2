"""Roofline placement on the H200's measured ceilings."""

from kernelproof.measure.roofline import device_spec, floor_ms, place

FLOPS = 2 * 8192 * 4096 * 4096  # an fp32 GEMM of 275 GFLOP


def test_split_precision_fp32_is_measured_against_the_3xtf32_ceiling():
    # 62 TFLOP/s: above IEEE fp32's measured 51, legal for a 3xTF32 kernel (ceiling 364 / 3)
    ms = FLOPS / 62e12 * 1e3
    split = place("NVIDIA H200", FLOPS, None, ms, "fp32", True)
    assert 0.4 < split.sol_fraction < 0.6
    ieee = place("NVIDIA H200", FLOPS, None, ms, "fp32", False)
    assert ieee.sol_fraction > 1.0  # an IEEE-only contract: this rate is beyond the measured ceiling


def test_the_physical_floor_allows_split_precision_on_tensor_cores():
    spec = device_spec("NVIDIA H200")
    assert floor_ms(spec, FLOPS, None, "fp32", True) < floor_ms(spec, FLOPS, None, "fp32", False)
