"""On a GPU, a timed pass through the service earns the speed term of its verdict's lower
confidence bound and the coverage term of the parent's profile, and KernelGYM's ``speedup`` is
that lower bound, never the point estimate. GPU only: on the CPU no speed claim is made."""

from __future__ import annotations

import math
import time

import pytest
from serving import ROOT, start

pytestmark = pytest.mark.gpu

TASK = "level1/09_gelu"
SOLUTION = (ROOT / "examples" / "level1" / "09_gelu.py").read_text()


def test_a_timed_pass_earns_its_lower_bound_and_its_coverage(tmp_path, servers):
    s = start(
        tmp_path, "--device", "cuda", "--seeds-per-case", "1", "--time-budget", "3", tasks=(ROOT / "suite",)
    )
    servers.append(s)
    with s.client(timeout=900) as c:
        doc = c.post("/v1/evaluate", json={"task": TASK, "solution": SOLUTION}).json()
        gym = c.post("/evaluate", json={"task_id": TASK, "kernel_code": SOLUTION})
        assert gym.status_code == 200
        while (status := c.get(f"/status/{TASK}").json()["status"]) in ("pending", "processing"):
            time.sleep(0.5)
        result = c.get(f"/results/{TASK}").json()
    v = doc["verdict"]
    if v["verdict"] == "error":
        pytest.skip(f"not judged on this machine: {v['reasons']}")
    assert v["verdict"] == "pass", v["reasons"]
    low = v["speedup"]["best"]["ci95"][0]
    terms = doc["reward_terms"]
    assert terms["speed"] == pytest.approx(
        min(1.0, max(0.0, math.log(low) / math.log(4.0))) if low > 1 else 0.0
    )
    assert terms["coverage"] == pytest.approx(v["coverage"]["custom_fraction"])
    assert doc["reward"] == pytest.approx(0.5 + terms["speed"] + 0.5 * terms["coverage"])
    assert status == "completed" and result["speedup"] == pytest.approx(
        result["metadata"]["kernelproof_verdict"]["speedup"]["best"]["ci95"][0]
    )
    assert result["kernel_runtime"] is not None and result["reference_runtime"] is not None
