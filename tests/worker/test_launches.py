"""Launch accounting on the CPU: the solution's launches are marked and counted, the ATen ops a forward
ran outside them are listed, and a forward without a launch of its own is no_custom_kernel.

One profile request (two counted forwards) per test, in a real candidate worker (Triton through its
interpreter); the wrappers themselves are also tested in this process, where nothing needs compiling.
"""

from __future__ import annotations

import math
import types

import pytest
import torch
from worker_session import DATA, EXPLOITS, loaded

from kernelproof.measure.accounting import account_cpu
from kernelproof.measure.attribution import KernelIdentity
from kernelproof.measure.claims import cpu_claims
from kernelproof.verdict import SPEED_WITHHELD_ATEN, Coverage, Reason
from kernelproof.worker import launches

SCALE_RELU = DATA / "tasks" / "scale_relu.py"


def _profiled(task, solution) -> tuple[Coverage, Reason | None]:
    with loaded(task, solution) as (worker, ctx):
        own = ("scale_relu_kernel", "relu_kernel", "_matmul_kernel")
        return account_cpu(worker, ctx, 7, own, "strict", 120)


def test_a_triton_launch_is_counted_and_the_interpreters_own_ops_are_not_listed():
    cov, reason = _profiled(SCALE_RELU, DATA / "solutions" / "scale_relu_triton.py")
    assert reason is None and cov.custom_launches == 1, cov.note
    # the output's allocation does no work; the argument copies are the launch's
    assert cov.aten_outside == ()
    assert "only the presence of a launch is judged" in cov.note and "scale_relu_kernel" in cov.note


def test_a_torch_epilogue_outside_the_launch_is_listed_and_the_forward_still_passes():
    cov, reason = _profiled(SCALE_RELU, DATA / "solutions" / "scale_relu_torch_epilogue.py")
    assert reason is None and cov.custom_launches == 1, cov.note
    assert cov.aten_outside == ("aten::mul", "aten::add"), cov.aten_outside


def test_a_fallback_whose_launch_raises_is_no_custom_kernel_naming_what_ran():
    cov, reason = _profiled(
        EXPLOITS / "tasks" / "matmul.py", EXPLOITS / "solutions" / "e2_try_except_fallback.py"
    )
    assert cov.custom_launches == 0, cov.note
    assert "triton:_matmul_kernel" in cov.note  # launched, raised: not a launch
    assert reason is not None and reason.code.value == "no_custom_kernel"
    assert "aten::matmul" in reason.message and "raised: triton:_matmul_kernel" in reason.message


def test_a_kernel_launched_only_while_profiled_is_no_custom_kernel():
    cov, reason = _profiled(SCALE_RELU, DATA / "solutions" / "launches_only_when_profiled.py")
    assert cov.custom_launches == 0 and "scale_relu_kernel" in cov.note, cov.note  # the profiled one did
    assert reason is not None and reason.code.value == "no_custom_kernel"
    assert "without the profiler" in reason.message


def test_a_forward_that_fails_only_while_profiled_fails_the_verdict():
    cov, reason = _profiled(SCALE_RELU, DATA / "solutions" / "raises_when_profiled.py")
    assert reason is not None and reason.code.value == "runtime_error", cov.note
    assert "not while watched" in reason.message and cov.custom_launches is None


def test_a_range_named_as_the_harness_names_a_launch_is_forbidden():
    cov, reason = _profiled(SCALE_RELU, DATA / "solutions" / "forged_launch_range.py")
    assert reason is not None and reason.code.value == "forbidden_construct", cov.note
    assert "launch ranges" in reason.message and cov.custom_launches is None


def test_replacing_the_wrapped_load_inline_is_forbidden_at_load():
    from worker_session import load_header

    from kernelproof.host.process import SpawnSpec, WorkerProcess
    from kernelproof.task import load_task
    from kernelproof.verify.case_plan import build_variant, make_inputs

    ctx = build_variant(load_task(SCALE_RELU), "small", torch.device("cpu"), "eval", 0)
    make_inputs(ctx, "task", 0)
    worker = WorkerProcess(SpawnSpec("candidate", "cpu"))
    try:
        staged = worker.stage_solution(str(DATA / "solutions" / "unwraps_load_inline.py"))
        header, tensors = load_header(ctx, staged)
        reply, _ = worker.request(header, tensors, 120)
    finally:
        worker.close()
    assert not reply.get("ok") and reply["code"] == "forbidden_construct", reply
    assert "load_inline" in reply["message"]


