"""The torch trainer in-process (one process, CPU): architecture, data, learning."""

from __future__ import annotations

import pytest

from tprimat.plugins.torch.protocol import parse_lines
from tprimat.result.schema import IterationRecord
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.torch


def tiny_config(model: str = "llama3.1-tiny", *extra: str):
    return load_config(
        None,
        [
            f'benchmark.model="{model}"',
            "launch.nproc_per_node=1",
            "training.global_batch_size=4",
            "training.micro_batch_size=2",
            "training.seq_length=32",
            'precision.dtype="fp32"',
            *extra,
        ],
    )


@pytest.mark.parametrize("name", ["llama3.1-tiny", "qwen2.5-tiny"])
def test_built_model_matches_the_registered_architecture(name):
    from tprimat.plugins.torch.model import build_model

    spec = get_model(name)
    config = tiny_config(name, "training.init_method_std=0.05")
    model = build_model(spec, config, "cpu")
    assert type(model).__name__ == spec.hf_architecture
    assert sum(p.numel() for p in model.parameters()) == spec.parameter_count
    attention = model.model.layers[0].self_attn
    assert (attention.q_proj.bias is not None) == spec.qkv_bias
    assert attention.k_proj.out_features == spec.num_query_groups * spec.kv_channels
    assert model.config._attn_implementation == "sdpa"
    # Initialised with the configured std, reproducibly from the seed.
    std = model.model.embed_tokens.weight.std().item()
    assert std == pytest.approx(0.05, rel=0.02)
    again = build_model(spec, config, "cpu")
    assert torch.equal(again.lm_head.weight, model.lm_head.weight)


def test_mock_data_is_seeded_uniform_and_never_constant():
    from tprimat.plugins.torch.train import MockBatches

    def batches(rank: int, seed: int = 7):
        return MockBatches(vocab_size=4096, micro_batch_size=4, seq_length=255, seed=seed, rank=rank, device="cpu")

    a = batches(0)
    first, second = a.next(), a.next()
    assert first.shape == (4, 256) and first.dtype == torch.int64
    assert 0 <= int(first.min()) and int(first.max()) < 4096
    many = torch.cat([a.next() for _ in range(64)])  # 65,536 tokens
    assert many.unique().numel() == 4096  # every id drawn: uniform over the vocabulary
    assert float(many.float().mean()) == pytest.approx(4095 / 2, rel=0.02)
    assert not torch.equal(first, second)
    assert torch.equal(batches(0).next(), first)  # reproducible
    assert not torch.equal(batches(1).next(), first)  # each rank its own stream
    fixed = MockBatches(
        vocab_size=4096, micro_batch_size=4, seq_length=255, seed=7, rank=0, device="cpu", fixed=True, micro_batches=2
    )
    x, y, z = fixed.next(), fixed.next(), fixed.next()
    assert torch.equal(x, z) and not torch.equal(x, y)


@pytest.mark.slow
def test_the_model_learns_a_fixed_batch_and_every_line_parses(monkeypatch):
    from tprimat.plugins.torch.train import parse_args, train

    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    config = tiny_config(
        "qwen2.5-tiny", "benchmark.iterations=10", "training.lr=0.003", "training.lr_warmup_iterations=1"
    )
    lines: list[str] = []
    values = list(train(config, parse_args(["--config", "unused", "--fixed-batch"]), emit=lines.append))
    assert [v["iteration"] for v in values] == list(range(1, 11))
    events = list(parse_lines(lines, "stdout"))
    records = [e for e in events if isinstance(e, IterationRecord)]
    assert [r.loss for r in records] == [v["loss"] for v in values]
    assert records[-1].loss < records[0].loss - 1.0  # it really trains
    assert all(r.step_time_s > 0 and r.mem_rss_gib > 0 and r.grad_norm > 0 for r in records)
    assert records[0].lr == pytest.approx(0.003)  # warm-up of one iteration
    assert records[-1].lr == pytest.approx(config.training.min_lr)


