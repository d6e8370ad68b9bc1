"""Collecting a run's traces into traces/ by rank, with real Kineto files under each backend's naming."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from tprimat.running.traces import collect_traces
from tprimat.trace.reader import read_trace, trace_rank

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
ALEXNET_RANK0 = TRACES / "hta" / "critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"
DIFF_RANK3 = TRACES / "hta" / "trace_diff_control_control.json.gz"  # distributedInfo: rank 3 of 8
MI210_NO_INFO = TRACES / "tracelens" / "mi210_gpu_only_trace_gpu_only_trace.json.gz"


def place(run_dir: Path, fixture: Path, relative: str, *, plain: bool = False) -> Path:
    target = run_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if plain:
        target.write_bytes(gzip.decompress(fixture.read_bytes()))
    else:
        shutil.copyfile(fixture, target)
    return target


def test_rank_comes_from_distributed_info_before_the_file_name(tmp_path):
    # Primus's name says rank[5]; the trace's own distributedInfo (rank 3) wins.
    primus = place(tmp_path, DIFF_RANK3, "exp/tensorboard/primus-megatron-exp[x]-rank[5].1.pt.trace.json.gz")
    assert trace_rank(primus) == 3
    nemo = place(tmp_path, MI210_NO_INFO, "torch_profile/device/rank-1.json")  # no distributedInfo
    assert trace_rank(nemo) == 1
    assert trace_rank(place(tmp_path, MI210_NO_INFO, "a/gpu_only.json")) is None


def test_the_analysis_and_the_collection_read_the_same_rank_from_a_primus_file_name(tmp_path):
    # No distributedInfo: the rank is the one in Primus's "-rank[<r>]." name, for both.
    primus = place(tmp_path, MI210_NO_INFO, "exp/tensorboard/primus-megatron-exp[x]-rank[6].17.pt.trace.json.gz")
    assert trace_rank(primus) == 6
    assert read_trace(primus).rank == 6


def test_megatron_traces_are_moved_and_named_by_rank(tmp_path):
    # Megatron's torch profiler names files <host>_<pid>.<ts>: the rank is only in distributedInfo.
    place(tmp_path, ALEXNET_RANK0, "tensorboard/node7_4242.1700000000123.pt.trace.json", plain=True)
    place(tmp_path, DIFF_RANK3, "tensorboard/node7_4245.1700000000456.pt.trace.json.gz")
    collected, notes = collect_traces(tmp_path, ("tensorboard/*.pt.trace.json", "tensorboard/*.pt.trace.json.gz"))
    assert notes == []
    assert {(c.rank, c.path) for c in collected} == {
        (0, "traces/rank-0.pt.trace.json"),
        (3, "traces/rank-3.pt.trace.json.gz"),
    }
    assert not list((tmp_path / "tensorboard").iterdir())  # moved, not copied
    assert read_trace(tmp_path / "traces" / "rank-3.pt.trace.json.gz").rank == 3
    assert (tmp_path / "traces" / "rank-3.pt.trace.json.gz").stat().st_size == DIFF_RANK3.stat().st_size


def test_ranks_outside_the_profile_are_left_in_place_and_gzip_is_named_by_content(tmp_path):
    # NeMo's callback profiles every rank and names files rank-<r>.json even when gzip.
    place(tmp_path, MI210_NO_INFO, "torch_profile/device/rank-0.json")
    place(tmp_path, MI210_NO_INFO, "torch_profile/device/rank-1.json")
    collected, notes = collect_traces(tmp_path, ("torch_profile/device/rank-*.json",), ranks=[0])
    assert [(c.source, c.path) for c in collected] == [
        ("torch_profile/device/rank-0.json", "traces/rank-0.pt.trace.json.gz")
    ]
    assert (tmp_path / "torch_profile/device/rank-1.json").is_file()
    assert len(notes) == 1 and "rank-1.json" in notes[0]


def test_repeated_traces_of_a_rank_and_unknown_ranks_get_distinct_names(tmp_path):
    first = place(tmp_path, ALEXNET_RANK0, "p/a.pt.trace.json.gz")
    second = place(tmp_path, ALEXNET_RANK0, "p/b.pt.trace.json.gz")
    import os

    os.utime(first, (1, 1))
    os.utime(second, (2, 2))
    place(tmp_path, MI210_NO_INFO, "p/c.pt.trace.json.gz")
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "rank-0.pt.trace.json.gz").write_text("kept")  # never overwritten
    collected, notes = collect_traces(tmp_path, ("p/*.pt.trace.json.gz",))
    assert [(c.source, c.path) for c in collected] == [
        ("p/a.pt.trace.json.gz", "traces/rank-0.2.pt.trace.json.gz"),
        ("p/b.pt.trace.json.gz", "traces/rank-0.3.pt.trace.json.gz"),
        ("p/c.pt.trace.json.gz", "traces/rank-unknown.pt.trace.json.gz"),
    ]
    assert (tmp_path / "traces" / "rank-0.pt.trace.json.gz").read_text() == "kept"
    assert any("p/c.pt.trace.json.gz" in note for note in notes)


def test_nothing_to_collect_creates_nothing(tmp_path):
    assert collect_traces(tmp_path, ("tensorboard/*.json",)) == ([], [])
    assert not (tmp_path / "traces").exists()
