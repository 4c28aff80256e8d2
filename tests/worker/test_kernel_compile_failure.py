"""A Triton kernel its JIT cannot compile at launch is the solution's compile error, never a runtime
error that a large task's evaluation blames on the device's size or re-runs alone for.

On an H100, KernelBench level1/21_Sigmoid's Triton kernel with a non-power-of-two ``tl.arange``
came back ``too_large`` ("footprint 90 GB, 78 GB are admitted, and the candidate's worker failed
(... forward raised CompilationError ...)"); on an H200 the same failure, a ``runtime_error`` near
the device's edge, paid for the reference's re-run alone on the whole device.
"""

from __future__ import annotations

import warnings

import pytest

from kernelproof.evaluate.memory_blame import memory_shaped
from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import reason_of
from kernelproof.worker import calls, program


def _real_compile_failure() -> BaseException:
    """What Triton's own compiler raises for a kernel it refuses (its front end needs no GPU)."""
    triton = pytest.importorskip("triton")
    tl = pytest.importorskip("triton.language")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    def kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 0.0, mask=offs < n)

    # JITFunction itself, not triton.jit: the suite runs under TRITON_INTERPRET=1, whose kernels never compile
    source = ASTSource(
        JITFunction(kernel), {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 1000}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            triton.compile(source, target=GPUTarget("cuda", 90, 32))
        except Exception as exc:  # noqa: BLE001  (the class is what is tested)
            return exc
    pytest.fail("Triton compiled a tl.arange of 1000")


def test_tritons_own_compile_failure_is_a_compile_error():
    exc = _real_compile_failure()
    assert program.is_kernel_compile_failure(exc), type(exc).__mro__
    reply = calls.call_failure(exc, "forward", "/nowhere/solution.py")
    assert reply["code"] == ReasonCode.COMPILE_ERROR.value, reply
    assert "Triton could not compile a kernel" in reply["message"]
    assert "power of 2" in reply["detail"] + reply["message"]
    assert not memory_shaped(reason_of(reply))


def test_a_compile_failure_re_raised_in_the_solutions_words_is_still_one():
    cause = _real_compile_failure()
    try:
        raise RuntimeError("my kernel failed") from cause
    except RuntimeError as exc:
        reply = calls.call_failure(exc, "forward", "/nowhere/solution.py")
    assert reply["code"] == ReasonCode.COMPILE_ERROR.value


class CompilationError(Exception):
    """The same name in another module: not Triton's class."""


class Posing(Exception):
    """A solution's class that claims Triton's module and name: identity decides, not the claim."""


Posing.__module__, Posing.__qualname__ = "triton.compiler.errors", "CompilationError"


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("CUDA error: out of memory"),
        CompilationError("at 2:11: arange's range must be a power of 2"),
        Posing("at 2:11: arange's range must be a power of 2"),
        ValueError("at 2:11: CompilationError"),
    ],
)
def test_other_failures_keep_their_runtime_codes(exc):
    """A lack of device memory in a custom extension raises RuntimeError: still memory-shaped, the
    parent's facts decide it. Words or a look-alike name decide nothing."""
    reply = calls.call_failure(exc, "forward", "/nowhere/solution.py")
    assert reply["code"] == ReasonCode.RUNTIME_ERROR.value, reply
    assert not program.is_kernel_compile_failure(exc)


def test_ptxas_refusing_a_kernel_is_a_compile_error_too():
    errors = pytest.importorskip("triton.runtime.errors")
    reply = calls.call_failure(errors.PTXASError("ptxas fatal: Unresolved extern function"), "forward", "")
    assert reply["code"] == ReasonCode.COMPILE_ERROR.value, reply


def test_a_launch_beyond_the_sms_shared_memory_is_the_kernels_configuration_not_the_devices_memory():
    """Triton's OutOfResources (shared memory, registers): a runtime error, never weighed as a lack
    of device memory (kernelproof/evaluate/memory_blame.py)."""
    errors = pytest.importorskip("triton.runtime.errors")
    exc = errors.OutOfResources(262144, 232448, "shared memory")
    reply = calls.call_failure(exc, "forward", "/nowhere/solution.py")
    assert reply["code"] == ReasonCode.RUNTIME_ERROR.value
    assert program.never_memory(exc) and reason_of(reply).memory_excluded
    assert not memory_shaped(reason_of(reply))