def test_dataset_batches_give_each_rank_its_slice_of_every_global_batch(monkeypatch):
    """The prepared-data path up to the reader (the reader itself is tprimat.data's)."""
    import sys
    import types

    import numpy as np

    class Sequences:
        def __init__(self, path_prefix, seq_length, seed):
            assert (path_prefix, seq_length, seed) == ("/d/text", 7, 11)

        def __len__(self):
            return 100

        def __getitem__(self, i):
            return np.full(8, i, dtype=np.int64)  # sample i is all i's

    module = types.ModuleType("tprimat.data.sequences")
    module.PackedSequences = Sequences
    monkeypatch.setitem(sys.modules, "tprimat.data", types.ModuleType("tprimat.data"))
    monkeypatch.setitem(sys.modules, "tprimat.data.sequences", module)
    from tprimat.plugins.torch.train import DatasetBatches

    def rank(r):
        return DatasetBatches(
            path_prefix="/d/text",
            micro_batch_size=2,
            seq_length=7,
            seed=11,
            dp_rank=r,
            micro_batches=2,
            global_batch_size=8,
            device="cpu",
        )

    zero, one = rank(0), rank(1)
    firsts = [zero.next()[:, 0].tolist() for _ in range(3)]
    assert firsts == [[0, 1], [2, 3], [8, 9]]  # iteration 2 starts at sample 8
    assert one.next()[:, 0].tolist() == [4, 5] and one.next()[:, 0].tolist() == [6, 7]
    assert zero.next().dtype == torch.int64


@pytest.mark.slow
def test_a_throughput_run_can_write_an_mlperf_log(monkeypatch, tmp_path):
    """No evaluation: the log holds the clock, the hyper-parameters and one training block."""
    pytest.importorskip("mlperf_logging")
    from tprimat.mlperf.reader import read_file
    from tprimat.plugins.torch.train import parse_args, train

    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    config = tiny_config("llama3.1-tiny", "benchmark.iterations=3")
    log = tmp_path / "mlperf.log"
    lines: list[str] = []
    values = list(train(config, parse_args(["--config", "c.toml", "--mlperf-log", str(log)]), emit=lines.append))
    assert len(values) == 3 and not any("TPRIMAT_EVAL" in line for line in lines)
    run = read_file(log)
    assert run.status == "aborted" and run.evaluations == []  # no target, so never "success"
    assert run.samples_to_converge == 12 and run.hyperparameters["train_samples"] == 0  # mock data
    assert run.hyperparameters["config_filename"] == "c.toml"
    # The one block covers the three steps: its time is at least theirs.
    assert run.time_to_train_s >= sum(v["step_time_s"] for v in values) - 0.01
    assert run.train_samples_per_s == pytest.approx(12 / run.time_to_train_s, rel=0.05)


def test_allocator_history_is_recorded_from_before_the_model_is_built(monkeypatch, tmp_path):
    """A snapshot knows the parameters by their allocation stacks only if recording began before them."""
    import contextlib

    from tprimat.plugins.torch import model as model_module
    from tprimat.plugins.torch import train as train_module

    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    order: list[str] = []

    @contextlib.contextmanager
    def history(env, folder):
        order.append(f"record into {folder}")
        yield
        order.append("dump")

    build = model_module.build_model
    monkeypatch.setattr(train_module, "_memory_history", history)
    monkeypatch.setattr(model_module, "build_model", lambda *a: order.append("build") or build(*a))
    args = train_module.parse_args(["--config", "unused", "--memory-snapshot", str(tmp_path)])
    config = tiny_config("llama3.1-tiny", "benchmark.iterations=2", "benchmark.warmup_iterations=1")
    values = list(train_module.train(config, args, emit=order.append))
    assert len(values) == 2
    assert order[:2] == [f"record into {tmp_path}", "build"]
    assert order[-1] == "dump" and sum(line.startswith("TPRIMAT_ITER") for line in order) == 2
