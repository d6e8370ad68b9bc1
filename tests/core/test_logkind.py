"""Refusals name what a file most likely is; wrapped logs are joined; stop reasons are kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from tprimat.contract.registry import Registry
from tprimat.parse.logkind import describe_unreadable, read_head, unwrap_lines, wrap_width
from tprimat.parse.logs import ParseError, parse_logs
from tprimat.parse.stopreason import find_stop_reason

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOGS = FIXTURES / "logs"
GENERIC = "not a Primus, Megatron-LM"
OOM = "megatron/mlm_core0.16rc0_2026-03-26_llama3-1b_1gpu_GH200_OOM-iter1_"
WATCHDOG = LOGS / "nemo/nemo1_2024-02-17_pytorch-issue118369_progress-bar_nccl-watchdog-timeout_excerpt.log"
PREEMPTED = LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell46_preemption_sigterm_step4.log"
RESTARTED = LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell22_crash_at_step17_injob_restart.log"


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


def _describe(path: Path) -> str:
    return describe_unreadable(path, read_head(path), Registry.from_environment())


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            LOGS / (OOM + "stderr.log"),
            "the error output (stderr) of a run that failed: it ends with torch.OutOfMemoryError: CUDA out of memory",
        ),
        (LOGS / (OOM + "stdout.log"), "a Megatron-LM start-up log that ends before the first iteration"),
        (
            LOGS / "primus/primus_AMD-AGI-Primus_PR656_mlperf_llama3.1_8b_MI355X_2026-04-06_excerpt.log",
            "Primus's end-of-run summary lines ([EarlyStop]/[TimeToTrain]) without the iteration lines",
        ),
        (WATCHDOG, "a NeMo 1.x log with only its PyTorch Lightning progress bar (line 1)"),
        (FIXTURES / "legacy/output__benchmark_cuda_llama.627dfac.json", "`tprimat import-legacy`"),
        (FIXTURES / "traces/hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz", "a gzip-compressed file"),
    ],
)
def test_real_unreadable_files_are_named(registry, path, expected):
    if not path.exists():
        pytest.skip(f"{path} not present")
    assert expected in _describe(path)
    with pytest.raises(ParseError) as exc:
        parse_logs([path], registry=registry)
    message = str(exc.value)
    assert expected in message and GENERIC not in message


def test_the_watchdog_stop_is_named_in_the_refusal():
    assert "the run was stopped by NCCL/RCCL watchdog: collective operation timeout" in _describe(WATCHDOG)


def test_argument_dumps_are_not_stop_reasons():
    # The OOM run's argument dump names straggler and heartbeat *settings*.
    lines = read_head(LOGS / (OOM + "stdout.log"), 2000)
    assert any("straggler" in line for line in lines)
    assert find_stop_reason(lines) is None


def test_a_preempted_run_records_why_it_stopped(registry):
    result = parse_logs([PREEMPTED], registry=registry).result
    assert result.run.status == "interrupted"  # before: "partial", reason lost
    assert result.caveats.stopped_by.startswith("preemption signal (graceful stop) (")
    assert "Received signal 15, initiating graceful stop" in result.caveats.stopped_by


def test_a_restarted_run_that_finished_has_no_stop_reason(registry):
    # ft_launcher sent SIGTERM after the crash at step 17, then training resumed and finished.
    result = parse_logs([RESTARTED], registry=registry).result
    assert result.caveats is None and result.run.status == "completed"


def _fold(text: str, width: int) -> str:
    out = []
    for line in text.splitlines():
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    "name",
    [
        "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log",
        "primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log",
    ],
)
def test_a_log_hard_wrapped_at_80_columns_reads_like_the_original(registry, tmp_path, name):
    # The real log as a terminal capture folds it: every line cut into 80-column pieces.
    original = LOGS / name
    wrapped = tmp_path / "wrapped.log"
    wrapped.write_text(_fold(original.read_text(encoding="utf-8"), 80), encoding="utf-8")
    assert wrap_width(read_head(wrapped, 5000)) == 80
    want = parse_logs([original], registry=registry).result
    got = parse_logs([wrapped], registry=registry).result
    assert got.run.backend == want.run.backend
    fields = ("iteration", "step_time_s", "loss", "lr", "grad_norm", "mem_device_used_gib")
    assert [[getattr(r, f) for f in fields] for r in got.iterations] == [
        [getattr(r, f) for f in fields] for r in want.iterations
    ]
    assert any("hard-wrapped at 80 columns" in n for n in got.provenance.notes)


def test_unwrap_joins_only_full_width_pieces():
    assert list(unwrap_lines(["a" * 5 + "\n", "bc\n", "d\n"], 5)) == ["aaaaabc\n", "d\n"]


def test_a_backend_forced_against_the_logs_platform_warns(registry):
    rocm = LOGS / "megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log"
    outcome = parse_logs([rocm], registry=registry, backend="nvd_megatron")
    (warning,) = outcome.warnings
    assert warning.startswith("--backend nvd_megatron is a nvidia backend but the log shows ROCm/AMD")
    assert warning in outcome.result.provenance.notes
    assert parse_logs([rocm], registry=registry, backend="amd_megatron").warnings == []
    assert parse_logs([rocm], registry=registry).warnings == []  # detected: nothing to warn about


def test_the_warning_reaches_the_terminal(tmp_path):
    from click.testing import CliRunner

    from tprimat.cli import cli

    rocm = LOGS / "megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log"
    out = CliRunner().invoke(cli, ["parse", "--backend", "nvd_megatron", str(rocm), "-o", str(tmp_path / "r.json")])
    assert out.exit_code == 0, out.output
    assert "warning: --backend nvd_megatron is a nvidia backend" in out.output


def test_a_torchtitan_log_is_named_with_why_it_is_not_read(registry):
    titan = LOGS / "torchtitan/torchtitan_2026-02-24_pr2389_moe-gate-fp32_step4-5_excerpt.log"
    with pytest.raises(ParseError) as exc:
        parse_logs([titan], registry=registry)
    message = str(exc.value)
    assert "a TorchTitan log (line 1: 'step: ... loss: ... tps: ...') with no sign of Primus" in message
    assert "--backend amd_primus" in message and GENERIC not in message


def test_a_dllogger_stream_that_is_not_nemos_is_named(registry):
    stream = LOGS / "dllogger/dllogger_example_resnet_log_first10_excerpt.json"
    with pytest.raises(ParseError) as exc:
        parse_logs([stream], registry=registry)
    message = str(exc.value)
    assert "a DLLogger JSON stream (line 1 starts with 'DLLL {') that is not NeMo's" in message
    assert "no record has NeMo's model config (cfg/...)" in message and GENERIC not in message


def test_without_a_backend_that_knows_it_a_dllogger_stream_is_named_by_the_core():
    stream = LOGS / "dllogger/dllogger_example_resnet_log_first10_excerpt.json"
    message = describe_unreadable(stream, read_head(stream), None)
    assert message.startswith("a DLLogger JSON stream (line 1 starts with 'DLLL {')")
    assert "no installed backend recognises these records as training steps" in message


def test_a_nemo_progress_bar_is_named_by_the_nemo_backend_not_the_core():
    # The core names no framework's progress bar: without the backend it is not a known format.
    assert "progress bar" not in describe_unreadable(WATCHDOG, read_head(WATCHDOG), None)
    assert "exp_manager.create_dllogger_logger=true" in _describe(WATCHDOG)


def test_straggler_stop_and_warning_messages():
    # The messages of nvidia-resiliency-ext's StragglerDetectionCallback (straggler_det_callback.py).
    stop = "[NeMo E 2025-01-01 00:00:00 straggler_det_callback:1] Detected stragglers. Terminating training..."
    warn = "STRAGGLER DETECTION WARNING: Some GPUs have worse relative performance. Affected ranks: [3]"
    assert find_stop_reason([warn]) is None
    assert find_stop_reason([warn, stop]).startswith("straggler detector (line 2:")


def test_an_uncompressed_trace_is_named_from_its_head(tmp_path):
    import gzip

    gz = FIXTURES / "traces/hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    trace = tmp_path / "rank-0.pt.trace.json"
    trace.write_bytes(gzip.decompress(gz.read_bytes()))
    assert _describe(trace).startswith("a PyTorch profiler (Kineto) trace")
