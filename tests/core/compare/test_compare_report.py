"""Comparison reports from real results: the gate, hand-checked numbers, plots, HTML, CSV, JSON."""

from __future__ import annotations

import base64
import csv
import importlib.util
import json
import statistics
import struct
import sys
import types
from html.parser import HTMLParser
from pathlib import Path

import pytest
from compare_helpers import AMD, CUDA, NVD, TORCH_CPU, imported, legacy_file, window_result

from tprimat.compare.model import MismatchError, build_comparison
from tprimat.compare.report import CSV_COLUMNS, write_report
from tprimat.compare.traces import trace_section
from tprimat.errors import TprimatError
from tprimat.result.resultjson import write_result
from tprimat.settings.config import load_config

COST = load_config().cost


def _median_tokens_per_gpu(path: Path, warmup: int = 2) -> float:
    # 64 x 2048 tokens per step on 8 GPUs = 16384 tokens per GPU per step, median over iterations
    steps = json.loads(path.read_text())["step_times"][warmup:]
    return statistics.median(16384 / t for t in steps)


def _flops_per_token_llama8b(seq: int) -> float:
    L, h, f, a, g, d, V = 32, 4096, 14336, 32, 8, 128, 128256
    return 12 * L * h * h * ((1 + g / a + seq / (2 * h)) * (d * a / h) + 1.5 * f / h + V / (2 * L * h))


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


# --- the gate -------------------------------------------------------------------------------


def test_gate_refuses_gbs8_sl8192_against_gbs64_sl2048(legacy_dir):
    with pytest.raises(MismatchError) as caught:
        build_comparison([legacy_file(legacy_dir, CUDA), legacy_file(legacy_dir, AMD)], cost=COST)
    rows = dict(caught.value.rows)
    assert rows["seq_length"] == [8192, 2048]
    assert rows["global_batch_size"] == [8, 64]
    assert rows["measured_iterations"] == [8, 498]
    assert "model" not in rows and "precision" not in rows
    assert "--allow-mismatch" in str(caught.value)


def test_allow_mismatch_puts_them_side_by_side_with_the_diff(legacy_dir, tmp_path):
    comparison = build_comparison([legacy_dir], cost=COST, allow_mismatch=True)
    assert len(comparison.groups) == 2
    assert [s.label for s in comparison.systems] == [
        "8× H100-SXM · legacy [A]",
        "8× MI300X · Primus [B]",
        "8× H100-SXM · NeMo [B]",
    ]
    assert all(
        not s.same_config_as_baseline
        for s in comparison.systems
        if s.group != comparison.system(comparison.baseline).group
    )
    written = write_report(comparison, tmp_path, ["md"])
    text = written["report.md"].read_text()
    assert "## Warning: configurations differ" in text
    assert "| seq_length | 8192 | 2048 |" in text or "| seq_length | 2048 | 8192 |" in text
    assert "configurations differ (see above)" in text


# --- numbers against hand computation --------------------------------------------------------


