"""A run reply whose input checksums disagree with the parent's own draw is the worker's word
against the parent's facts: protocol_violation, the solution's failure, never kernelproof's own
internal_error (I10). The solution shares the worker's process and can forge the reply or disturb
the worker's draw; either way nothing else in that reply is used."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kernelproof.evaluate.correctness import _judge_reply
from kernelproof.inputs import checksum
from kernelproof.verdict import Reason, ReasonCode


def _judge(reported: list[float]):
    args = [torch.arange(12, dtype=torch.float32).reshape(3, 4)]
    case = SimpleNamespace(case_id="base/normal/0")
    return _judge_reply(
        None, case, args, [], [], {"ok": True, "checksums": reported}, [], {"draw": True}, None, None, None
    ), checksum(args)


def test_a_reply_claiming_other_inputs_than_the_seed_gives_is_a_protocol_violation():
    judged, ours = _judge([ours_plus_one := 1e6])
    assert ours != ours_plus_one
    assert isinstance(judged, Reason) and judged.code is ReasonCode.PROTOCOL_VIOLATION
    assert "checksums differ" in judged.message


def test_a_reply_without_checksums_for_a_drawn_case_is_a_protocol_violation():
    judged, _ = _judge([])
    assert isinstance(judged, Reason) and judged.code is ReasonCode.PROTOCOL_VIOLATION


def test_matching_checksums_go_on_to_the_outputs():
    args = [torch.arange(12, dtype=torch.float32).reshape(3, 4)]
    case = SimpleNamespace(case_id="base/normal/0")
    judged = _judge_reply(
        None,
        case,
        args,
        [torch.zeros(1)],
        [],
        {"ok": True, "checksums": [checksum(args)]},
        [],
        {"draw": True},
        None,
        None,
        None,
    )
    # past the checksum: the outputs are counted next (none came back for one expected output)
    assert isinstance(judged, Reason) and judged.code is ReasonCode.WRONG_SHAPE
