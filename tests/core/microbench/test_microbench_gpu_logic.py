"""The GPU-only branches (device events, FP8 support), driven by a stand-in for torch's CUDA API.

No GPU is needed: the stand-in answers what torch.cuda would on the named devices, and the
code under test is the same that runs on the node.
"""

import types

import pytest

from tprimat.microbench.gemm import fp8_support
from tprimat.microbench.timing import Method, measure


class FakeEvent:
    clock = [0.0]  # milliseconds, advanced by the phases

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.at = None

    def record(self):
        self.at = FakeEvent.clock[0]

    def elapsed_time(self, end):
        return end.at - self.at


def _fake_cuda_torch(*, major=9, minor=0, name="NVIDIA H100 80GB HBM3", hip=None, arch="", scaled_mm_error=None):
    synced = []

    class Tensor:
        def to(self, dtype):
            return self

        def t(self):
            return self

    def scaled_mm(a, b, **kwargs):
        if scaled_mm_error:
            raise RuntimeError(scaled_mm_error)
        return Tensor()

    props = types.SimpleNamespace(major=major, minor=minor, name=name, gcnArchName=arch)
    cuda = types.SimpleNamespace(
        Event=FakeEvent,
        synchronize=lambda device=None: synced.append(device),
        get_device_properties=lambda index: props,
        current_device=lambda: 0,
    )
    return types.SimpleNamespace(
        cuda=cuda,
        version=types.SimpleNamespace(hip=hip, cuda=None if hip else "12.8"),
        __version__="2.13.0",
        _scaled_mm=scaled_mm,
        float8_e4m3fn="float8_e4m3fn",
        float8_e4m3fnuz="float8_e4m3fnuz",
        float32="float32",
        bfloat16="bfloat16",
        randn=lambda *a, **k: Tensor(),
        ones=lambda *a, **k: Tensor(),
        synced=synced,
    )


GPU = types.SimpleNamespace(type="cuda", index=3)


def test_device_events_time_each_phase_in_seconds():
    torch = _fake_cuda_torch()
    FakeEvent.clock[0] = 0.0

    def advance(ms):
        def phase(value):
            FakeEvent.clock[0] += ms
            return value

        return phase

    def prepare():
        FakeEvent.clock[0] += 100.0  # refilling inputs and flushing are not timed

    method = Method(warmup=2, iterations=3, flush_bytes=0)
    times = measure(torch, GPU, method, prepare, [advance(1.5), advance(4.0)], lambda i: None)
    assert times == [[0.0015] * 3, [0.004] * 3]
    assert torch.synced == [GPU]  # one synchronisation, after the loop


@pytest.mark.parametrize(
    "kwargs, dtype, reason",
    [
        ({"major": 9, "minor": 0}, "float8_e4m3fn", None),
        ({"major": 8, "minor": 9, "name": "NVIDIA L40S"}, "float8_e4m3fn", None),
        (
            {"major": 8, "minor": 0, "name": "NVIDIA A100-SXM4-80GB"},
            None,
            "NVIDIA A100-SXM4-80GB (compute capability 8.0) has no FP8 tensor cores (8.9 or newer needed)",
        ),
        ({"hip": "6.4", "arch": "gfx942:sramecc+:xnack-", "name": "AMD Instinct MI300X"}, "float8_e4m3fnuz", None),
        ({"hip": "7.0", "arch": "gfx950", "name": "AMD Instinct MI355X"}, "float8_e4m3fn", None),
        (
            {"hip": "6.4", "arch": "gfx90a", "name": "AMD Instinct MI250X"},
            None,
            "AMD Instinct MI250X (gfx90a) has no FP8 matrix units",
        ),
        (
            {"scaled_mm_error": "Multiplication of two Float8_e5m2 matrices is not supported\nx"},
            None,
            "torch._scaled_mm failed on NVIDIA H100 80GB HBM3: RuntimeError: Multiplication of two "
            "Float8_e5m2 matrices is not supported",
        ),
    ],
)
def test_fp8_support_by_device(kwargs, dtype, reason):
    found, why = fp8_support(_fake_cuda_torch(**kwargs), GPU)
    assert (found, why) == (dtype, reason)


def test_fp8_needs_scaled_mm():
    torch = _fake_cuda_torch()
    del torch._scaled_mm
    assert fp8_support(torch, GPU) == (None, "torch 2.13.0 has no torch._scaled_mm")