class _Reply:
    """A worker whose profile reply is given."""

    def __init__(self, reply):
        self.reply = reply

    def request(self, header, tensors, timeout_s):
        return self.reply, []


class _CpuContext:
    device = torch.device("cpu")
    # one float input of 64 x 96: an ATen op over at most 384 elements is over a small tensor
    slots = [types.SimpleNamespace(shape=(64, 96), dtype="float32", kind="float")]

    def input_spec(self):
        return {}, []


def test_when_launches_could_not_be_marked_nothing_is_decided():
    why = "Triton's interpreter cannot be imported (ImportError: no triton)"
    cov, reason = account_cpu(_Reply({"ok": True, "unmarked": why}), _CpuContext(), 1, (), "strict", 10)
    assert reason is None and cov.custom_launches is None
    assert why in cov.note and "nothing was decided" in cov.note


def test_a_launch_of_a_kernel_the_solution_does_not_define_is_not_its_own():
    launched = [["triton:library_kernel", True]]
    reply = {"ok": True, "launches": launched, "unwatched": launched, "aten_outside": [["aten::mm", 1]]}
    cov, reason = account_cpu(_Reply(reply), _CpuContext(), 1, ("my_kernel",), "strict", 10)
    assert cov.custom_launches == 0 and reason.code.value == "no_custom_kernel"
    assert "aten::mm" in reason.message


BUILT = KernelIdentity(jitted=frozenset({"my_kernel"}), binaries=1)  # the parent built an extension


def test_an_extension_function_and_an_own_triton_kernel_are_launches_of_the_solution():
    launched = [["extension:forward", True], ["triton:my_kernel", True]]
    reply = {"ok": True, "launches": launched, "unwatched": launched, "aten_outside": []}
    cov, reason = account_cpu(_Reply(reply), _CpuContext(), 1, BUILT, "strict", 10)
    assert reason is None and cov.custom_launches == 2


def test_an_extension_launch_where_the_parent_built_nothing_is_not_the_solutions():
    """The launch record is the worker's report: plain PyTorch claiming an extension launch gains
    nothing where the parent built no binary for it."""
    launched = [["extension:forged", True]]
    reply = {"ok": True, "launches": launched, "unwatched": launched, "aten_outside": [["aten::relu", 1]]}
    cov, reason = account_cpu(_Reply(reply), _CpuContext(), 1, KernelIdentity(), "strict", 10)
    assert cov.custom_launches == 0 and reason is not None and reason.code.value == "no_custom_kernel"


def _wrapper_reply(op: str = "aten::relu", largest: int = 64 * 96, *more) -> dict:
    """A load_inline function whose body is ``return torch::relu(x);``, as the worker reports it:
    each op inside the launch with the largest input it had, in elements."""
    launched = [["extension:relu_forward", True]]
    return {
        "ok": True,
        "launches": launched,
        "unwatched": launched,
        "aten_outside": [],
        "aten_in_launches": [["extension:relu_forward", op, 1, largest], *more],
    }


def test_a_launch_that_ran_the_references_own_op_is_aten_work_judged_as_plain_torch():
    reference = frozenset({"aten::relu", "aten::clamp_min"})
    cov, reason = account_cpu(_Reply(_wrapper_reply()), _CpuContext(), 1, BUILT, "strict", 10, reference)
    assert reason is None  # as plain PyTorch on the CPU: a pass, flagged (evaluate/timing.py)
    assert cov.custom_launches == 0 and cov.aten_launches == 1
    assert cov.aten_outside == ("aten::relu",)  # listed and counted as if it ran outside
    assert "ATen's work" in cov.note and "extension:relu_forward" in cov.note
    claims = cpu_claims("cuda", cov, reference)
    assert not claims.speed and claims.speed_withheld == SPEED_WITHHELD_ATEN
    assert claims.reference_ops_outside == ("aten::relu",)


def test_an_extension_that_sums_its_partial_results_with_aten_is_still_the_solutions():
    """Its own loops did the work; the ATen op it ran (one the reference never runs) was over a
    small tensor (48 partial sums), and a copy of the input never counts."""
    reference = frozenset({"aten::relu"})
    partials = _wrapper_reply("aten::sum", 48, ["extension:relu_forward", "aten::clone", 1, 64 * 96])
    cov, reason = account_cpu(_Reply(partials), _CpuContext(), 1, BUILT, "strict", 10, reference)
    assert reason is None and cov.custom_launches == 1 and cov.aten_launches == 0
    assert cpu_claims("cuda", cov, reference).speed


