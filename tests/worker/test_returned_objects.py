"""What a call returned is read without running the solution's code (C3, D4).

The harness flattens a call's outputs and calls methods of the tensors in them after the timed
window; anything of the solution's that runs there is work outside every window. A tuple subclass
with its own __iter__, an object whose __class__ claims to be a tuple, and a tensor carrying a
method of its own each ran the solution's kernel there (tests/exploits/solutions/c3_lazy_tuple_output,
c3_spoofed_tuple_class, d4_tensor_method_shadow); these are the pieces that stop them, in-process.
"""

from __future__ import annotations

import collections

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.worker import addresses, calls
from kernelproof.worker.checks import aliasing, shadows


class Trap(Exception):
    """Raised by any solution method the harness must never call."""


class LazyTuple(tuple):
    def __iter__(self):
        raise Trap("__iter__")

    def __len__(self):
        raise Trap("__len__")

    def __getitem__(self, i):
        raise Trap("__getitem__")


class LazyList(list):
    def __iter__(self):
        raise Trap("__iter__")


class ClaimsTuple:
    __class__ = tuple  # isinstance(obj, tuple) is True

    def __iter__(self):
        raise Trap("__iter__")


def test_a_tuple_subclass_is_read_as_stored_without_its_own_methods():
    y = torch.ones(3)
    assert isinstance(LazyTuple((y,)), tuple)
    out = calls.outputs(LazyTuple((y,)))
    assert len(out) == 1 and out[0] is y


def test_a_list_subclass_is_read_as_stored():
    a, b = torch.ones(2), torch.zeros(2)
    out = calls.outputs(LazyList([a, b]))
    assert out[0] is a and out[1] is b


def test_an_object_that_claims_to_be_a_tuple_is_one_output():
    obj = ClaimsTuple()
    assert isinstance(obj, tuple)  # what the harness used to trust
    assert calls.outputs(obj) == [obj]


def test_plain_containers_namedtuples_and_torch_return_types_are_flattened():
    a, b = torch.ones(2), torch.zeros(2)
    assert calls.outputs(a) == [a]
    assert [t is x for t, x in zip(calls.outputs((a, b)), (a, b))] == [True, True]
    pair = collections.namedtuple("Pair", "first second")(a, b)
    assert calls.outputs(pair)[1] is b
    values, indices = calls.outputs(torch.max(torch.arange(6.0).reshape(2, 3), dim=1))
    assert values.tolist() == [2.0, 5.0] and indices.tolist() == [2, 2]


def test_a_method_set_on_a_tensor_is_named():
    y = torch.ones(3)
    assert shadows.shadowed(y) == []
    y.detach = lambda: None
    y.untyped_storage = lambda: None
    y.tag = "a library's own note"  # not a name of torch.Tensor's: left alone
    assert shadows.shadowed(y) == ["detach", "untyped_storage"]
    reply = shadows.check([torch.ones(1), y], "output")
    assert reply is not None and reply["code"] == ReasonCode.HARNESS_HOOKED.value
    assert "output 1" in reply["message"] and "detach" in reply["message"]
    assert shadows.check([torch.ones(1)], "output") is None


def test_a_dict_subclass_with_a_lying_iter_does_not_hide_a_shadow():
    class Quiet(dict):
        def __iter__(self):
            return iter(())

        def keys(self):
            return []

    y = torch.ones(3)
    y.__dict__ = Quiet(clone=lambda: None)
    assert shadows.shadowed(y) == ["clone"]


def test_the_overlap_and_reused_address_helpers_call_through_the_class():
    x = torch.arange(4.0)
    view = x[1:]
    view.untyped_storage = lambda: (_ for _ in ()).throw(Trap("untyped_storage"))
    assert aliasing.overlaps(view, x)
    storage = x.untyped_storage()  # one Python object per storage, kept: it takes attributes too
    storage.nbytes = lambda: 0
    storage.data_ptr = lambda: (_ for _ in ()).throw(Trap("data_ptr"))
    assert x.untyped_storage().nbytes() == 0  # what a naive overlap test would have read
    assert aliasing.overlaps(view, x)
    old = torch.zeros(4)
    old.copy_ = lambda src: (_ for _ in ()).throw(Trap("copy_"))
    old.stride = lambda: (_ for _ in ()).throw(Trap("stride"))
    (written,) = addresses.earlier([old], [torch.arange(4.0)])
    assert written is old and old.tolist() == [0.0, 1.0, 2.0, 3.0]


class Unspeakable(RuntimeError):
    """An exception whose description is itself the solution's code, and raises."""

    def __str__(self):
        raise ValueError("no description")


def test_an_exception_that_cannot_be_described_is_the_solutions_runtime_error():
    # Before, describing it raised inside the harness: the worker ended with its harness's status
    # (exit 3), a crash whose words blamed "its harness failed, or the solution ended it".
    reply = calls.call_failure(Unspeakable(), "forward", "/nowhere/solution.py")
    assert reply["code"] == ReasonCode.RUNTIME_ERROR.value
    assert reply["message"] == "forward raised Unspeakable, and describing it raised ValueError"


def test_a_constructor_exception_that_cannot_be_described_is_a_load_failure(tmp_path):
    from kernelproof.worker import program

    path = tmp_path / "solution.py"
    path.write_text(
        "import torch.nn as nn\n"
        "class E(RuntimeError):\n"
        "    def __str__(self):\n"
        "        raise ValueError('no')\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n"
        "        raise E()\n"
    )
    model, failed = program.load_candidate(str(path), [])
    assert model is None and failed is not None
    assert "describing why raised ValueError" in failed.message
