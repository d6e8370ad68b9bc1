"""Log files to results: discovery, detection, cross-checks, manifest, partial runs."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest

from tests.plugins.logfixtures import LOGS
from tprimat.contract.registry import Registry
from tprimat.parse import logs
from tprimat.parse.logs import ParseError, Workload, detect_backend, find_log_files, parse_logs
from tprimat.result.schema import Hardware, Software
from tprimat.running.manifest import Manifest, write_manifest
from tprimat.settings.config import load_config

FULL15 = LOGS / "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"
P57 = LOGS / ("primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log")
CELL46 = LOGS / ("nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell46_preemption_sigterm_step4.log")
M2023 = LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


@pytest.mark.parametrize(
    ("name", "backend"),
    [
        (
            "primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log",
            "amd_primus",
        ),
        ("primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log", "amd_primus"),
        ("megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log", "amd_megatron"),
        ("megatron/mlm_2024-04-06_mixtral8x7b_16xH100_issue756_iter71-73_excerpt.log", "nvd_megatron"),
        ("megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log", "nvd_megatron"),
        ("bridge/mbridge_2025-08-29_llama_recipe_20iter_out1.txt", "nvd_megatron"),
        ("bridge/cloudai-test_megatron-bridge_2025-12-22_step-time-line_snippet.log", "nvd_megatron"),
        ("nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log", "nvd_nemo"),
        ("nemo/cloudai-test_nemo-launcher_2025-03-04_perf_metrics_utils_snippet.log", "nvd_nemo"),
    ],
)
def test_format_detection(registry, name, backend):
    detected, reason = detect_backend([LOGS / name], registry)
    assert detected == backend
    assert ":" in reason  # names the line that decided it


def test_every_fixture_with_iterations_parses_to_a_result(registry):
    for path in sorted(LOGS.rglob("*")):
        if path.suffix not in (".log", ".txt"):
            continue
        try:
            outcome = parse_logs([path], registry=registry, allow_mismatch=True)
        except ParseError as exc:
            assert "no training iteration" in str(exc) or "no step timing found" in str(exc), path
            continue
        assert outcome.result.iterations, path


def test_tokens_per_gpu_are_computed_by_the_core_from_step_times(registry):
    outcome = parse_logs([P57], registry=registry, workload=Workload(model="llama3.1-8b"))
    result = outcome.result
    assert result.config.global_batch_size == 8 and result.config.seq_length == 4096
    assert result.config.world_size == 8  # read from the log
    last = result.iterations[-1]
    assert last.tokens_per_s_per_gpu == pytest.approx(8 * 4096 / 0.4326 / 8)
    # Primus's own figure (9468.3) is kept beside it, never used as the headline.
    assert last.reported["tokens_per_s_per_gpu"] == 9468.3
    # 10 iterations: warm-up 1-2 and the stated torch-profiler window (5-7) left out
    assert result.summary.measured_iterations == 5
    assert result.run.status == "completed"
    assert result.hardware.device_name is None and result.run.platform is None
    assert any("GiB" in note for note in result.provenance.notes)


def test_batch_mismatch_names_both_values_and_the_override_is_recorded(registry, tmp_path):
    config_file = tmp_path / "run.toml"
    config_file.write_text("[training]\nglobal_batch_size = 128\nseq_length = 2048\n[launch]\nnproc_per_node = 1\n")
    config = load_config(config_file)
    with pytest.raises(ParseError) as info:
        parse_logs([FULL15], registry=registry, config=config, config_label="config run.toml")
    message = str(info.value)
    assert "128" in message and "80" in message and "config run.toml" in message
    outcome = parse_logs([FULL15], registry=registry, config=config, allow_mismatch=True)
    assert any("--allow-mismatch" in n and "128" in n for n in outcome.result.provenance.notes)
    assert outcome.result.config.global_batch_size == 128


def test_matching_config_passes_and_carries_its_fingerprint(registry, tmp_path):
    config = load_config(
        None,
        [
            "training.global_batch_size=80",
            "training.seq_length=2048",
            "launch.nproc_per_node=1",
            "training.micro_batch_size=2",
        ],
    )
    outcome = parse_logs([FULL15], registry=registry, config=config)
    assert outcome.result.config.config_fingerprint == config.fingerprint()
    assert outcome.result.iterations[5].tokens_per_s_per_gpu == pytest.approx(
        80 * 2048 / outcome.result.iterations[5].step_time_s
    )


def test_consumed_samples_that_do_not_add_up_are_a_mismatch(registry, tmp_path):
    line = (
        " iteration {n}/ 10 | consumed samples: {c} | elapsed time per iteration (ms): 900.0 |"
        " global batch size: 64 | lm loss: 2.0 | number of skipped iterations: 0 |"
        " number of nan iterations: 0 |\n"
    )
    log = tmp_path / "train.log"
    log.write_text("".join(line.format(n=n, c=n * 32) for n in (1, 2, 3)))
    with pytest.raises(ParseError, match="consumed samples"):
        parse_logs([log], registry=registry, backend="nvd_megatron", workload=Workload(global_batch_size=64))


def test_command_line_batch_size_is_checked_against_the_log(registry):
    with pytest.raises(ParseError, match="global batch size: the command line says 64"):
        parse_logs([FULL15], registry=registry, workload=Workload(global_batch_size=64))


def test_a_log_with_several_batch_sizes_is_not_silently_averaged(registry):
    # These lines come from different runs (64, 128 and 256 sequences per step).
    path = LOGS / ("primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log")
    expected = r"the log \(first value it states\) says 128.*64, 128, 256"
    with pytest.raises(ParseError, match=expected):
        parse_logs([path], registry=registry)


def test_manifest_next_to_the_log_gives_hardware(registry, tmp_path):
    shutil.copy(P57, tmp_path / "run.log")
    manifest = Manifest(
        tprimat_version="0.1.0",
        created_at="2026-05-15T17:00:00+00:00",
        hardware=Hardware(device_name="AMD Instinct MI355X", device_count_per_node=8),
        software=Software(rocm="7.0.0"),
        platform="amd",
    )
    write_manifest(manifest, tmp_path)
    result = parse_logs([tmp_path / "run.log"], registry=registry).result
    assert result.hardware.device_name == "AMD Instinct MI355X"
    assert result.run.platform == "amd" and result.software.rocm == "7.0.0"


def test_preempted_run_is_interrupted_with_its_reason(registry):
    result = parse_logs([CELL46], registry=registry).result
    assert result.run.status == "interrupted"
    assert "Received signal 15" in result.caveats.stopped_by
    assert any("ends at iteration 3 of 20" in n for n in result.provenance.notes)


def test_cut_off_last_line_is_skipped_and_makes_the_run_partial(registry, tmp_path):
    text = FULL15.read_text(encoding="utf-8")
    cut = text[: text.index("iteration       15/") + 120]  # no newline at the end
    log = tmp_path / "cut.log"
    log.write_text(cut)
    result = parse_logs([log], registry=registry).result
    assert result.iterations[-1].iteration == 14
    assert result.run.status == "partial"
    assert any("no newline" in n for n in result.provenance.notes)


def test_missing_iterations_in_the_middle_make_the_run_partial(registry, tmp_path):
    lines = FULL15.read_text(encoding="utf-8").splitlines(True)
    log = tmp_path / "gap.log"
    log.write_text("".join(line for line in lines if "iteration        7/" not in line))
    result = parse_logs([log], registry=registry).result
    assert result.run.status == "partial"
    assert any("missing from the log: 7" in n for n in result.provenance.notes)


def test_log_interval_lines_count_as_warm_up_by_iterations(registry):
    result = parse_logs([M2023], registry=registry).result
    # Warm-up 2 iterations: only the line covering iterations 1-100 is left out.
    assert result.summary.measured_iterations == 19
    assert result.iterations[0].covers_iterations == 100


def test_iteration_one_is_warm_up_for_megatron_even_with_no_warm_up(registry):
    result = parse_logs([FULL15], registry=registry, workload=Workload(warmup_iterations=0)).result
    assert result.summary.warmup_iterations == 1
    assert any("iteration 1 includes start-up" in n for n in result.provenance.notes)


def test_empty_and_unrelated_files_are_errors(registry, tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(ParseError, match="this looks like an empty file"):
        parse_logs([empty], registry=registry)
    with pytest.raises(ParseError, match="no training iterations"):
        parse_logs([P57], registry=registry, backend="nvd_nemo")


def _primus_tree(root: Path) -> Path:
    """A Primus experiment directory: rank 0 holds memory lines, rank 7 the iteration lines."""
    lines = P57.read_text(encoding="utf-8").splitlines(True)
    base = root / "ws" / "group" / "user" / "exp" / "logs" / "pre_trainer"
    for rank in (0, 7):
        directory = base / f"rank-{rank}"
        directory.mkdir(parents=True)
        mine = [line for line in lines if f"rank-{rank}/8" in line]
        half = len(mine) // 2
        (directory / "debug.2026-05-15_17-10-00_000001.log").write_text("".join(mine[:half]))
        (directory / "debug.log").write_text("".join(mine[half:]))
        info = [line for line in mine if "[INFO]" in line]
        (directory / "info.log").write_text("".join(info))
    return root / "ws"


def test_primus_tree_reads_one_family_per_rank_oldest_first(registry, tmp_path):
    top = _primus_tree(tmp_path)
    files, notes = find_log_files([top], registry)
    names = [(f.parent.name, f.name) for f in files]
    rotated = "debug.2026-05-15_17-10-00_000001.log"
    assert names == [("rank-0", rotated), ("rank-0", "debug.log"), ("rank-7", rotated), ("rank-7", "debug.log")]
    assert "2 rank directories" in notes[0]
    result = parse_logs([top], registry=registry).result
    assert [r.iteration for r in result.iterations] == list(range(1, 11))
    assert result.iterations[0].mem_max_allocated_gib is not None  # from rank 0's file
    assert result.run.backend == "amd_primus"


def test_primus_rotations_of_one_rank_and_level_are_one_stream(registry, tmp_path):
    """``BackendSpec.log_stream``: the files the tree reads, grouped as the core reads them."""
    from tprimat.parse.logs import _continues_stream

    top = _primus_tree(tmp_path)
    files, _ = find_log_files([top], registry)
    stream = registry.backend("amd_primus").spec.log_stream
    assert _continues_stream(files, stream) == [False, True, False, True]
    rank = files[0].parent
    assert stream(rank / "debug.log.3") == stream(rank / "debug.log") == (str(rank), "debug")
    assert stream(rank / "info.log") == (str(rank), "info")
    assert stream(rank / "console.log") is None
    assert stream(files[2]) != stream(files[1])  # another rank
    assert _continues_stream(files, None) == [False] * 4  # a backend without streams


def test_core_throughput_matches_primus_figure_when_the_workload_is_right(registry, tmp_path):
    """Llama 3.1 8B on 8 GPUs, GBS 128, sequence 8192: the core's formula gives Primus's 10005.5."""
    source = LOGS / (
        "primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log"
    )
    line = next(x for x in source.read_text(encoding="utf-8").splitlines(True) if x.startswith("[20251202 06:56:28]"))
    log = tmp_path / "one.log"
    log.write_text(line)
    result = parse_logs(
        [log],
        registry=registry,
        workload=Workload(seq_length=8192, world_size=8, global_batch_size=128, warmup_iterations=0),
    ).result
    (record,) = result.iterations
    assert record.tokens_per_s_per_gpu == pytest.approx(128 * 8192 / 13.1 / 8)
    assert record.tokens_per_s_per_gpu == pytest.approx(record.reported["tokens_per_s_per_gpu"], abs=0.1)


def test_interleaved_ranks_and_binary_junk_are_skipped_with_their_place(registry, tmp_path):
    lines = FULL15.read_text(encoding="utf-8").splitlines(True)
    at = next(i for i, line in enumerate(lines) if "iteration        9/" in line)
    line = lines[at]
    # Two ranks writing at once: iteration 9's line is split by another rank's output.
    lines[at : at + 1] = [line[:180] + "[rank3]: W1105 NCCL WARN timeout\n", line[180:]]
    blob = "".join(lines).encode() + b"\x00\xff\xfe garbage \x80\x81\n"
    log = tmp_path / "mixed.log"
    log.write_bytes(blob[:2000] + b"\xc3\x28\x00\x9f\n" + blob[2000:])
    result = parse_logs([log], registry=registry).result
    assert [r.iteration for r in result.iterations] == [i for i in range(1, 16) if i != 9]
    assert result.run.status == "partial"
    notes = result.provenance.notes
    assert any(n.startswith(f"skipped mixed.log:{at + 2}") for n in notes)  # +1 junk line
    assert any("missing from the log: 9" in n for n in notes)


def test_a_log_without_step_timing_is_refused_not_completed(registry):
    # NeMo 2 PEFT fine-tuning (tutorial notebook): 20 step lines with loss and lr, no
    # train_step_timing.  Before: status "completed" with 0 measured iterations and exit 0.
    peft = LOGS / "nemo/nemo2_2024-11_peft_lora_llama3-8b_cell20_finetune.log"
    with pytest.raises(ParseError, match="no step timing found: 20 iterations") as exc:
        parse_logs([peft], registry=registry)
    assert "loss" in str(exc.value) and "train_step_timing" in str(exc.value)


def test_the_cycle_collector_is_off_while_logs_are_read_and_back_after(registry, monkeypatch):
    from tprimat.result.collect import EventCollector

    states = []
    consume = EventCollector.consume

    def spy(self, events):
        states.append(gc.isenabled())
        return consume(self, events)

    monkeypatch.setattr(EventCollector, "consume", spy)
    assert gc.isenabled()
    parse_logs([M2023], registry=registry, allow_mismatch=True)
    assert states and not any(states)
    assert gc.isenabled()
    gc.disable()  # a caller that turned it off keeps it off
    try:
        parse_logs([M2023], registry=registry, allow_mismatch=True)
        assert not gc.isenabled()
    finally:
        gc.enable()
    monkeypatch.setattr(EventCollector, "consume", lambda self, events: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        parse_logs([M2023], registry=registry, allow_mismatch=True)
    assert gc.isenabled()  # back on after an error too


def test_the_memory_scan_of_a_large_input_runs_in_a_child_and_gives_the_same_peaks(tmp_path, monkeypatch):
    """Where the parser read no memory peaks, the backend's reader scans the files: in a forked
    child for a large input (its peaks read once the summary wants them), here for a small one."""
    import os

    from tprimat.contract.records import RankPeak
    from tprimat.result.collect import EventCollector

    log = tmp_path / "run.log"
    log.write_text("a line\n")

    def reader(path):
        return [RankPeak(rank=os.getpid(), device_used_gib=float(len(path.read_text())))]

    def scanned():
        with logs._rank_peaks(EventCollector(), reader, [log]) as peaks:
            return list(peaks)

    (here,) = scanned()
    assert here.rank == os.getpid()
    monkeypatch.setattr(logs, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr("tprimat.workers.default_workers", lambda: 2)  # a child only beside a second CPU
    (child,) = scanned()
    assert child.rank != os.getpid() and child.device_used_gib == here.device_used_gib == 7.0
    read = EventCollector().consume([RankPeak(rank=3, device_used_gib=1.0)])
    with logs._rank_peaks(read, reader, [log]) as peaks:
        assert list(peaks) == [RankPeak(rank=3, device_used_gib=1.0)]  # the parser's: no scan
