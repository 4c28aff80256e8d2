from __future__ import annotations

import json

import pytest

from kernelproof.agent.agent_errors import ConfigError
from kernelproof.agent.context import _ceilings, describe_device, device_text, read_task


def test_reads_the_metadata_without_running_the_task(tmp_path):
    task = tmp_path / "t.py"
    task.write_text(
        'raise SystemExit("never run")\nKERNELPROOF = {"precision": "bf16", "policy": "library-ok"}\n'
    )
    info = read_task(task)
    assert (info.precision, info.policy, info.mode) == ("bf16", "library-ok", "train")
    assert len(info.sha256) == 64 and info.name == "t"


BF16_TASK = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.rand(8, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


def test_a_task_without_metadata_gets_the_evaluators_contract(task_file, tmp_path):
    """An undeclared task is judged in the dtypes it is written in (kernelproof.verify.contract):
    the agent's context says the same, and ``--precision`` wins over it as it does for the evaluator."""
    assert read_task(task_file).precision == "fp32"
    bf16 = tmp_path / "bf16.py"
    bf16.write_text(BF16_TASK)
    assert read_task(bf16).precision == "bf16"
    assert read_task(bf16, "fp32").precision == "fp32"
    fp16 = tmp_path / "fp16.py"
    fp16.write_text(BF16_TASK.replace("bfloat16", "float16"))
    assert read_task(fp16).precision == "fp16"
    declared = tmp_path / "declared.py"
    declared.write_text(BF16_TASK + 'KERNELPROOF = {"precision": "fp16"}\n')
    assert read_task(declared).precision == "fp16"
    assert read_task(declared, "bf16").precision == "bf16"


def test_a_task_the_evaluator_cannot_load_is_a_config_error(tmp_path):
    plain = tmp_path / "p.py"
    plain.write_text("x = 1\n")
    with pytest.raises(ConfigError, match="defines no `Model`"):
        read_task(plain)


def test_a_task_that_does_not_parse_is_a_config_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def (:\n")
    with pytest.raises(ConfigError, match="does not parse"):
        read_task(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        read_task(tmp_path / "missing.py")


def test_cpu_device_needs_no_gpu():
    d = describe_device("cpu")
    assert d.kind == "cpu" and "interpreter" in device_text(d)


def test_ceilings_come_from_a_given_file_then_shipped_measurements_then_the_datasheet(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"matmul_8192_TFLOPs": {"bf16": 700}, "copy_bandwidth_TBps": 4.0}))
    assert _ceilings("NVIDIA H200", str(f)) == ({"bf16": 700.0}, 4.0, "measured (c.json)")
    peaks, bw, source = _ceilings("NVIDIA H200", None)
    assert source.startswith("measured") and bw == 4.28
    peaks, bw, source = _ceilings("NVIDIA A100-SXM4-80GB", None)
    assert source == "datasheet" and peaks["tf32"] == 156
    assert _ceilings("Some GPU", None)[2].startswith("unknown")
