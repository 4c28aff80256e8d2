"""Recurrent layers on the meta device: their documented shapes, not an unrolled meta run.

The footprint estimate of KernelBench's level-3 LSTM and GRU tasks took 4-11 s each on one core
(an H200 sweep: 12-58 s in ``setup/footprint`` with four in flight), all of it the fused operator
unrolled into Python meta functions step by step. Here the shortcut's outputs are compared with
that unrolled run, the reference, at sizes where it is quick.
"""

from __future__ import annotations

import textwrap

import pytest
import torch
from torch import nn

from kernelproof.task import load_task
from kernelproof.verify import footprint
from kernelproof.verify.meta_recurrent import RECURRENT, recurrent_outputs

CONFIGS = [
    ("LSTM", {}),
    ("LSTM", {"bidirectional": True, "batch_first": True}),
    ("LSTM", {"proj_size": 5, "num_layers": 3}),
    ("LSTM", {"proj_size": 3, "bidirectional": True, "batch_first": True, "num_layers": 2}),
    ("GRU", {}),
    ("GRU", {"bidirectional": True, "num_layers": 2}),
    ("GRU", {"batch_first": True, "bias": False}),
    ("RNN", {"nonlinearity": "relu", "bidirectional": True}),
    ("RNN", {"nonlinearity": "tanh", "batch_first": True, "num_layers": 3}),
]


class _Seen(torch.overrides.TorchFunctionMode):
    """Records which fused recurrent operators were called, and answers them by their shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        shaped = recurrent_outputs(func, args)
        if shaped is not None:
            self.answered += 1
            return shaped
        return func(*args, **(kwargs or {}))


def _flat(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, nn.utils.rnn.PackedSequence):
        return [out.data]
    return [t for item in out for t in _flat(item)]


def _inputs(kind: str, kw: dict, batched: bool, with_state: bool, dtype) -> tuple:
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    t, b = 7, 4
    x = torch.empty((b, t, 6) if kw.get("batch_first") else (t, b, 6), dtype=dtype, device="meta")
    if not batched:
        x = torch.empty((t, 6), dtype=dtype, device="meta")
    if not with_state:
        return (x,)
    shape = (layers, b, kw.get("proj_size") or 8) if batched else (layers, kw.get("proj_size") or 8)
    h = torch.empty(shape, dtype=dtype, device="meta")
    if kind == "LSTM":
        c = torch.empty((*shape[:-1], 8), dtype=dtype, device="meta")
        return (x, (h, c))
    return (x, h)


@pytest.mark.parametrize("kind, kw", CONFIGS)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_shapes_match_the_unrolled_meta_run(kind, kw, batched, with_state, dtype):
    layer = getattr(nn, kind)(6, 8, **kw).to(device="meta", dtype=dtype)
    args = _inputs(kind, kw, batched, with_state, dtype)
    want = _flat(layer(*args))
    with _Seen() as seen:
        got = _flat(layer(*args))
    assert seen.answered == 1
    assert [(t.shape, t.dtype, t.device.type) for t in got] == [
        (t.shape, t.dtype, t.device.type) for t in want
    ]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_a_packed_sequence_keeps_its_rows(kind, bidirectional):
    layer = getattr(nn, kind)(6, 8, num_layers=2, bidirectional=bidirectional).to("meta")
    lengths = torch.tensor([7, 5, 2])
    x = torch.empty(7, 3, 6, device="meta")
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=True)
    want = _flat(layer(packed))
    with _Seen() as seen:
        got = _flat(layer(packed))
    assert seen.answered == 1
    assert [(t.shape, t.dtype) for t in got] == [(t.shape, t.dtype) for t in want]


def test_other_operators_and_other_forms_run_as_they_are():
    x = torch.empty(3, 4, device="meta")
    assert recurrent_outputs(torch.relu, (x,)) is None
    assert recurrent_outputs(torch._VF.lstm, (x,)) is None  # too few arguments: not read here
    assert recurrent_outputs(torch._VF.gru, ("not a tensor",)) is None
    assert set(RECURRENT) == {torch._VF.lstm, torch._VF.gru, torch._VF.rnn_tanh, torch._VF.rnn_relu}


TASK = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(16, 32, 3, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(64, 24, 2)
            self.fc = nn.Linear(24, 5)

        def forward(self, x, h0, c0):
            out, (hn, cn) = self.lstm(x, (h0, c0))
            out, hg = self.gru(out.transpose(0, 1))
            return self.fc(out[-1]), hn, cn, hg

    def get_inputs():
        return [torch.rand(4, 9, 16), torch.rand(6, 4, 32), torch.rand(6, 4, 32)]

    def get_init_inputs():
        return []
    """
)


def test_a_recurrent_tasks_estimate_is_the_one_the_unrolled_run_gives(tmp_path, monkeypatch):
    path = tmp_path / "recurrent_task.py"
    path.write_text(TASK)
    task = load_task(str(path))
    answered = []

    def counted(func, args):
        shaped = recurrent_outputs(func, args)
        answered.append(shaped is not None)
        return shaped

    monkeypatch.setattr(footprint, "recurrent_outputs", counted)
    fast = footprint.estimate_variant(task, "default")
    assert answered == [True, True]  # the LSTM and the GRU, each answered by its shapes
    monkeypatch.setattr(footprint, "RECURRENT", {})  # the operators unrolled on meta, as before
    slow = footprint.estimate_variant(task, "default")
    assert not isinstance(fast, str)
    assert fast == slow
    assert fast.output_bytes == 4 * (4 * 5 + 2 * 6 * 4 * 32 + 2 * 4 * 24)
