"""Per-operator roofline: reading operators, attributing kernels to them, and the roofline table."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.result.peaks import BANDWIDTH_VERSION, lookup_bandwidth, lookup_peak
from tprimat.trace import reader
from tprimat.trace.analyze import select_window
from tprimat.trace.opread import activity_operators, read_ops
from tprimat.trace.reader import read_trace
from tprimat.trace.roofline import attribute_window, device_ceilings, group_row, roofline, roofline_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
MI300 = FIXTURES / "tracelens" / "mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
H100 = FIXTURES / "tracelens" / "h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
ALL = sorted(p for p in FIXTURES.glob("*/*") if p.name.endswith((".json", ".json.gz")))


@pytest.fixture(autouse=True)
def _no_microbench(tmp_path, monkeypatch):
    """No microbenchmark document of this machine's user leaks into a test."""
    monkeypatch.setenv("TPRIMAT_MICROBENCH_DIR", str(tmp_path / "no-microbench"))


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name[:40])
def test_operator_reader_keeps_what_the_trace_reader_keeps(path):
    trace, ops = read_trace(path), read_ops(path)
    for field in ("ts", "dur", "name_id", "code", "stream", "correlation", "launch_correlation", "launch_ts"):
        assert list(getattr(ops.trace, field)) == list(getattr(trace, field)), field
    assert ops.trace.names == trace.names and ops.trace.steps == trace.steps
    assert (ops.trace.rank, ops.trace.device, ops.trace.vendor) == (trace.rank, trace.device, trace.vendor)
    assert len(ops.launch_thread) == len(trace.launch_correlation)


def test_ranges_on_several_processes_read_the_same(tmp_path, monkeypatch):
    plain = tmp_path / "rank-0.json"
    with gzip.open(H100) as fh:
        plain.write_bytes(fh.read())
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 1024)
    monkeypatch.setattr(reader, "RANGE_MIN_BYTES", 256 * 1024)
    monkeypatch.setattr(reader, "_TAIL", 1024)
    assert reader.event_ranges(plain, reader.read_trace_head(plain), 3) is not None
    one, three = read_ops(plain, workers=1), read_ops(plain, workers=3)
    assert [one.signatures[s] for s in one.op_sig] == [three.signatures[s] for s in three.op_sig]
    assert list(one.op_ts) == list(three.op_ts) and list(one.op_end) == list(three.op_end)
    assert [one.threads[t] for t in one.launch_thread] == [three.threads[t] for t in three.launch_thread]
    assert list(one.trace.correlation) == list(three.trace.correlation)


def test_kernels_go_to_the_outermost_costed_operator():
    ops = read_ops(MI300)
    operators = activity_operators(ops)
    names = {}
    for index, op in enumerate(operators):
        if op >= 0:
            names.setdefault(ops.trace.names[ops.trace.name_id[index]][:4], set()).add(
                ops.signatures[ops.op_sig[op]][0]
            )
    # hipBLASLt GEMMs launched under aten::linear > aten::matmul > aten::mm belong to aten::linear;
    # the flash kernel under SDPA > _scaled_dot_product_flash_attention > _flash_attention_forward to SDPA
    assert names["Cijk"] == {"aten::linear", "aten::matmul"}
    assert names["attn"] == {"aten::scaled_dot_product_attention"}


def _hand_trace(tmp_path, events):
    path = tmp_path / "hand.json"
    meta = {"deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}], "cuda_runtime_version": 12040}
    path.write_text(json.dumps({**meta, "traceEvents": events}))
    return path


def _op(name, ts, dur, dims=None, types=None, tid=1):
    args = {} if dims is None else {"Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * len(dims)}
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _launch(ts, correlation, tid=1):
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": 1,
        "args": {"correlation": correlation},
    }


def _kernel(name, ts, dur, correlation):
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"stream": 7, "correlation": correlation},
    }


