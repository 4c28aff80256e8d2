"""The service on a Ray cluster of two nodes on this machine (``ray.cluster_utils.Cluster``):
a batch sent to the server is judged on the cluster's nodes, each verdict right."""

from __future__ import annotations

import json

import pytest
from serving import FAST, GOOD, ROOT, WRONG, start

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture
def two_nodes(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the nodes' workers import this checkout
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


def test_a_batch_is_judged_on_a_two_node_ray_cluster(tmp_path, servers, two_nodes):
    s = start(tmp_path, *FAST, "--executor", "ray", "--address", two_nodes.address)
    servers.append(s)
    sources = [GOOD + "\n# ray 1\n", WRONG + "\n# ray\n", GOOD + "\n# ray 2\n"]
    items = [{"task": "scale_relu", "solution": src} for src in sources]
    with s.client(timeout=900) as c:
        with c.stream("POST", "/v1/jobs/stream", json={"items": items}) as r:
            lines = [json.loads(line) for line in r.iter_lines() if line]
        metrics = c.get("/metrics").text
    head, answers = lines[0], {a["id"]: a for a in lines[1:]}
    verdicts = [answers[j]["verdict"] for j in head["jobs"]]
    assert [v["verdict"] for v in verdicts] == ["pass", "fail", "pass"], [v["reasons"] for v in verdicts]
    assert 'kernelproof_in_flight{device="ray"}' in metrics  # judged through the Ray executor
    assert "2 job(s) at once" in s.log.read_text()  # one per node's CPU


def test_the_serve_verb_takes_per_device_on_a_ray_cluster(tmp_path, servers, two_nodes):
    s = start(tmp_path, *FAST, "--executor", "ray", "--address", two_nodes.address, "--per-device", "2")
    servers.append(s)
    sources = [
        GOOD + f"\n# per device {i}\n" if i % 2 == 0 else WRONG + f"\n# per device {i}\n" for i in range(4)
    ]
    items = [{"task": "scale_relu", "solution": src} for src in sources]
    with s.client(timeout=900) as c:
        with c.stream("POST", "/v1/jobs/stream", json={"items": items}) as r:
            lines = [json.loads(line) for line in r.iter_lines() if line]
    head, answers = lines[0], {a["id"]: a for a in lines[1:]}
    verdicts = [answers[j]["verdict"] for j in head["jobs"]]
    assert [v["verdict"] for v in verdicts] == ["pass", "fail", "pass", "fail"], [
        v["reasons"] for v in verdicts
    ]
    assert "4 job(s) at once" in s.log.read_text()  # one actor per node's CPU, two at once on each
