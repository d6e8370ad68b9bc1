"""Real logs hard-wrapped at any terminal width are read; refusals say what a wrapped or crashed log is.

The wrapped logs are the real fixture logs cut into pieces of N characters (mid-token), as a
terminal of N columns or a web page copies them; the crashed log is the real TorchTitan step
line followed by the real out-of-memory traceback of a Megatron-LM run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.contract.registry import Registry
from tprimat.parse.logs import parse_logs

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
TITAN = LOGS / "torchtitan/torchtitan_2026-02-24_pr2389_moe-gate-fp32_step4-5_excerpt.log"
OOM_STDERR = LOGS / "megatron/mlm_core0.16rc0_2026-03-26_llama3-1b_1gpu_GH200_OOM-iter1_stderr.log"
FIELDS = ("iteration", "step_time_s", "loss", "lr", "grad_norm", "mem_device_used_gib")


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


def fold(text: str, width: int) -> str:
    """``text`` with every line cut into pieces of ``width`` characters (newlines only end lines)."""
    out = []
    for line in text.split("\n"):
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


def _wrapped(tmp_path: Path, original: Path, width: int) -> Path:
    path = tmp_path / f"wrapped{width}.log"
    path.write_text(fold(original.read_text(encoding="utf-8"), width), encoding="utf-8")
    return path


def _rows(result) -> list[list]:
    return [[getattr(r, f) for f in FIELDS] for r in result.iterations]


@pytest.mark.parametrize("width", [85, 86, 100, 137])
@pytest.mark.parametrize(
    "name",
    [
        # each was read wrongly or refused at one of these widths: a sniffer knew the first piece
        "bridge/cloudai-test_megatron-bridge_2025-12-22_step-time-line_snippet.log",
        "nemo/nemo1_2025-06-12_gpu-recipes_llama3-8b_8xB200_fp8_nemo25.04_dll-stdout_full.log",
        "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log",
        "megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log",
        "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log",
    ],
)
def test_a_log_hard_wrapped_at_any_width_reads_like_the_original(registry, tmp_path, name, width):
    original = LOGS / name
    want = parse_logs([original], registry=registry).result
    got = parse_logs([_wrapped(tmp_path, original, width)], registry=registry).result
    assert got.run.backend == want.run.backend
    assert _rows(got) == _rows(want)
    longest = max(len(line) for line in original.read_text(encoding="utf-8").split("\n"))
    wrapped = any(f"hard-wrapped at {width} columns" in n for n in got.provenance.notes)
    assert wrapped == (longest > width)  # a file with no line that long is not wrapped


def test_a_wrapped_log_is_joined_with_the_backend_given_too(registry, tmp_path):
    original = LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log"
    got = parse_logs([_wrapped(tmp_path, original, 86)], registry=registry, backend="nvd_nemo").result
    assert _rows(got) == _rows(parse_logs([original], registry=registry).result)


def test_a_log_whose_lines_are_all_as_long_as_its_longest_is_not_joined(registry):
    # Twelve iteration lines of 177 characters each: the shape of a wrap, but it reads as it is.
    snippet = LOGS / "nemo/cloudai-test_nemo-run_12iter_snippet.log"
    lengths = {len(line) for line in snippet.read_text(encoding="utf-8").splitlines() if line.strip()}
    assert len(lengths) == 1
    result = parse_logs([snippet], registry=registry).result
    assert len(result.iterations) == 12
    assert not any("hard-wrapped" in n for n in result.provenance.notes)


@pytest.mark.parametrize("width", [85, 86])
def test_a_wrapped_log_of_a_format_no_backend_reads_is_named_not_called_unknown(tmp_path, width):
    result = CliRunner().invoke(cli, ["parse", str(_wrapped(tmp_path, TITAN, width))])
    assert result.exit_code == 2
    message = result.stderr
    assert "a TorchTitan log" in message and f"hard-wrapped at {width} columns" in message
    assert "no line of a training log format" not in message
    # told how to read it: as Primus's engine, which then joins the wraps
    fixed = CliRunner().invoke(cli, ["parse", str(_wrapped(tmp_path, TITAN, width)), "--backend", "amd_primus"])
    assert fixed.exit_code == 0, fixed.output
    assert "hard-wrapped at" in fixed.output


def test_a_wrapped_file_that_is_no_log_when_joined_is_called_wrapped_with_the_fix(tmp_path):
    (excerpt,) = (LOGS / "primus").glob("*deepseek-v4_p21_*_lines331-2399_argument-dumps_excerpt.log")
    result = CliRunner().invoke(cli, ["parse", str(_wrapped(tmp_path, excerpt, 85))])
    assert result.exit_code == 2
    assert "looks hard-wrapped at 85 columns" in result.stderr
    assert "parse the original log file" in result.stderr


def _titan_oom(tmp_path: Path, platform: str = "CUDA") -> Path:
    step = TITAN.read_text(encoding="utf-8").splitlines(keepends=True)[0]
    traceback = OOM_STDERR.read_text(encoding="utf-8")
    if platform == "HIP":  # what PyTorch on ROCm prints instead
        traceback = traceback.replace("CUDA out of memory", "HIP out of memory")
    path = tmp_path / "titan_oom.log"
    path.write_text(step + traceback, encoding="utf-8")
    return path


@pytest.mark.parametrize("platform", ["CUDA", "HIP"])
def test_an_out_of_memory_crash_after_one_step_is_named(tmp_path, platform):
    result = CliRunner().invoke(cli, ["parse", str(_titan_oom(tmp_path, platform)), "--backend", "amd_primus"])
    assert result.exit_code == 2
    message = result.stderr
    assert "stopped by an out-of-memory error on the GPU" in message
    assert f"{platform} out of memory" in message and "after 1 iteration line" in message
    assert "fine-tuning" not in message and "Traceback" not in result.output


def test_an_out_of_memory_crash_after_timed_steps_is_the_runs_stop_reason(registry, tmp_path):
    lines = TITAN.read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "titan_oom.log"
    path.write_text("".join(lines) + OOM_STDERR.read_text(encoding="utf-8"), encoding="utf-8")
    result = parse_logs([path], registry=registry, backend="amd_primus").result
    assert result.caveats.stopped_by.startswith("an out-of-memory error on the GPU (titan_oom.log:")
