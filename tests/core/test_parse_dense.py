"""Dense logs (one iteration line per iteration, as ``--log-interval 1`` prints) read as a slow,
obviously-correct reader reads them.

The logs are built by ``bench/denselogs.py`` from every iteration-line form of the fixtures in
``tests/fixtures/logs`` (ANSI and plain), a few thousand iterations per kind.  The reference reader
below takes each line on its own with one regex per figure; ``tprimat parse`` (serial, and in
parallel with tiny ranges) must give every iteration with the same figures.
"""

from __future__ import annotations

import importlib.util
import math
import re
from datetime import datetime
from pathlib import Path

import pytest

from tprimat.contract.registry import Registry
from tprimat.parse.logs import parse_logs

BENCH = Path(__file__).resolve().parents[2] / "bench" / "denselogs.py"
ITERATIONS = 3000


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


def _denselogs():
    spec = importlib.util.spec_from_file_location("denselogs", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ANSI = re.compile(r"\x1b\[[0-9;]*m|\[[0-9;]*m")


def _number(line: str, label: str) -> float | None:
    found = re.search(re.escape(label) + r"\s*([-+0-9.eE]+)", line)
    return None if found is None else float(found.group(1))


def _megatron_reference(text: str) -> dict[int, dict]:
    """Each Megatron-family iteration line's figures, by iteration."""
    records = {}
    for line in text.splitlines():
        line = _ANSI.sub("", line)
        head = re.search(r"(?<![A-Za-z_])iteration\s+(\d+)\s*/\s*(\d+)\s*\|", line)
        if head is None or "number of nan iterations" not in line:
            continue
        elapsed = _number(line, "elapsed time per iteration (ms):")
        tokens = _number(line, "tokens per GPU (tokens/s/GPU):") or _number(line, "tokens/sec/gpu:")
        records[int(head.group(1))] = {
            "step_time_s": None if elapsed is None else elapsed / 1000,
            "loss": _number(line, "lm loss:"),
            "lr": _number(line, "learning rate:"),
            "grad_norm": _number(line, "grad norm:"),
            "consumed_samples": int(_number(line, "consumed samples:")),
            "global_batch_size": int(_number(line, "global batch size:")),
            "mem_device_used_gib": _number(line, "hip mem usage/free/total/usage_ratio:"),
            "reported.tflops_per_gpu": _number(line, "throughput per GPU (TFLOP/s/GPU):"),
            "reported.tokens_per_s_per_gpu": tokens,
        }
    return records


def _nemo_reference(text: str) -> dict[int, dict]:
    """Each NeMo 2 step line's figures, by iteration (NeMo's 0-based global_step + 1)."""
    records = {}
    for line in text.splitlines():
        if "Training epoch" not in line or "global_step:" not in line:
            continue
        consumed = _number(line, "consumed_samples:")
        records[int(_number(line, "global_step:")) + 1] = {
            "step_time_s": _number(line, "train_step_timing in s:"),
            "loss": _number(line, "reduced_train_loss:"),
            "lr": _number(line, "lr:"),
            "consumed_samples": None if consumed is None else int(consumed),
            "global_batch_size": int(_number(line, "global_batch_size:")),
            "reported.tflops_per_gpu": _number(line, "TFLOPS_per_GPU:"),
        }
    return records


def _titan_reference(text: str) -> dict[int, dict]:
    """Each TorchTitan step line's figures; the step time from the timestamps (ms) of two steps."""
    records, before = {}, None
    for line in text.splitlines():
        found = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*step:\s*(\d+)\s", line)
        if found is None or "tps:" not in line:
            continue
        when = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f")
        step = int(found.group(2))
        gap = None if before is None else (when - before[0]).total_seconds() / (step - before[1])
        before = (when, step)
        records[step] = {
            "step_time_s": gap,
            "loss": _number(line, "loss:"),
            "mem_max_reserved_gib": _number(line, "memory:"),
            "reported.tflops_per_gpu": _number(line, "tflops:"),
            "reported.tokens_per_s_per_gpu": float(re.search(r"tps:\s*([\d,]+)", line).group(1).replace(",", "")),
        }
    return records


REFERENCES = {
    "primus": _megatron_reference,
    "megatron": _megatron_reference,
    "nemo2": _nemo_reference,
    "torchtitan": _titan_reference,
}


def _figure(record, name: str):
    if name.startswith("reported."):
        return record.reported.get(name.removeprefix("reported."))
    return getattr(record, name)


def _same(got, expected) -> bool:
    if got is None or expected is None:
        return got is expected
    return math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("kind", ["primus", "megatron", "nemo2", "torchtitan"])
def test_a_dense_log_reads_as_the_reference_reader_reads_it(registry, tiny_ranges, tmp_path, kind, workers):
    dense = _denselogs()
    path = tmp_path / f"{kind}.log"
    path.write_text("".join(dense.iteration_blocks(kind, ITERATIONS)), encoding="utf-8")
    expected = REFERENCES[kind](path.read_text(encoding="utf-8"))
    assert len(expected) == ITERATIONS

    result = parse_logs([path], registry=registry, backend=dense.BACKENDS[kind], workers=workers).result
    got = {record.iteration: record for record in result.iterations if record.step_time_s is not None}
    if kind == "torchtitan":
        expected = {step: figures for step, figures in expected.items() if figures["step_time_s"] is not None}
    assert sorted(got) == sorted(expected)
    wrong = [
        (iteration, name, _figure(got[iteration], name), value)
        for iteration, figures in expected.items()
        for name, value in figures.items()
        if not _same(_figure(got[iteration], name), value)
    ]
    assert wrong == []
    assert result.run.status == "completed"


def test_every_fixture_form_is_in_the_dense_logs():
    """The dense logs take every iteration-line form the fixtures hold, coloured and plain."""
    dense = _denselogs()
    primus = dense.forms_of("primus")
    assert any("trainer.py" in line and "\x1b" not in line and "[0m" not in line for line in primus)
    assert any("trainer.py" in line and "[0m" in line for line in primus)
    assert any("utils.py" in line and "\x1b" in line for line in primus)
    assert any("utils.py" in line and "\x1b" not in line for line in primus)
    megatron = dense.forms_of("megatron")
    assert any(line.startswith("0: ") for line in megatron) and any("tokens/sec/gpu" in line for line in megatron)
    assert any("TFLOPS_per_GPU" in line for line in dense.forms_of("nemo2"))