@pytest.mark.parametrize(
    "rows",
    [
        # ``return x * (x > 0);`` for a relu whose reference runs aten::relu: other ops, same work
        (("aten::gt", 64 * 96), ("aten::mul", 64 * 96)),
        (("aten::einsum", 1 << 62),),  # its operands a list of tensors: not known to be small
        (("aten::mul", 32 * 192),),  # the input cut into 32 chunks of 192: their sum counts
        (("aten::where", 385),),  # just past 1/16 of the inputs
    ],
)
def test_a_launch_whose_aten_ops_worked_on_the_task_s_data_is_aten_work_too(rows):
    reference = frozenset({"aten::relu", "aten::clamp_min"})
    (op, largest), *rest = rows
    more = [["extension:relu_forward", o, 1, n] for o, n in rest]
    reply = _wrapper_reply(op, largest, *more)
    cov, reason = account_cpu(_Reply(reply), _CpuContext(), 1, BUILT, "strict", 10, reference)
    assert reason is None and cov.custom_launches == 0 and cov.aten_launches == 1
    assert set(cov.aten_outside) == {o for o, _ in rows}
    assert not cpu_claims("cuda", cov, reference).speed


def test_a_binary_calling_atens_kernels_past_the_dispatcher_runs_aten_work_unseen():
    """``at::cpu::clamp_min`` in a wrapper leaves no profiler event: its binary's imports say it."""
    imports = KernelIdentity(binaries=1, aten_imports=frozenset({"at::cpu::clamp_min"}))
    reply = {**_wrapper_reply(), "aten_in_launches": []}
    reference = frozenset({"aten::relu"})
    cov, reason = account_cpu(_Reply(reply), _CpuContext(), 1, imports, "strict", 10, reference)
    assert reason is None and cov.custom_launches == 0 and cov.aten_launches == 1
    assert "at::cpu::clamp_min" in cov.note
    assert not cpu_claims("cuda", cov, reference).speed


@pytest.fixture
def restored(monkeypatch):
    """Whatever install() wraps in this process is put back after the test."""
    from torch.utils import cpp_extension as ce
    from triton.runtime.interpreter import InterpretedFunction

    monkeypatch.setattr(InterpretedFunction, "run", InterpretedFunction.run)
    monkeypatch.setattr(ce, "load_inline", ce.load_inline)
    monkeypatch.setattr(ce, "load", ce.load)
    return monkeypatch


def test_without_an_interpreter_launch_to_wrap_the_worker_says_why(restored):
    from triton.runtime.interpreter import InterpretedFunction

    restored.delattr(InterpretedFunction, "run")
    marks = launches.install()
    assert "no run method" in marks.missing and "InterpretedFunction.run" not in marks.installed


def test_an_extension_functions_call_is_a_launch_once_it_returns(restored):
    from torch.utils import cpp_extension as ce

    fake = types.ModuleType("fake_extension")
    fake.root = math.sqrt  # a builtin, as pybind's functions are
    fake.fails = math.log
    restored.setattr(ce, "load_inline", lambda *a, **k: fake)
    marks = launches.install()
    module = ce.load_inline(name="fake_extension", cpp_sources="")
    assert module.root(4.0) == 2.0 and marks.stop() == []  # not recording: nothing kept
    marks.start()
    module.root(9.0)
    with pytest.raises(ValueError):
        module.fails(-1.0)
    assert marks.stop() == [("extension:root", True), ("extension:fails", False)]


class _Event:
    """A profiler event: its name and the event it is nested in."""

    def __init__(self, name, parent=None, shapes=()):
        self.name, self.cpu_parent, self.input_shapes = name, parent, list(shapes)
        self.cpu_children = []
        if parent is not None:
            parent.cpu_children.append(self)