@pytest.fixture(scope="module")
def pair_report(legacy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("pair")
    comparison = build_comparison(
        [legacy_file(legacy_dir, AMD), legacy_file(legacy_dir, NVD)], cost=COST, baseline="H100"
    )
    return comparison, write_report(comparison, out), out


def test_throughput_ratio_tflops_mfu_by_hand(pair_report):
    comparison, written, _ = pair_report
    amd_tps = _median_tokens_per_gpu(AMD)
    nvd_tps = _median_tokens_per_gpu(NVD)
    assert comparison.baseline == "8× H100-SXM · NeMo"
    amd = comparison.system("8× MI300X · Primus")
    nvd = comparison.system("8× H100-SXM · NeMo")
    assert amd.tokens_per_s_per_gpu.median == pytest.approx(amd_tps, rel=1e-12)
    assert nvd.tokens_per_s_per_gpu.median == pytest.approx(nvd_tps, rel=1e-12)
    assert amd.ratio.value == pytest.approx(amd_tps / nvd_tps, rel=1e-12)
    assert amd.ratio.ci_low is None  # one run each
    flops = _flops_per_token_llama8b(2048)
    assert amd.tflops_per_gpu.median == pytest.approx(flops * amd_tps / 1e12, rel=1e-9)
    assert amd.mfu.median == pytest.approx(flops * amd_tps / 1e12 / 1307.4, rel=1e-9)
    assert nvd.mfu.median == pytest.approx(flops * nvd_tps / 1e12 / 989.4, rel=1e-9)
    assert amd.peak_tflops == [1307.4] and nvd.peak_tflops == [989.4]
    text = written["report.md"].read_text()
    assert f"{amd_tps / nvd_tps:.3f}× the tokens/s/GPU of 8× H100-SXM · NeMo" in text
    assert f"| {amd_tps:,.1f} (single run) |" in text
    assert f"{flops / 1e9:.3f} GFLOP per token" in text
    assert "| 8× MI300X · Primus | " in text and "| 1307.4 | MI300X bf16" in text


def test_step_time_memory_loss_cost_by_hand(pair_report):
    comparison, written, _ = pair_report
    steps = json.loads(NVD.read_text())["step_times"][2:]
    nvd = comparison.system("8× H100-SXM · NeMo")
    assert nvd.step_time_median_s.median == pytest.approx(statistics.median(steps))
    cv = statistics.stdev(steps) / statistics.mean(steps)
    assert nvd.step_time_cv.median == pytest.approx(cv)
    # legacy peak_memory_allocated_gb 36.17082 GB -> GiB
    assert nvd.memory["mem_max_allocated_gib"].median == pytest.approx(36.17082e9 / 2**30)
    amd = comparison.system("8× MI300X · Primus")
    assert "mem_max_allocated_gib" not in amd.memory
    assert nvd.final_loss.median == json.loads(NVD.read_text())["loss_values"][-1]
    tps = _median_tokens_per_gpu(NVD)
    hours = 1e12 / tps / 3600
    assert nvd.cost.price_per_gpu_hour == 3.49
    assert nvd.cost.gpu_hours_per_1t_tokens == pytest.approx(hours)
    assert nvd.cost.cost_per_1t_tokens == pytest.approx(hours * 3.49)
    assert nvd.cost.time_to_train_s == pytest.approx(1e12 / (tps * 8))
    text = written["report.md"].read_text()
    assert f"| {hours:,.0f} | {hours * 3.49:,.0f} |" in text
    assert f"{1e12 / (tps * 8) / 86400:,.1f} days on 8 GPUs" in text
    assert "allocator max allocated (GiB)" in text
    assert "group A: dataset is not recorded (unknown)" in text


def test_repeats_are_aggregated_with_intervals(tmp_path):
    amd, nvd = imported(AMD), imported(NVD)
    paths = []
    for source, name in ((amd, "amd"), (nvd, "nvd")):
        for first, last in ((3, 251), (252, 500)):
            path = tmp_path / name / f"{first}" / "result.json"
            write_result(window_result(source, first, last, f"{name}-{first}"), path)
            paths.append(path)
    comparison = build_comparison([tmp_path], cost=COST, baseline="nvidia")

    def window_median(path: Path, first: int, last: int) -> float:
        steps = json.loads(path.read_text())["step_times"][first - 1 : last]
        return statistics.median(16384 / t for t in steps)

    a = sorted([window_median(AMD, 3, 251), window_median(AMD, 252, 500)])
    n = sorted([window_median(NVD, 3, 251), window_median(NVD, 252, 500)])
    system = comparison.system("8× MI300X · Primus")
    assert system.tokens_per_s_per_gpu.n == 2
    assert system.tokens_per_s_per_gpu.median == pytest.approx((a[0] + a[1]) / 2)
    assert (system.tokens_per_s_per_gpu.ci_low, system.tokens_per_s_per_gpu.ci_high) == pytest.approx((a[0], a[1]))
    assert system.ratio.value == pytest.approx(((a[0] + a[1]) / 2) / ((n[0] + n[1]) / 2))
    assert system.ratio.ci_low == pytest.approx(a[0] / n[1])
    assert system.ratio.ci_high == pytest.approx(a[1] / n[0])
    written = write_report(comparison, tmp_path / "report", ["md", "csv"])
    text = written["report.md"].read_text()
    assert f"{a[0]:,.1f} – {a[1]:,.1f}" in text
    assert "(single run)" not in text.split("## Throughput")[1].split("## Step time")[0]
    rows = list(csv.DictReader(written["results.csv"].open()))
    assert len(rows) == 4


def test_three_repeats_use_the_median_not_the_mean(tmp_path):
    amd = imported(AMD)
    windows = ((3, 168), (169, 334), (335, 500))
    for first, last in windows:
        write_result(window_result(amd, first, last, f"amd-{first}"), tmp_path / str(first) / "result.json")
    comparison = build_comparison([tmp_path], cost=COST)
    steps = json.loads(AMD.read_text())["step_times"]
    medians = sorted(statistics.median(16384 / t for t in steps[first - 1 : last]) for first, last in windows)
    agg = comparison.systems[0].tokens_per_s_per_gpu
    assert statistics.mean(medians) != pytest.approx(medians[1], rel=1e-6)
    assert agg.median == pytest.approx(medians[1], rel=1e-12)
    assert (agg.min, agg.max) == pytest.approx((medians[0], medians[2]))
    assert medians[0] <= agg.ci_low <= agg.median <= agg.ci_high <= medians[2]


# --- outputs ------------------------------------------------------------------------------


def test_plots_are_slide_sized_pngs(pair_report):
    image = pytest.importorskip("matplotlib.image")
    _, written, out = pair_report
    for name in ("throughput.png", "step_time.png", "loss.png", "memory.png", "mfu.png"):
        assert written[name] == out / name
        assert _png_size(out / name) == (1600, 900)
        assert image.imread(out / name).shape[:2] == (900, 1600)  # decodes as a PNG


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources: list[str] = []
        self.tables = 0
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "img":
            self.sources.append(attributes["src"])
        if tag == "table":
            self.tables += 1
        if tag in ("link", "script") or (tag == "a" and "href" in attributes):
            self.links.append(tag)


def test_html_is_self_contained_with_embedded_images(pair_report):
    pytest.importorskip("matplotlib")
    _, written, out = pair_report
    parser = _Images()
    parser.feed(written["report.html"].read_text())
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(parser.sources) == len(pngs) == 5
    for source in parser.sources:
        assert source.startswith("data:image/png;base64,")
        data = base64.b64decode(source.split(",", 1)[1])
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    embedded = {base64.b64decode(s.split(",", 1)[1]) for s in parser.sources}
    assert embedded == {p.read_bytes() for p in out.glob("*.png")}
    assert parser.tables >= 8 and parser.links == []


def test_csv_is_mad_compatible(pair_report):
    comparison, written, _ = pair_report
    lines = written["results.csv"].read_text().splitlines()
    assert lines[0].startswith("model,performance,metric,")
    rows = list(csv.DictReader(lines))
    assert [r["model"] for r in rows] == ["llama3.1-8b", "llama3.1-8b"]
    assert {r["metric"] for r in rows} == {"tokens_per_s_per_gpu"}
    assert float(rows[0]["performance"]) == pytest.approx(_median_tokens_per_gpu(AMD), abs=5e-4)
    assert rows[0]["gpu_architecture"] == "MI300X" and rows[0]["n_gpus"] == "8"
    assert rows[1]["status"] == "SUCCESS"
    assert list(rows[0]) == list(CSV_COLUMNS)


def test_report_json_is_strict_and_complete(pair_report):
    comparison, written, _ = pair_report
    data = json.loads(
        written["report.json"].read_text(), parse_constant=lambda name: pytest.fail(f"non-standard {name}")
    )
    assert data["baseline"] == comparison.baseline
    assert [r["key"] for r in data["runs"]] == ["R1", "R2"]
    assert data["systems"][1]["ratio"]["value"] == pytest.approx(
        _median_tokens_per_gpu(AMD) / _median_tokens_per_gpu(NVD)
    )
    assert ("throughput.png" in data["files"]) == (importlib.util.find_spec("matplotlib") is not None)
    assert data["method"]["bootstrap_resamples"] == 10000


def test_directory_search_reports_invalid_files(legacy_dir, tmp_path):
    runs = tmp_path / "runs"
    for source in (AMD, NVD):
        target = runs / source.name.split(".")[0] / "result.json"
        target.parent.mkdir(parents=True)
        target.write_bytes(legacy_file(legacy_dir, source).read_bytes())
    (runs / "copy.json").write_bytes(legacy_file(legacy_dir, AMD).read_bytes())
    (runs / "broken.json").write_text("{ not json")
    (runs / "other.json").write_text('{"schema_version": 1, "run": {}}')
    (runs / "x" / "manifest.json").parent.mkdir()
    (runs / "x" / "manifest.json").write_text("{}")
    (runs / "x" / "traces").mkdir()
    (runs / "x" / "traces" / "rank0.json").write_text("{}")
    comparison = build_comparison([runs], cost=COST)
    assert len(comparison.runs) == 2
    skipped = {s.path.name: s.reason for s in comparison.skipped}
    assert set(skipped) == {"broken.json", "other.json", "copy.json"}
    assert "a copy of a run already read" in skipped["copy.json"]
    assert skipped["broken.json"].startswith("corrupt JSON")
    assert skipped["other.json"].startswith("invalid result")
    text = write_report(comparison, tmp_path / "out", ["md"])["report.md"].read_text()
    assert "## Skipped inputs" in text and "broken.json" in text


def test_baseline_selection(legacy_dir):
    files = [legacy_file(legacy_dir, AMD), legacy_file(legacy_dir, NVD)]
    assert build_comparison(files, cost=COST).baseline == "8× MI300X · Primus"  # first given
    assert build_comparison(files, cost=COST, baseline="nvd_nemo").baseline == "8× H100-SXM · NeMo"
    with pytest.raises(TprimatError, match="matches no system"):
        build_comparison(files, cost=COST, baseline="B200")
    with pytest.raises(TprimatError, match="matches several systems"):
        build_comparison(files, cost=COST, baseline="8×")


def test_cost_prices_are_overridable(legacy_dir):
    cost = load_config(overrides=['cost.gpu_hour_prices={ "MI300X" = 2.5 }']).cost
    comparison = build_comparison([legacy_file(legacy_dir, AMD), legacy_file(legacy_dir, NVD)], cost=cost)
    amd = comparison.system("8× MI300X · Primus")
    assert amd.cost.cost_per_1t_tokens == pytest.approx(1e12 / _median_tokens_per_gpu(AMD) / 3600 * 2.5)
    nvd = comparison.system("8× H100-SXM · NeMo")
    assert nvd.cost.cost_per_1t_tokens is None and "no price for H100-SXM" in nvd.cost.note


def test_traces_section(legacy_dir, tmp_path, monkeypatch):
    runs = []
    for source in (AMD, NVD):
        run_dir = tmp_path / source.name.split(".")[0]
        (run_dir / "traces").mkdir(parents=True)
        (run_dir / "traces" / "rank0.pt.trace.json").write_text("{}")
        (run_dir / "result.json").write_bytes(legacy_file(legacy_dir, source).read_bytes())
        runs.append(run_dir)
    comparison = build_comparison(runs, cost=COST)
    assert trace_section(build_comparison([legacy_file(legacy_dir, AMD)], cost=COST), tmp_path) == []
    # the comparison module missing (finding the files is the trace package's reader, which stays)
    monkeypatch.setitem(sys.modules, "tprimat.trace.compare", None)  # even if an earlier test imported it
    blocks = trace_section(comparison, tmp_path)
    assert "no trace comparison module" in blocks[1].text

    calls = []

    class Compared:
        def to_markdown(self):
            return "| kernel | a | b |"

        def plot(self, path):
            calls.append(path)
            Path(path).write_bytes(b"\x89PNG\r\n\x1a\n")

    def compare_traces(a_paths, b_paths, labels):
        calls.append((a_paths, b_paths, labels))
        return Compared()

    module = types.ModuleType("tprimat.trace.compare")
    module.compare_traces = compare_traces
    monkeypatch.setitem(sys.modules, "tprimat.trace", types.ModuleType("tprimat.trace"))
    monkeypatch.setitem(sys.modules, "tprimat.trace.compare", module)
    blocks = trace_section(comparison, tmp_path)
    assert calls[0][2] == ("8× MI300X · Primus", "8× H100-SXM · NeMo")
    assert calls[0][0][0].endswith("amd_prim_llama/traces/rank0.pt.trace.json") or "amd_prim" in calls[0][0][0]
    assert [type(b).__name__ for b in blocks] == ["Heading", "Heading", "Markdown", "Image"]


def test_report_without_matplotlib_says_so(legacy_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    comparison = build_comparison([legacy_file(legacy_dir, AMD)], cost=COST)
    written = write_report(comparison, tmp_path, ["md", "html"])
    assert not list(tmp_path.glob("*.png"))
    assert "Figures were not drawn: they need matplotlib" in written["report.md"].read_text()
    assert "<img" not in written["report.html"].read_text()


def test_compare_torch_cpu_results(tmp_path):
    """Results of `tprimat run --backend torch` on CPU (1 vs 2 processes, two repeats each), by hand."""
    results = sorted(TORCH_CPU.rglob("result.json"))
    assert len(results) == 4, "tests/fixtures/compare/torch_cpu holds four run directories"
    comparison = build_comparison(results, cost=COST)  # same fields: no --allow-mismatch needed
    assert len(comparison.groups) == 1

    def by_hand(path: Path) -> float:
        data = json.loads(path.read_text())
        world = data["config"]["world_size"]
        tokens = data["config"]["global_batch_size"] * data["config"]["seq_length"]
        measured = [
            r["step_time_s"] for r in data["iterations"] if r["iteration"] > 2 and not r["profiled"]
        ]  # warm-up 2 (cpu.toml)
        assert len(measured) == 8
        return statistics.median(tokens / t / world for t in measured)

    one = [by_hand(p) for p in results if "-1proc-" in p.parent.name]
    two = [by_hand(p) for p in results if "-2proc-" in p.parent.name]
    assert [s.label for s in comparison.systems] == [comparison.baseline, *(s.label for s in comparison.systems[1:])]
    single = next(s for s in comparison.systems if s.world_size == 1)
    double = next(s for s in comparison.systems if s.world_size == 2)
    assert single.tokens_per_s_per_gpu.n == double.tokens_per_s_per_gpu.n == 2
    assert single.tokens_per_s_per_gpu.median == pytest.approx(statistics.median(one), rel=1e-12)
    assert double.tokens_per_s_per_gpu.median == pytest.approx(statistics.median(two), rel=1e-12)
    assert (single.tokens_per_s_per_gpu.min, single.tokens_per_s_per_gpu.max) == pytest.approx(
        (min(one), max(one)), rel=1e-12
    )
    base, other = (single, double) if comparison.baseline == single.label else (double, single)
    base_values, other_values = (one, two) if base is single else (two, one)
    assert base.ratio is None
    assert other.ratio.value == pytest.approx(
        statistics.median(other_values) / statistics.median(base_values), rel=1e-12
    )
    assert other.ratio.ci_low is not None and other.ratio.ci_low <= other.ratio.ci_high
    written = write_report(comparison, tmp_path)
    text = written["report.md"].read_text()
    for run, row in zip(comparison.runs, comparison.run_rows, strict=True):
        assert row.tokens_per_s_per_gpu == run.result.summary.tokens_per_s_per_gpu.median
        assert row.tokens_per_s_per_gpu == pytest.approx(by_hand(Path(run.path)), rel=1e-12)
    assert "no datasheet peak" in text or "no MFU" in text  # a CPU has no peak: no MFU, said so
    with (tmp_path / "results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(float(r["performance"]) for r in rows) == pytest.approx(sorted(one + two))


def test_plot_captions_never_overlap_bar_labels(legacy_dir, tmp_path, monkeypatch):
    # three systems, two configurations: the tallest labels ("…× baseline\n(different config)")
    pytest.importorskip("matplotlib")
    from tprimat.compare import plots

    figures = {}
    save = plots._save

    def keep(plt, fig, path):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        texts = [*ax.texts, ax.xaxis.label]
        is_caption = [t.get_text().startswith(("error bars:", "same FLOPs formula")) for t in texts]
        caption = next((t for t, c in zip(texts, is_caption, strict=True) if c), None)
        if caption is None:  # the line plots have no caption
            return save(plt, fig, path)
        figures[path.name] = (
            caption.get_window_extent(renderer),
            [t.get_window_extent(renderer) for t, c in zip(texts, is_caption, strict=True) if not c and t.get_text()],
            ax.get_window_extent(renderer),
        )
        return save(plt, fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    comparison = build_comparison([legacy_dir], cost=COST, allow_mismatch=True)
    plots.render_plots(comparison, tmp_path)
    for name in ("throughput.png", "mfu.png"):
        caption, labels, axes = figures[name]
        assert labels, name
        assert caption.y1 <= axes.y0, f"{name}: the caption sits inside the plot, where bar labels go"
        for label in labels:
            assert not caption.overlaps(label), name
            assert label.y1 <= axes.y1, f"{name}: a bar label is cut by the top of the axes"
