"""Attribution by identity: a device kernel is the solution's because the solution built it, never
because of its name (kernelproof/measure/attribution.py; E1-E3, I10).

The profiles below are kernel names as torch's profiler records them for eager PyTorch and
torch.compile runs on Hopper (an H100/H200: ATen's elementwise and reduction kernels, cuBLAS's
sm90 and Ampere GEMMs, nvjet, CUTLASS, inductor's Triton kernels, copies). The binaries are
built here with g++ and nvcc (nvcc compiles on a machine without a GPU) and read as the parent
reads what its builder pool built.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from kernelproof.measure import accounting
from kernelproof.measure.accounting import account, origin_of, reconcile
from kernelproof.measure.attribution import KernelIdentity, built_names, elf_functions, qualified_name
from kernelproof.solution import triage
from kernelproof.verdict import Coverage

GELU_EAGER = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, "
    "std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
    "::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)"
)
EAGER = (
    GELU_EAGER,
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4, 4>)",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
    "float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > const&)"
    "::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, "
    "float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1})",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
    "float const*, float const*, float*, float*, float*)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
    "ampere_sgemm_128x64_nn",
    "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    "__5x_cublas",
    "nvjet_tst_128x64_64x8_1x1_v_bz_coopA_NNT",
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>"
    "(cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4::Params)",
    "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(cublasSplitKParams<float>, "
    "float const*, float const*, float*, float const*, float const*, float const*, float const*, float*, void*, "
    "long, float*, int*)",
    "Memcpy DtoD (Device -> Device)",
    "Memset (Device)",
)
COMPILE = (
    "triton_poi_fused_gelu_0",
    "triton_red_fused_sum_0",
    "triton_per_fused__softmax_0",
    "triton_tem_fused_addmm_0",
)

COMMENT_NAMES_NATIVE = """
import torch
import torch.nn as nn

# __global__ void native(const float* x, float* y, int n) {}
DOC = "__global__ void vectorized_elementwise_kernel(float* y) {}"


class ModelNew(nn.Module):
    def forward(self, x):
        return (x * x).sum(dim=-1)
