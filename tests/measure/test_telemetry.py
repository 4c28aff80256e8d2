"""NVML numbers every GPU of the machine; torch numbers the visible ones. Telemetry must read the
GPU that was timed, also on GPU 1 of a two-GPU run (CUDA_VISIBLE_DEVICES=1)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kernelproof.measure.telemetry import nvml_handle


class FakeNvml:
    def __init__(self) -> None:
        self.asked: list[tuple[str, object]] = []

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self.asked.append(("uuid", uuid))
        return ("uuid", uuid)

    def nvmlDeviceGetHandleByIndex(self, index):
        self.asked.append(("index", index))
        return ("index", index)


def test_the_gpu_is_found_by_its_uuid(monkeypatch):
    props = SimpleNamespace(uuid="3f2a9c1e-0000-1111-2222-333344445555")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    nvml = FakeNvml()
    assert nvml_handle(nvml, 0) == ("uuid", "GPU-3f2a9c1e-0000-1111-2222-333344445555")


def test_without_a_uuid_the_visible_list_maps_torchs_index(monkeypatch):
    def no_props(i):
        raise RuntimeError("no CUDA here")

    monkeypatch.setattr(torch.cuda, "get_device_properties", no_props)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert nvml_handle(FakeNvml(), 0) == ("index", 1)
    assert nvml_handle(FakeNvml(), 1) == ("index", 0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert nvml_handle(FakeNvml(), 0) == ("index", 0)
