"""split_cuda_source: torch-free kernels, rewritten launches, and refusal of what it cannot read safely."""

from __future__ import annotations

import subprocess

import pytest

from kernelproof.build.env import nvcc_path
from kernelproof.build.split import split_cuda_source

# KernelBench's own example (prompts/model_new_ex_add.py), as agents write it.
ADD = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void elementwise_add_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        out[idx] = a[idx] + b[idx];
    }
}

torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b) {
    auto size = a.numel();
    auto out = torch::zeros_like(a);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    elementwise_add_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    return out;
}
"""

SOFTMAX = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be CUDA")
constexpr int WARP = 32;
struct Pair { float m; float s; };

__device__ __forceinline__ float warp_max(float v) {
    for (int o = WARP / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__constant__ float kScale[1];

__global__ void __launch_bounds__(256) softmax_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                      int rows, int cols) {
    extern __shared__ float buf[];
    int r = blockIdx.x;
    if (r >= rows) return;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[r * cols + c]);
    m = warp_max(m);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[r * cols + c] = __expf(x[r * cols + c] - m) * kScale[0];
}

torch::Tensor softmax(torch::Tensor x) {
    CHECK_CUDA(x);
    auto y = torch::empty_like(x);
    int rows = x.size(0), cols = x.size(1);
    auto stream = c10::cuda::getCurrentCUDAStream();
    softmax_kernel<<<dim3(rows), dim3(256), 32 * sizeof(float), stream>>>(
        x.data_ptr<float>(), y.data_ptr<float>(),
        rows, cols);
    return y;
}
"""


# Idioms seen in agent-written solutions that lean on what torch's headers include (FLT_MAX,
# INT_MAX, M_PI, std::max in device code) and host-side C++17.
IDIOMS = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#define TILE 16
#define CHECK_INPUT(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")

__device__ float gelu(float v) { return 0.5f * v * (1.0f + tanhf(sqrtf(2.0f / M_PI) * (v + 0.044715f * v * v * v))); }

__global__ void rowmax_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float m = -FLT_MAX;
    for (int c = 0; c < cols; ++c) m = std::max(m, gelu(x[r * cols + c]));
    __half h = __float2half(m);
    out[r] = fminf(__half2float(h), (float)INT_MAX);
}

std::vector<torch::Tensor> rowmax_cuda(torch::Tensor x, std::tuple<int, int> tile) {
    CHECK_INPUT(x);
    const auto [th, tw] = tile;
    auto out = torch::empty({x.size(0)}, x.options());
    int rows = x.size(0), cols = x.size(1);
    dim3 block(TILE * TILE);
    dim3 grid((rows + block.x - 1) / block.x);
    rowmax_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return {out};
}
"""


def test_splits_kernelbench_elementwise_add():
    s = split_cuda_source(ADD)
    assert s is not None
    assert "torch" not in s.kernels_cu
    assert "__global__ void elementwise_add_kernel" in s.kernels_cu
    assert (
        "elementwise_add_kernel<<<kp_grid, kp_block, kp_smem, kp_stream>>>(a, b, out, size);" in s.kernels_cu
    )
    assert (
        "kp_launch_elementwise_add_kernel(dim3(num_blocks), dim3(block_size), (size_t)(0), (cudaStream_t)(0), a.data_ptr"
        in s.launch_cpp
    )
    assert "<<<" not in s.launch_cpp and "__global__" not in s.launch_cpp
    assert [k.name for k in s.kernels] == ["elementwise_add_kernel"]


def test_device_helpers_constants_and_types_stay_with_the_kernels():
    s = split_cuda_source(SOFTMAX)
    assert s is not None
    for text in (
        "__device__ __forceinline__ float warp_max",
        "__constant__ float kScale[1];",
        "constexpr int WARP",
        "struct Pair",
    ):
        assert text in s.kernels_cu
    assert "c10/cuda" not in s.kernels_cu and "TORCH_CHECK" not in s.kernels_cu
    assert "warp_max" not in s.launch_cpp and "kScale" not in s.launch_cpp
    assert "(size_t)(32 * sizeof(float)), (cudaStream_t)(stream)," in s.launch_cpp
    assert "x.data_ptr<float>(), y.data_ptr<float>(),\n        rows, cols);" in s.launch_cpp


def test_launch_keeps_later_lines_in_place():
    s = split_cuda_source(SOFTMAX)
    launch = s.launch_cpp
    body = launch[launch.index("torch::Tensor softmax") :]
    original = SOFTMAX[SOFTMAX.index("torch::Tensor softmax") :]
    assert body.count("\n") == original.count("\n")


def test_kernel_parameters_without_names_get_names():
    s = split_cuda_source(ADD.replace("const float* a, const float* b", "const float*, const float* b"))
    assert s is not None
    assert s.kernels[0].param_names[0] == "kp_arg0"


@pytest.mark.parametrize(
    "change",
    [
        (
            "__global__ void elementwise_add_kernel(",
            "template <typename T>\n__global__ void elementwise_add_kernel(",
        ),
        ("torch::Tensor elementwise_add_cuda", "#ifdef USE_FAST\n#endif\ntorch::Tensor elementwise_add_cuda"),
        ("int idx = ", "at::Half h; int idx = "),
        (
            "auto size = a.numel();",
            "cudaFuncSetAttribute(elementwise_add_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 0); auto size = a.numel();",
        ),
        ("#include <cuda_runtime.h>", "#include <cuda_runtime.h>\nnamespace { int unused; }"),
        ("elementwise_add_kernel<<<", "other_kernel<<<"),
    ],
    ids=[
        "templated-kernel",
        "conditional",
        "torch-in-device-code",
        "kernel-named-outside-launch",
        "namespace",
        "unknown-kernel",
    ],
)
def test_refuses_what_it_cannot_split_safely(change):
    old, new = change
    assert old in ADD
    assert split_cuda_source(ADD.replace(old, new)) is None


def test_refuses_source_without_kernels():
    assert (
        split_cuda_source("#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x; }\n")
        is None
    )


@pytest.mark.skipif(nvcc_path() is None, reason="needs nvcc")
@pytest.mark.parametrize("source", [SOFTMAX, IDIOMS], ids=["softmax", "agent-idioms"])
def test_kernel_file_compiles_with_nvcc_without_torch(tmp_path, source):
    s = split_cuda_source(source)
    assert s is not None
    src = tmp_path / "kernels.cu"
    src.write_text(s.kernels_cu)
    flags = ["--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__"]
    done = subprocess.run(
        [
            nvcc_path(),
            "-c",
            "-gencode=arch=compute_90a,code=sm_90a",
            "-std=c++17",
            *flags,
            str(src),
            "-o",
            str(tmp_path / "k.o"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