"""


def _triton(name: str) -> KernelIdentity:
    """The identity of a solution whose code defines one Triton kernel `name` (its syntax tree)."""
    source = f"import triton\n\n\n@triton.jit\ndef {name}(x_ptr):\n    pass\n"
    return KernelIdentity(jitted=frozenset(triage(source).kernel_names))


def test_a_comment_or_string_naming_a_kernel_names_nothing():
    own = triage(COMMENT_NAMES_NATIVE).kernel_names
    assert own == ()  # neither the comment's nor the string's "kernel" is the solution's code
    identity = KernelIdentity(jitted=frozenset(own))
    assert [origin_of(n, identity) for n in EAGER + COMPILE].count("solution") == 0


@pytest.mark.parametrize(
    "name", ["native", "at", "vectorized_elementwise_kernel", "GeluCUDAKernelImpl", "reduce_kernel", "float"]
)
def test_a_triton_kernel_named_after_a_token_of_atens_kernels_claims_none_of_them(name):
    identity = _triton(name)
    assert [n for n in EAGER + COMPILE if origin_of(n, identity) == "solution"] == []
    assert origin_of(name, identity) == "solution"  # its own launch, under its own name, is its own


def test_eager_and_compile_profiles_are_attributed_to_aten_and_the_libraries():
    nobody = KernelIdentity()
    origins = {n: origin_of(n, nobody) for n in EAGER + COMPILE}
    assert {origins[n] for n in EAGER[:5]} == {"aten"}
    assert {origins[n] for n in EAGER[5:10]} == {"library"}
    assert {origins[n] for n in COMPILE} == {"aten"}  # inductor's kernels are the baseline's, not a library's


def test_a_kernel_the_compile_baseline_also_runs_is_never_the_solutions():
    """A solution that defines a Triton kernel named as inductor names its kernel and calls a
    compiled function: the profile's kernel of that name is the baseline's."""
    identity = _triton("triton_poi_fused_gelu_0")
    assert origin_of("triton_poi_fused_gelu_0", identity) == "solution"
    shadowed = identity.with_baseline(EAGER + COMPILE)
    assert origin_of("triton_poi_fused_gelu_0", shadowed) == "aten"
    assert shadowed.shadowed() == ("triton_poi_fused_gelu_0",)


def test_a_built_kernel_in_a_torch_namespace_is_never_the_solutions():
    identity = KernelIdentity(built=frozenset({"at::native::vectorized_elementwise_kernel", "myns::scale"}))
    assert origin_of(GELU_EAGER, identity) == "aten"
    assert origin_of("myns::scale(float const*, float*, int)", identity) == "solution"
    assert origin_of("scale(float const*, float*, int)", identity) == "aten"  # whole qualified names only


def test_copies_and_sets_are_no_ones_kernels():
    identity = KernelIdentity(built=frozenset({"DtoD", "Memcpy", "Memset"}))
    assert origin_of("Memcpy DtoD (Device -> Device)", identity) == "aten"
    assert origin_of("Memset (Device)", identity) == "aten"


@pytest.mark.parametrize(
    "name, qualified",
    [
        ("_bias_relu_kernel", "_bias_relu_kernel"),
        ("void scaled_add<float>(float const*, float*, int)", "scaled_add"),
        ("myns::scale_kernel(float const*, float*, int)", "myns::scale_kernel"),
        (GELU_EAGER, "at::native::vectorized_elementwise_kernel"),
        (EAGER[3], "at::native::(anonymous namespace)::vectorized_layer_norm_kernel"),
    ],
)
def test_qualified_name_drops_return_type_template_arguments_and_parameters(name, qualified):
    assert qualified_name(name) == qualified


CUDA_SOURCE = r"""
namespace myns {
__global__ void scale_kernel(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 2 * x[i]; }
}
template <typename T> __global__ void copy_one(const T* x, T* y) { y[0] = x[0]; }
template __global__ void copy_one<float>(const float*, float*);
extern "C" __global__ void plain_c(float* y) { y[0] = 1; }
extern "C" void ampere_sgemm_128x64_nn() {}  // a host function named as cuBLAS's kernel
namespace { void softmax_warp_forward() {} }  // and one named as an ATen kernel
void launch(const float* x, float* y, int n) { myns::scale_kernel<<<1, 32>>>(x, y, n); }
"""


def _nvcc() -> str:
    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else ""
    )
    if not nvcc:
        pytest.skip("nvcc is not installed")
    return nvcc


def test_the_kernels_of_a_built_extension_and_cubin_are_read_from_their_symbols(tmp_path):
    """The parent's view of what it built: the host stubs of an extension's __global__ functions
    and a cubin's kernels, demangled, qualified; the solution's own copy is not a build."""
    nvcc = _nvcc()
    src = tmp_path / "k.cu"
    src.write_text(CUDA_SOURCE)
    ro = tmp_path / "ro"
    (ro / "ext").mkdir(parents=True)
    (ro / "solution").mkdir()
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-o", ro / "ext" / "k.so", src], check=True)
    subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", ro / "native.cubin", src], check=True)
    (ro / "solution" / "fake.so").write_bytes(
        (ro / "ext" / "k.so").read_bytes().replace(b"plain_c", b"plain_x")
    )
    identity = built_names(ro)
    assert identity.binaries == 2
    assert {"myns::scale_kernel", "copy_one", "plain_c"} <= identity.own
    assert "plain_x" not in identity.built
    profiled = ("myns::scale_kernel(float const*, float*, int)", "void copy_one<float>(float const*, float*)")
    assert [origin_of(n, identity) for n in profiled + ("plain_c",)] == ["solution"] * 3
    assert [n for n in EAGER + COMPILE if origin_of(n, identity) == "solution"] == []
    # host functions are no kernels: only nvcc's stubs name the __global__ functions of a host binary
    assert "ampere_sgemm_128x64_nn" not in identity.built
    assert "(anonymous namespace)::softmax_warp_forward" not in identity.built
    assert origin_of("ampere_sgemm_128x64_nn", identity) == "library"


def _shared_library(folder: Path, source: str, *libraries: str) -> None:
    """``folder/f.so`` built from `source` with g++ (the test is skipped where g++ is not installed)."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    (folder / "f.cpp").write_text(source)
    subprocess.run([gxx, "-shared", "-fPIC", "-o", folder / "f.so", folder / "f.cpp", *libraries], check=True)