def test_attribution_rules_on_nested_operators(tmp_path):
    bf16 = "c10::BFloat16"
    events = [
        # a costed operator calling a costed one: the outer one gets the kernel
        _op("aten::linear", 0, 20, [[64, 128], [256, 128]], [bf16, bf16]),
        _op("aten::mm", 2, 10, [[64, 128], [128, 256]], [bf16, bf16]),
        _launch(4, 1),
        # an unknown wrapper around a costed operator: the costed one
        _op("my::fused_thing", 30, 20, [[8]], ["float"]),
        _op("aten::mul", 32, 10, [[8], [8]], ["float", "float"]),
        _launch(34, 2),
        # only unknown operators: the innermost
        _op("outer::unknown", 60, 20, [[8]], ["float"]),
        _op("inner::unknown", 62, 10, [[8]], ["float"]),
        _launch(64, 3),
        # a known operator without shapes inside an unknown one: the known one, without a cost
        _op("outer::unknown", 90, 20),
        _op("aten::mm", 92, 10),
        _launch(94, 4),
        # no operator around the launch
        _launch(120, 5),
        # the launch of another thread is not inside this thread's operators
        _op("aten::mm", 130, 20, [[64, 128], [128, 256]], [bf16, bf16]),
        _launch(135, 6, tid=2),
    ]
    events += [_kernel(f"k{c}", 200 + 10 * c, 5, c) for c in range(1, 7)]
    ops = read_ops(_hand_trace(tmp_path, events))
    operators = activity_operators(ops)
    by_kernel = {
        ops.trace.names[ops.trace.name_id[i]]: (ops.signatures[ops.op_sig[op]][0] if op >= 0 else None)
        for i, op in enumerate(operators)
    }
    assert by_kernel == {
        "k1": "aten::linear",
        "k2": "aten::mul",
        "k3": "inner::unknown",
        "k4": "aten::mm",
        "k5": None,
        "k6": None,
    }
    result = roofline(ops, ceilings=device_ceilings("NVIDIA H100 80GB HBM3"))
    rows = {r["name"]: r for r in result["groups"]}
    linear = rows["aten::linear"]
    assert linear["flops_per_call"] == 2 * 64 * 256 * 128 and linear["calls"] == 1 and linear["gpu_us"] == 5
    roof_s = max(linear["flops_per_call"] / 989.4e12, linear["bytes_per_call"] / 3.35e12)
    assert linear["roofline_fraction"] == pytest.approx(roof_s / 5e-6)
    assert linear["tflops"] == pytest.approx(linear["flops_per_call"] / 5e-6 / 1e12)
    assert rows["inner::unknown"]["reason"] == "unknown op" and rows["inner::unknown"]["roofline_fraction"] is None
    assert rows["aten::mm"]["reason"] == "no shapes recorded"
    assert result["totals"]["no_operator_us"] == 10 and result["totals"]["no_operator_kernels"] == 2
    assert result["totals"]["gpu_us"] == pytest.approx(sum(r["gpu_us"] for r in result["groups"]) + 10)


def test_qwen_roofline_uses_the_tables(tmp_path):
    result = roofline_file(H100)
    ceilings = result["ceilings"]
    assert ceilings["memory_tbs"] == 3.35 and ceilings["peaks_tflops"]["bf16"] == 989.4
    assert ceilings["memory_version"] == BANDWIDTH_VERSION and ceilings["memory_source"]
    assert result["window"] == {"mode": "steps", "steps": [6]}
    top = result["groups"][0]
    assert top["name"] == "aten::linear" and top["kind"] == "gemm" and top["bound"] == "compute"
    assert 0 < top["roofline_fraction"] < 1
    assert top["roofline_fraction"] == pytest.approx(top["tflops"] / 989.4, rel=1e-9)  # compute-bound
    memory = next(r for r in result["groups"] if r["kind"] == "elementwise" and r["roofline_fraction"])
    assert memory["bound"] == "memory" and memory["roofline_fraction"] == pytest.approx(memory["tbs"] / 3.35)
    cat = next(r for r in result["groups"] if r["name"] == "aten::cat")
    assert cat["reason"] == "tensor-list dtypes not recorded" and cat["roofline_fraction"] is None
    assert result["totals"]["no_operator_us"] == 0  # every kernel of the step was launched by an operator


def test_unknown_device_gives_no_fraction_and_says_why(tmp_path):
    data = json.loads(gzip.open(MI300).read())
    data["deviceProperties"][0]["name"] = "Some Future GPU"
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    result = roofline_file(path)
    assert all(r["roofline_fraction"] is None for r in result["groups"])
    assert any("no datasheet bandwidth" in n for n in result["notes"])
    linear = result["groups"][0]
    assert linear["tflops"] > 0 and linear["note"] == "no memory bandwidth for this device"


def test_trace_without_shapes_lists_operators_without_costs():
    result = roofline_file(FIXTURES / "hta" / "nccl_parser_config_nccl_data.json.gz")
    assert any("no input shapes recorded" in n for n in result["notes"])
    assert all(r["reason"] for r in result["groups"])


def test_mamf_is_a_second_compute_roof(tmp_path, monkeypatch):
    folder = tmp_path / "mb"
    folder.mkdir()
    document = {
        "kind": "tprimat.microbench",
        "schema_version": 1,
        "created_at": "2026-11-01T00:00:00+00:00",
        "device_name": "NVIDIA H100 80GB HBM3",
        "summary": {"mamf_tflops": {"bf16": 700.0}},
    }
    (folder / "microbench-h100.json").write_text(json.dumps(document))
    monkeypatch.setenv("TPRIMAT_MICROBENCH_DIR", str(folder))
    result = roofline_file(H100)
    assert result["ceilings"]["mamf_tflops"] == {"bf16": 700.0}
    top = result["groups"][0]
    assert top["mamf_fraction"] == pytest.approx(top["tflops"] / 700.0, rel=1e-9)


