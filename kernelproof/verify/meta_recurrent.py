"""Recurrent layers' outputs on the meta device, from their documented shapes.

Why: the footprint estimate (kernelproof/verify/footprint.py) runs the reference on the meta
device. ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` call one fused operator (``torch._VF.lstm``,
``gru``, ``rnn_tanh``, ``rnn_relu``) which has no meta kernel of its own: on meta it unrolls into
a few operators per time step, layer and direction, each dispatched to a meta function written in
Python. KernelBench's level-3 LSTM and GRU tasks (512 steps, 6 layers, both directions) took
4-11 s each on one core, holding the interpreter's lock the whole time; on an H200 with four
evaluations in flight four of them stood in ``setup/footprint`` for 12-58 s and starved every
other evaluation thread of the process.

The shapes are known without running anything (torch.nn.LSTM's documentation): the output is the
input's length and batch with ``directions * hidden`` features, where ``hidden`` is the last size
of the initial hidden state (``proj_size`` when projections are on), and the final states have
the initial states' shapes. Anything not in the expected form returns None, and the operator runs
as before.
"""

from __future__ import annotations

from typing import Any

import torch

_VF = torch._C._VariableFunctions
RECURRENT = {_VF.lstm: 2, _VF.gru: 1, _VF.rnn_tanh: 1, _VF.rnn_relu: 1}  # operator -> final states


def recurrent_outputs(func: Any, args: tuple) -> tuple[torch.Tensor, ...] | None:
    """The outputs of a fused recurrent operator as meta tensors, or None when `func` is not one
    or its arguments are not in a form read here (then it runs as it is)."""
    states = RECURRENT.get(func)
    if states is None or not args or not isinstance(args[0], torch.Tensor):
        return None
    x = args[0]
    # The packed form puts the batch sizes (a tensor) before the hidden state: an LSTM's hidden
    # state is a pair, the others' a tensor followed by the parameters' list.
    packed = len(args) > 2 and isinstance(args[1] if states == 2 else args[2], torch.Tensor)
    hx_at = 2 if packed else 1
    if len(args) <= hx_at + 6:
        return None
    hx = args[hx_at]
    hidden = tuple(hx) if states == 2 and isinstance(hx, (tuple, list)) else (hx,)
    if len(hidden) != states or not all(isinstance(h, torch.Tensor) and h.dim() == 3 for h in hidden):
        return None
    bidirectional = args[hx_at + 6]
    if not isinstance(bidirectional, bool):
        return None
    features = (2 if bidirectional else 1) * hidden[0].shape[-1]
    if packed:  # (sum of the batch sizes, input size): the output has the same rows
        if x.dim() != 2:
            return None
        shape = (x.shape[0], features)
    else:
        if x.dim() != 3:
            return None
        shape = (*x.shape[:2], features)  # (T, B) or, batch first, (B, T): kept as given
    out = torch.empty(shape, dtype=x.dtype, device="meta")
    return (out, *(torch.empty(h.shape, dtype=h.dtype, device="meta") for h in hidden))