def test_a_cpu_extension_built_with_gxx_is_a_binary_of_the_solutions(tmp_path):
    _shared_library(
        tmp_path,
        'extern "C" int forward_kernel(int x) { return x + 1; }\nnamespace n { int helper() { return 2; } }\n',
    )
    found = elf_functions((tmp_path / "f.so").read_bytes())
    assert found is not None and "forward_kernel" in found
    assert elf_functions(b"#!/bin/sh\n" * 10) is None
    built = built_names(tmp_path)
    assert built.binaries == 1 and built.built == frozenset()  # a binary of its own, and no device kernel
    assert built_names(tmp_path / "absent").binaries == 0


def test_a_binary_s_imports_of_aten_kernels_past_the_dispatcher_are_read(tmp_path):
    """``at::cpu::clamp_min`` (and its kind) runs ATen's kernel with no profiler event, and a
    run-time lookup hides what it calls: both are read from the binary's imports. A call through
    the dispatcher (``at::relu``) is the profiler's to see, a helper of those namespaces
    (``at::cpu::is_avx512_vnni_supported``) and an allocation compute nothing: none is listed."""
    _shared_library(
        tmp_path,
        "#include <dlfcn.h>\n"
        "namespace at { int relu(int); namespace cpu { int clamp_min(int, int); bool is_avx512_vnni_supported(); }\n"
        "  namespace native { int gelu(int); int empty_like(int); } }\n"
        'extern "C" int forward(int x) { return at::relu(x) + at::cpu::clamp_min(x, 0) + at::native::gelu(x)'
        " + at::cpu::is_avx512_vnni_supported() + at::native::empty_like(x); }\n"
        'extern "C" void* lookup(void* h) { return dlsym(h, "x"); }\n',
        "-ldl",
    )
    built = built_names(tmp_path)
    assert built.binaries == 1
    assert built.aten_imports == {"at::cpu::clamp_min", "at::native::gelu", "dlsym"}
    plain = tmp_path / "plain"
    plain.mkdir()
    _shared_library(
        plain, 'namespace at { int relu(int); }\nextern "C" int f(int x) { return at::relu(x); }\n'
    )
    assert built_names(plain).aten_imports == frozenset()


class _Worker:
    """A worker whose profile reply is given (the candidate's report, forged or not)."""

    def __init__(self, reply):
        self.reply = reply

    def request(self, header, tensors, timeout_s):
        return self.reply, []

    def kill(self):
        pass


class _CudaContext:
    device = torch.device("cuda")

    def input_spec(self):
        return {}, []


def test_a_forged_profile_naming_kernels_the_solution_never_built_gains_nothing():
    """Plain PyTorch's worker reports a launch 'of its own' under any name it likes: nothing was
    built and no Triton kernel is defined, so every row is ATen's."""
    rows = [["native", 7, 1.0, -1, -1], ["my_fast_gelu", 7, 5.0, -1, -1], [GELU_EAGER, 7, 0.01, -1, 8]]
    cov = account(_Worker({"ok": True, "kernels": rows}), _CudaContext(), 1, KernelIdentity(), "strict", 10)
    assert cov.custom_fraction == 0.0
    assert all(origin != "solution" for _n, origin, _ms in cov.kernels)