def test_bandwidth_table():
    assert lookup_bandwidth("AMD Instinct MI300X VF").tbs == 5.3
    assert lookup_bandwidth("NVIDIA H100 80GB HBM3").tbs == 3.35
    assert (
        lookup_bandwidth("NVIDIA A100-SXM4-80GB").tbs is None
        and "variants differ" in lookup_bandwidth("NVIDIA A100-SXM4-80GB").note
    )
    assert lookup_bandwidth("NVIDIA H100 80GB HBM3 MIG 1g.10gb").tbs is None
    assert lookup_bandwidth(None).note and lookup_peak("NVIDIA H100 80GB HBM3", "bf16").tflops == 989.4


def test_cli_roofline_table_json_and_plot(tmp_path):
    runner = CliRunner()
    out = runner.invoke(cli, ["trace", "roofline", str(MI300), "--top", "5"])
    assert out.exit_code == 0, out.output
    assert "aten::linear" in out.output and "5.3 TB/s" in out.output and "tensor-list dtypes" not in out.output
    as_json = runner.invoke(cli, ["trace", "roofline", str(MI300), "--json", "--step", "6"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.output)["window"]["steps"] == [6]
    pytest.importorskip("matplotlib")
    png = tmp_path / "roofline.png"
    plotted = runner.invoke(cli, ["trace", "roofline", str(MI300), "-o", str(png)])
    assert plotted.exit_code == 0 and png.read_bytes()[:4] == b"\x89PNG"


def test_cli_roofline_bad_step_is_one_line(tmp_path):
    out = CliRunner().invoke(cli, ["trace", "roofline", str(MI300), "--step", "99"])
    assert out.exit_code == 2 and "no ProfilerStep" in out.output and "Traceback" not in out.output


def test_malformed_operators_are_skipped_or_uncosted_never_guessed(tmp_path):
    bf16 = "c10::BFloat16"
    events = [
        _op("aten::mm", 0, 10, [[64, 128], [128, 256]], [bf16, bf16]),
        _launch(2, 1),
        {**_op("aten::mm", 20, 10, [[64, 128], [128, 256]], [bf16, bf16]), "tid": [1]},  # a thread that is a list
        _op("aten::mm", 40, 10, {"not": "a list"}, [bf16, bf16]),
        _launch(42, 2),
        _op("aten::mm", 60, 10, [[64, -128], [128, 256]], [bf16, bf16]),
        _launch(62, 3),
        _kernel("k1", 100, 5, 1),
        _kernel("k2", 110, 5, 2),
        _kernel("k3", 120, 5, 3),
    ]
    path = _hand_trace(tmp_path, events)
    ops = read_ops(path)
    assert ops.trace.malformed == 1 and ops.trace.malformed_first[0] == 2  # the operator whose thread is a list
    assert read_trace(path).malformed == 0  # the analysis does not read threads
    result = roofline(ops, ceilings=device_ceilings("NVIDIA H100 80GB HBM3"))
    reasons = sorted(r["reason"] or "costed" for r in result["groups"])
    assert reasons == ["costed", "malformed shapes", "malformed shapes"]
    assert any("malformed fields skipped" in n for n in result["notes"])


def test_a_compute_partition_under_the_whole_gpus_name_gets_no_fraction(tmp_path):
    data = json.loads(gzip.open(MI300).read())
    assert data["deviceProperties"][0]["numSms"] == 304  # the whole MI300X
    data["deviceProperties"][0]["numSms"] = 38  # what one CPX partition reports, under the same name
    path = tmp_path / "cpx.json"
    path.write_text(json.dumps(data))
    result = roofline_file(path)
    assert all(r["roofline_fraction"] is None for r in result["groups"])
    assert any("38 of the 304 compute units" in n for n in result["notes"])


def test_a_group_of_several_signatures_counts_the_calls_of_every_one():
    """Calls of one name, shapes and dtypes whose other recorded inputs differ (two signatures:
    ``aten::copy_`` with ``non_blocking`` True and False in this ResNet trace) are one group: its calls,
    mean time and not-costed note count the calls of every signature, not those of the last one."""
    ops = read_ops(FIXTURES / "tracelens" / "mi300_resnet_act_checkpoint.json.gz")
    indices, _ = select_window(ops.trace)
    groups, _, _ = attribute_window(ops, indices, activity_operators(ops))
    several = {key: group for key, group in groups.items() if len(group.by_sig) > 1}
    assert several
    ceilings = device_ceilings(ops.trace.device)
    for key, group in several.items():
        calls = sum(len(c) for c in group.by_sig.values())
        row = group_row(ops, key, group, ceilings)
        assert row["calls"] == calls > max(len(c) for c in group.by_sig.values())
        assert row["mean_us"] == pytest.approx(row["gpu_us"] / calls)
        if row["note"] and "calls not costed" in row["note"]:
            assert f" of {calls} calls not costed" in row["note"]
