"""Launch accounting: kernel names seen on an H200 are attributed to the right origin."""

import pytest

from kernelproof.measure.accounting import origin_of

OWN = ("_bias_relu_kernel", "scaled_add")


@pytest.mark.parametrize(
    "name, origin",
    [
        ("_bias_relu_kernel", "solution"),
        ("void scaled_add<float>(float const*, float*, int)", "solution"),
        # cuDNN's FFT convolution (level2/03 on an H200, 2026-11-30)
        ("void pointwise_mult_and_sum_complex<float2, 8, 4>(float2*, float2*, float2*, int)", "library"),
        (
            "void DSE::regular_fft_clip<1, 2, 128, 16, 32, 1, float, float, float2>(float*, float2*)",
            "library",
        ),
        ("void DSE::vector_fft<0, 1, 128, 8, 8, 1, float, float, float2>(float2*, float2*, int)", "library"),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1", "library"),
        ("nvjet_sss_128x256_64x3_2x1_v_bz_coopB_NNT", "library"),
        ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(Params)", "library"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)", "aten"),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>()", "aten"),
        ("Memcpy DtoD (Device -> Device)", "aten"),
    ],
)
def test_origin_of_kernel_names(name, origin):
    assert origin_of(name, OWN) == origin