def test_a_profile_reporting_more_gpu_time_than_the_call_had_is_timing_tamper():
    honest = Coverage(0.9, (), "strict", "3 device activities, 0.120 ms GPU time")
    assert reconcile(honest, 0.1, "small") is None  # within streams side by side and the profiler's cost
    forged = Coverage(0.99, (), "strict", "2 device activities, 6.000 ms GPU time")
    reason = reconcile(forged, 0.1, "small")
    assert reason is not None and reason.code.value == "timing_tamper" and "'small'" in reason.message
    unprofiled = Coverage(None, (), "strict", "profiling failed (crash): ...")
    assert reconcile(unprofiled, 0.1, "small") is None
    assert accounting.RECONCILE_STREAMS >= 2  # two streams side by side are an honest pattern


def _profiled_kernels(fn, *args) -> list[str]:
    """The device kernels one call of `fn` ran, as the worker's profiler lists them."""
    from torch.profiler import ProfilerActivity, profile

    from kernelproof.worker.clock import kernels_of_call

    fn(*args)  # warm: a compile, an algorithm choice
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return [row[0] for row in kernels_of_call(prof)]


@pytest.mark.gpu
def test_real_eager_and_compile_profiles_are_never_a_name_matching_solutions():
    """On the device: the kernels eager PyTorch and torch.compile run for GELU, a sum and a matmul
    are never the solution's for a comment naming ``native`` or Triton kernels named after ATen's;
    the compiled GELU's kernel is the baseline's even for a Triton kernel of its very name."""
    x = torch.randn(4096, 4096, device="cuda")
    eager = _profiled_kernels(lambda t: (torch.nn.functional.gelu(t), t.sum(dim=-1), t @ t), x)
    compiled_gelu = torch.compile(torch.nn.functional.gelu)
    compiled = _profiled_kernels(compiled_gelu, x)
    assert eager and compiled, (eager, compiled)
    for identity in (
        KernelIdentity(jitted=frozenset(triage(COMMENT_NAMES_NATIVE).kernel_names)),
        _triton("native"),
        _triton("vectorized_elementwise_kernel"),
        _triton("GeluCUDAKernelImpl"),
    ):
        assert [n for n in eager + compiled if origin_of(n, identity) == "solution"] == []
    same_name = _triton(qualified_name(compiled[0])).with_baseline(compiled)
    assert [n for n in compiled if origin_of(n, same_name) == "solution"] == []


def test_an_optimised_extension_alone_names_its_kernels_stubs_mangled_or_inlined(tmp_path):
    """What a load_inline build leaves: one host .so, no cubin beside it. nvcc mangles each stub as
    a C++ function (``_Z41__device_stub__Z17...``) and, at -O3, inlines a template kernel's stub into
    its launch, leaving only its registration by name: every launched kernel is still named, and no
    host function or CUDA runtime function of the binary is."""
    nvcc = _nvcc()
    src = tmp_path / "k.cu"
    src.write_text(
        CUDA_SOURCE
        + "template <typename T> __global__ void twice(const T* x, T* y) { y[0] = 2 * x[0]; }\n"
        + "void launch_twice(const float* x, float* y) { twice<float><<<1, 1>>>(x, y); }\n"
    )
    ro = tmp_path / "ro"
    (ro / "ext").mkdir(parents=True)
    flags = ["-O3", "--use_fast_math", "-lineinfo", "-Xcompiler", "-fPIC", "-shared", "-arch=sm_90"]
    subprocess.run([nvcc, *flags, "-o", ro / "ext" / "k.so", src], check=True)
    identity = built_names(ro)
    assert identity.binaries == 1
    assert {"myns::scale_kernel", "plain_c", "twice"} <= identity.built
    assert not {n for n in identity.built if n.startswith("cuda") or n in ("launch", "launch_twice")}
    assert "ampere_sgemm_128x64_nn" not in identity.built
    assert origin_of("void twice<float>(float const*, float*)", identity) == "solution"