def test_only_the_outermost_ops_that_compute_are_listed_outside_the_launches():
    from kernelproof.worker.profiling import _split

    launch = _Event("kernelproof.launch:triton:k")
    matmul = _Event("aten::matmul")
    moved = _Event("aten::movedim")  # a view: not listed, but what it runs in its own right is
    events = [
        _Event("aten::empty_like"),
        launch,
        _Event("aten::copy_", launch),  # the interpreter's argument copy: the launch's
        matmul,
        _Event("aten::mm", matmul),  # part of aten::matmul
        moved,
        _Event("aten::clone", moved),
        _Event("aten::sum"),
        _Event("aten::sum"),
    ]
    assert _split(events) == (1, [("aten::matmul", 1), ("aten::clone", 1), ("aten::sum", 2)])


def test_the_ops_inside_an_extension_launch_are_reported_by_launch_and_a_triton_launchs_are_not():
    from kernelproof.worker.profiling import _inside_extensions

    ext = _Event("kernelproof.launch:extension:kp_ops::relu")
    dispatched = _Event("kp_ops::relu", ext)  # the operator's own dispatcher event
    triton = _Event("kernelproof.launch:triton:k")
    relu = _Event("aten::relu", dispatched, shapes=[[64, 96]])
    events = [
        ext,
        dispatched,
        _Event("aten::empty_like", ext),  # no work
        relu,
        _Event("aten::clamp_min", relu),  # part of aten::relu
        triton,
        _Event("aten::copy_", triton),  # the interpreter's argument copy
        _Event("aten::relu"),  # outside every launch
    ]
    # each op with the largest input it had, in elements
    assert _inside_extensions(events) == [("extension:kp_ops::relu", "aten::relu", 1, 64 * 96)]


def test_an_op_whose_arguments_are_a_list_is_as_large_as_what_it_ran():
    """``torch::einsum("ij,jk->ik", {x, w})`` in a wrapper: the profiler records its arguments with
    no shapes, its aten::bmm with theirs; the GEMM is over the task's data, not a small tensor."""
    from kernelproof.worker.profiling import _inside_extensions

    ext = _Event("kernelproof.launch:extension:matmul_forward")
    einsum = _Event("aten::einsum", ext, shapes=[[], [], []])
    _Event("aten::bmm", einsum, shapes=[[1, 64, 32], [1, 32, 16]])
    events = [ext, einsum, *einsum.cpu_children]
    assert _inside_extensions(events) == [("extension:matmul_forward", "aten::einsum", 1, 64 * 32)]


def test_an_op_s_calls_count_together_and_a_list_argument_is_not_known_to_be_small():
    """A wrapper that relus the input in 32 chunks works over all of it; the profiler records a
    list of tensors with the shape ``[]`` and names its type."""
    from kernelproof.worker.profiling import UNKNOWN_SIZE, _inside_extensions

    ext = _Event("kernelproof.launch:extension:relu_forward")
    chunks = [_Event("aten::mul", ext, shapes=[[2, 96], []]) for _ in range(32)]
    listed = _Event("aten::einsum", ext, shapes=[[], []])
    listed.input_dtypes = ["", "TensorList"]
    rows = _inside_extensions([ext, *chunks, listed])
    assert ("extension:relu_forward", "aten::mul", 32, 32 * 192) in rows
    assert ("extension:relu_forward", "aten::einsum", 1, UNKNOWN_SIZE) in rows


def test_a_custom_operator_the_build_registered_is_a_launch_through_torch_ops(restored):
    """A TORCH_LIBRARY build (is_python_module=False) returns no module: its operators are called
    through torch.ops, and each call, through the packet or an overload of it, is a launch."""
    from torch.utils import cpp_extension as ce

    libraries = []

    def fake_load_inline(*args, **kwargs):  # what loading a TORCH_LIBRARY build does: register ops
        lib = torch.library.Library("kp_launch_test", "DEF")
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CPU")
        libraries.append(lib)
        return "/fake/kp_launch_test.so"

    restored.setattr(ce, "load_inline", fake_load_inline)
    marks = launches.install()
    ce.load_inline(name="kp_launch_test", cpp_sources="", is_python_module=False)
    op = torch.ops.kp_launch_test.twice
    assert isinstance(op, launches.CountedOp)
    marks.start()
    assert torch.equal(op(torch.ones(2)), torch.full((2,), 2.0))
    torch.ops.kp_launch_test.twice.default(torch.ones(1))
    assert marks.stop() == [("extension:kp_launch_test::twice", True)] * 2
    assert not isinstance(torch.ops.aten.add, launches.CountedOp)  # torch's own: never wrapped
