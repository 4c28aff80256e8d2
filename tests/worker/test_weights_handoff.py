"""The harness's weights reach ModelNew through load_state_dict, so its load hooks see them."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelproof.worker.program import copy_weights, unmatched_state


class _Folded(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("packed", torch.zeros(2, 3), persistent=False)
        self.loads = 0
        self.register_load_state_dict_post_hook(lambda m, keys: m._repack())

    def _repack(self):
        self.loads += 1
        with torch.no_grad():
            self.packed.copy_(self.lin.weight * 2)


def test_weights_by_name_fire_the_modules_load_hooks():
    m = _Folded()
    w, b = torch.randn(2, 3), torch.randn(2)
    assert copy_weights(m, ["lin.weight", "lin.bias"], [w, b]) == "by_name"
    assert m.loads == 1 and torch.equal(m.lin.weight, w) and torch.equal(m.packed, w * 2)


def test_weights_by_order_fire_the_hooks_too_and_keep_the_modules_dtype():
    m = _Folded().to(torch.float64)
    w, b = torch.randn(2, 3), torch.randn(2)
    assert copy_weights(m, ["other.weight", "other.bias"], [w, b]) == "by_order"
    assert m.loads == 1 and m.lin.weight.dtype == torch.float64
    assert torch.allclose(m.lin.weight, w.double())


def test_state_the_reference_has_no_value_for_is_named():
    m = _Folded()
    assert unmatched_state(m, ["lin.weight", "lin.bias"]) == ["packed"]


def test_a_module_that_matches_nothing_is_not_copied():
    m = _Folded()
    assert copy_weights(m, ["x"], [torch.randn(5)]) == "not_copied" and m.loads == 0
