"""The measurement loop: warm-up, flush, fresh inputs, per-phase times."""

import pytest

from tprimat.microbench.timing import (
    GPU_MIN_FLUSH_BYTES,
    Method,
    cpu_last_level_cache_bytes,
    default_flush_bytes,
)


def test_cpu_cache_size_from_sysfs(tmp_path):
    for index, (level, size) in enumerate([(1, "48K"), (1, "32K"), (2, "2048K"), (3, "36M")]):
        entry = tmp_path / f"index{index}"
        entry.mkdir()
        (entry / "level").write_text(f"{level}\n")
        (entry / "size").write_text(f"{size}\n")
    assert cpu_last_level_cache_bytes(tmp_path) == 36 * 2**20
    assert cpu_last_level_cache_bytes(tmp_path / "missing") is None


def test_flush_is_larger_than_the_cache():
    assert default_flush_bytes(50 * 2**20, gpu=False) == 100 * 2**20
    assert default_flush_bytes(50 * 2**20, gpu=True) == GPU_MIN_FLUSH_BYTES  # H100 L2, MI300X MALL
    assert default_flush_bytes(2**30, gpu=True) == 2**31
    assert default_flush_bytes(None, gpu=False) > 0


def test_method_validates():
    with pytest.raises(ValueError):
        Method(warmup=0, iterations=0, flush_bytes=0)


@pytest.mark.torch
def test_measure_runs_warmup_then_times_each_phase():
    import torch

    from tprimat.microbench.timing import make_flush, measure, method_for

    method = method_for(torch, torch.device("cpu"), warmup=2, iterations=5, flush_bytes=4096)
    assert method.timer == "perf_counter" and method.flush_bytes == 4096
    calls = {"prepare": 0, "flush": [], "phase": []}
    real_flush = make_flush(torch, torch.device("cpu"), 4096)

    def prepare():
        calls["prepare"] += 1
        return calls["prepare"]

    def flush(i):
        calls["flush"].append(i)
        real_flush(i)

    def first(value):
        calls["phase"].append(value)
        return value * 10

    def second(value):
        calls["phase"].append(value)
        return None

    times = measure(torch, torch.device("cpu"), method, prepare, [first, second], flush)
    assert len(times) == 2 and all(len(t) == 5 for t in times)
    assert all(t >= 0 for phase in times for t in phase)
    assert calls["prepare"] == 7 and calls["flush"] == list(range(7))
    assert calls["phase"][:4] == [1, 10, 2, 20]  # each phase gets the previous one's value


@pytest.mark.torch
def test_flush_writes_a_nonzero_value():
    import torch

    from tprimat.microbench.timing import make_flush

    flush = make_flush(torch, torch.device("cpu"), 1024)
    flush(0)
    buffer = flush.__closure__[0].cell_contents
    assert buffer.numel() == 1024 and bool((buffer != 0).all())
