"""Allocator snapshot summaries, on a real snapshot (tests/fixtures/memory/PROVENANCE.md)."""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.memory.snapshot import SnapshotError, categorize, load_snapshot, summarize_snapshot

SNAPSHOT = (
    Path(__file__).parents[2]
    / "fixtures"
    / "memory"
    / "JasperSolt-EoR_NN_2025-02-05_cnn-counterfactuals_adam_1gpu_snapshot.pickle"
)
MIB = 2**20


def test_the_fixture_is_the_published_file():
    digest = hashlib.sha256(SNAPSHOT.read_bytes()).hexdigest()
    assert digest == "fa856e8deaadbe78d683fa1a2045a2884c072c5c5c069e0d21001c7491f471d4"


def test_the_replayed_history_reproduces_the_allocators_own_totals():
    (device,) = summarize_snapshot(SNAPSHOT).devices
    assert device.device == 0 and device.events == 5787  # 1935 allocs + 2 × 1926 frees
    # Nine "snapshot" events record the allocator's allocated total (48,760,832 B): the replay hits each,
    # and the end of the history is the state of the segments.
    assert device.marker_mismatches == 0
    assert device.replayed_end_bytes == device.end_allocated_bytes == 48_760_832
    assert device.end_reserved_bytes == 128 * MIB


def test_the_peak_and_what_was_live_at_it_by_category():
    (device,) = summarize_snapshot(SNAPSHOT).devices
    assert device.peak_bytes == 108_275_712  # 103.26 MiB, during the first backward pass
    at_peak = {use.category: use for use in device.at_peak}
    assert sum(use.bytes for use in device.at_peak) == device.peak_bytes
    # Adam's two moments of the optimized 7.5 MiB image (torch/optim/adam.py _init_group).
    assert at_peak["optimizer state"].bytes == 2 * 7_864_320 and at_peak["optimizer state"].allocations == 2
    assert at_peak["gradients"].bytes > 0 and at_peak["activations"].bytes > 0
    # The model was loaded before recording began: its weights have no stack and count as other.
    assert at_peak["parameters"].bytes == 0
    assert device.no_stack_bytes == pytest.approx(8.375 * MIB, rel=1e-3)
    assert at_peak["other"].bytes >= device.no_stack_bytes
    assert any("Backward0 (autograd, C++)" in site.where for site in device.sites)


def test_categories_follow_the_allocation_stack():
    def frames(*pairs):
        return [{"filename": f, "name": n, "line": 1} for f, n in pairs]

    torch = "/usr/lib/python3/site-packages/torch"
    assert categorize(frames((f"{torch}/optim/adam.py", "_init_group"), ("train.py", "main"))) == "optimizer state"
    assert categorize(frames(("", "torch::autograd::generated::MmBackward0::apply(x)"))) == "gradients"
    assert categorize(frames((f"{torch}/nn/modules/module.py", "_apply"), ("train.py", "main"))) == "parameters"
    assert categorize(frames(("model.py", "forward"), (f"{torch}/nn/modules/module.py", "_call_impl"))) == (
        "activations"
    )
    assert categorize(frames(("train.py", "main"))) == "other"
    assert categorize([]) == "other"


def test_gzip_compressed_snapshots_load(tmp_path):
    packed = tmp_path / "snapshot.pickle.gz"
    packed.write_bytes(gzip.compress(SNAPSHOT.read_bytes()))
    assert load_snapshot(packed).keys() == load_snapshot(SNAPSHOT).keys()


def test_a_pickle_that_names_code_is_refused_without_running_it(tmp_path):
    hostile = tmp_path / "hostile.pickle"
    hostile.write_bytes(pickle.dumps({"segments": [], "run": print}))
    with pytest.raises(SnapshotError, match="refusing to load builtins.print"):
        load_snapshot(hostile)
    other = tmp_path / "list.pickle"
    other.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(SnapshotError, match="no 'segments'.*_record_memory_history"):
        load_snapshot(other)


def test_cli_prints_the_breakdown_and_the_viewer_link():
    done = CliRunner().invoke(cli, ["memory", "summarize", str(SNAPSHOT)])
    assert done.exit_code == 0, done.output
    assert "peak allocated 103.26 MiB" in done.output
    assert "optimizer state" in done.output and "15.00 MiB" in done.output
    assert "https://pytorch.org/memory_viz" in done.output
    data = json.loads(CliRunner().invoke(cli, ["memory", "summarize", "--json", str(SNAPSHOT)]).output)
    assert data["devices"][0]["peak_bytes"] == 108_275_712


def test_cli_rejects_a_file_that_is_not_a_snapshot(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    done = CliRunner().invoke(cli, ["memory", "summarize", str(text)])
    assert done.exit_code == 2 and "not a PyTorch allocator snapshot" in done.output
