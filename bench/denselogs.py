"""Deterministic DENSE training logs for benchmarks: one iteration line per iteration.

A long run logged with ``--log-interval 1`` is mostly iteration lines, unlike the shapes of
``bench/logshapes.py`` (whose few iteration lines are padded by start-up lines).  Each log here is:

* the start-up lines of one real fixture (so the log states its arguments, as a run does);
* then, for iterations 1..N, one iteration line as the printing rank writes it, taking in turn
  every iteration-line form the fixtures in ``tests/fixtures/logs`` hold for that kind (with and
  without terminal colour codes), its iteration number, consumed samples and timestamp made
  consistent and its loss, learning rate, grad norm and step time varied from line to line (a
  real log's values differ: caching a line's text must not flatter the reader);
* after each iteration line, one other line of the same fixtures (timers, library chatter).

Kinds: ``primus`` (legacy ``trainer.py`` and newer ``utils.py`` lines, ANSI and plain, by
``rank-7/8``), ``megatron`` (Megatron-LM lines of 2023 to 2026, a ROCm fork's ``0:`` prefix, a
fork's ``tokens/sec/gpu``), ``nemo2`` (NeMo 2 step lines of every fixture form) and
``torchtitan`` (the step lines of Primus's TorchTitan engine, their timestamps 1.637 s apart).

Nothing here is random: the same kind and size give the same bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs"
KINDS = ("primus", "megatron", "nemo2", "torchtitan")
#: The backend that reads each kind (``tprimat parse --backend``).
BACKENDS = {"primus": "amd_primus", "megatron": "nvd_megatron", "nemo2": "nvd_nemo", "torchtitan": "amd_primus"}
#: The global batch of every iteration line: the one each kind's start-up lines state (or none).
GLOBAL_BATCH = {"primus": 128, "megatron": 80, "nemo2": 128, "torchtitan": 128}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\[[0-9;]*[0-9]m")
_MEGATRON_ITERATION = re.compile(r"(iteration\s+)(\d+)(\s*/\s*)(\d+)")
_NEMO_ITERATION = re.compile(r"(iteration )(\d+)(/)(\d+)")


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines(True)


def _number(text: str, value: float) -> str:
    """``value`` printed as ``text`` prints its number (same exponent form, decimals, width)."""
    if "E" in text or "e" in text:
        mantissa = text.lower().split("e")[0]
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        shown = f"{value:.{decimals}E}"
        return shown.lower() if "e" in text else shown
    decimals = len(text.split(".")[1]) if "." in text else 0
    return f"{value:.{decimals}f}"


def _vary(line: str, key: str, n: int, scale: float, close: str = r"[ |/\n\x1b\[]") -> str:
    """``line`` with the number after ``key`` changed a little for iteration ``n``."""
    pattern = re.compile(re.escape(key) + r"(\s*)([-+0-9.eE]+?)(?=" + close + ")")
    match = pattern.search(line)
    if match is None:
        return line
    old = float(match.group(2))
    factor = 1 + scale * math.sin(n * 0.7 + len(key))
    value = _number(match.group(2), old * factor if old else scale * abs(math.sin(n)))
    return line[: match.start(2)] + value + line[match.end(2) :]


def _set_int(line: str, key: str, value: int) -> str:
    pattern = re.compile(re.escape(key) + r"(\s*)(\d+)")
    match = pattern.search(line)
    if match is None:
        return line
    width = len(match.group(1)) + len(match.group(2))
    shown = str(value)
    pad = max(1 if match.group(1) else 0, width - len(shown))
    return line[: match.start(1)] + " " * pad + shown + line[match.end(2) :]


def _megatron_line(template: str, n: int, total: int, batch: int) -> str:
    """A Megatron-family iteration line from ``template`` for iteration ``n`` of ``total``."""

    def iteration(match: re.Match[str]) -> str:
        number = str(n).rjust(len(match.group(2)))
        return f"{match.group(1)}{number}{match.group(3)}{str(total).rjust(len(match.group(4)))}"

    line = _MEGATRON_ITERATION.sub(iteration, template, count=1)
    line = _set_int(line, "consumed samples:", n * batch)
    line = _set_int(line, "global batch size:", batch)
    line = _vary(line, "elapsed time per iteration (ms):", n, 0.02)
    line = _vary(line, "lm loss:", n, 0.05)
    line = _vary(line, "learning rate:", n, 0.01)
    line = _vary(line, "grad norm:", n, 0.1)
    return re.sub(r"(number of skipped iterations:\s*)[1-9]\d*", r"\g<1>0", line)


def _nemo_line(template: str, n: int, total: int, batch: int) -> str:
    step = n - 1  # NeMo's global_step counts from 0

    def iteration(match: re.Match[str]) -> str:
        return f"{match.group(1)}{step}{match.group(3)}{total - 1}"

    line = _NEMO_ITERATION.sub(iteration, template, count=1)
    line = _set_int(line, "global_step:", step)
    line = _set_int(line, "global_batch_size:", batch)
    if "consumed_samples:" in line:
        line = _set_int(line, "consumed_samples:", n * batch)
    elif n > 1:
        line = line.rstrip("\n") + f" | consumed_samples: {n * batch}\n"
    line = _vary(line, "train_step_timing in s:", n, 0.02)
    line = _vary(line, "reduced_train_loss:", n, 0.05)
    return _vary(line, "lr:", n, 0.01)


def _templates(kind: str) -> tuple[list[str], list[str], list[str]]:
    """The start-up lines, the iteration-line forms and the pool of other lines of ``kind``."""
    if kind == "primus":
        legacy = _lines(
            "primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log"
        )
        p21 = _lines("primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log")
        p57 = _lines(
            "primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log"
        )
        forms = [
            line[line.index("[") :] if not line.startswith("[") else line
            for line in legacy
            if "rank-7/8" in line and "iteration " in line
        ]
        newer = [line for line in p21 + p57 if "utils.py" in line and "] iteration " in line]
        forms += newer + [_ANSI.sub("", line) for line in newer]
        head = p21[: next(i for i, line in enumerate(p21) if "] iteration " in line)]
        others = [line for line in p21 if "rank-" in line]
        return head, _distinct(forms, _MEGATRON_ITERATION), others
    if kind == "megatron":
        sources = [
            "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log",
            "megatron/mlm_2024-04-06_mixtral8x7b_16xH100_issue756_iter71-73_excerpt.log",
            "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log",
            "megatron/mlm_core_r0.8.0_2024-09-03_gpt3-7b_fp16_1node8gpu_skipped-iters_fixstars-mdk-doc_excerpt.log",
            "megatron/cloudai-test_megatron-run_2026-01-16_3iter_snippet.log",
            "megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log",
            "megatron/pai-megatron-patch_2025-10-24_qwen2.5-vl-7b_tokens-sec-gpu_iter493-500_doc_excerpt.log",
            "bridge/mbridge_2025-08-29_llama_recipe_20iter_out1.txt",
        ]
        forms = [
            line
            for name in sources
            for line in _lines(name)
            if _MEGATRON_ITERATION.search(line) and "number of nan iterations" in line
        ]
        main = _lines(sources[2])
        first = next(i for i, line in enumerate(main) if _MEGATRON_ITERATION.search(line))
        others = [line for line in main[first:] if "iteration" not in line and "memory (MB)" not in line]
        return main[:first], _distinct(forms, _MEGATRON_ITERATION), others
    if kind == "nemo2":
        sources = [
            "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log",
            "nemo/nemo2_2024-11_peft_lora_llama3-8b_cell20_finetune.log",
            "nemo/nemo2_2025-08-26_e5-finetune_1gpu_starting-with-1-processes_cell16.log",
            "nemo/nemo2_2025-08_NeMo-AWS-PERF_README_TFLOPS_per_GPU_3iter_doc_excerpt.log",
            "nemo/cloudai-test_nemo-run_12iter_snippet.log",
        ]
        forms = [
            line
            for name in sources
            for line in _lines(name)
            if "Training epoch" in line and "train_step_timing in s:" in line and "val_loss" not in line
        ]
        main = _lines(sources[0])
        first = next(i for i, line in enumerate(main) if "Training epoch" in line)
        others = [line for line in main[first:] if "Training epoch" not in line and "global_step" not in line]
        others = [line for line in others if not re.search(r"SIGTERM|signal|Traceback|Error|rror:", line)]
        return main[:first], _distinct(forms, _NEMO_ITERATION), others
    if kind == "torchtitan":
        lines = _lines("torchtitan/torchtitan_2026-02-24_pr2389_moe-gate-fp32_step4-5_excerpt.log")
        forms = [line for line in lines if "tps:" in line][:1]
        # TorchTitan runs inside Primus: the other lines are Primus's own.
        others = _templates("primus")[2]
        return [], forms, others
    raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")


def _distinct(forms: list[str], iteration: re.Pattern[str]) -> list[str]:
    """One line per form: lines that differ only in their numbers are one form."""
    seen: dict[str, str] = {}
    for line in forms:
        shape = re.sub(r"\d+", "0", iteration.sub("", line))
        seen.setdefault(shape, line)
    return list(seen.values())


def _clean_others(others: list[str]) -> list[str]:
    """Other lines that a reader would not take for an iteration, memory or stop line."""
    dropped = re.compile(
        r"iteration|memory \(MB\)|tps:|Step Time|SIGTERM|signal|Traceback|Killed|exit|stopped|after training|profil",
        re.I,
    )
    kept = [line for line in others if line.strip() and not dropped.search(line)]
    return kept or ["(no other lines)\n"]


def _titan_line(template: str, n: int) -> str:
    stamp = re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", template)
    assert stamp is not None
    when = datetime(2026, 2, 24, 19, 46, 17, 508000) + timedelta(milliseconds=1637 * n)
    line = template.replace(stamp.group(0), when.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3])
    line = re.sub(r"step:\s+\d+ ", f"step: {n} ", line, count=1)
    line = _vary(line, "loss:", n, 0.05)
    return _vary(line, "tflops:", n, 0.01)


def line_maker(kind: str) -> tuple[list[str], Callable[[int, int], str], list[str]]:
    """The start-up lines, ``make(n, total)`` -> the iteration lines of iteration ``n``, and the other lines."""
    head, forms, others = _templates(kind)
    others = _clean_others(others)

    def make(n: int, total: int) -> str:
        form = forms[n % len(forms)]
        if kind == "nemo2":
            line = _nemo_line(form, n, total, GLOBAL_BATCH[kind])
        elif kind == "torchtitan":
            line = _titan_line(form, n)
        else:
            line = _megatron_line(form, n, total, GLOBAL_BATCH[kind])
        return line + others[n % len(others)]

    return head, make, others


def forms_of(kind: str) -> list[str]:
    """The iteration-line forms a dense log of ``kind`` takes in turn."""
    return _templates(kind)[1]


def iteration_blocks(kind: str, iterations: int) -> Iterator[str]:
    head, make, _ = line_maker(kind)
    yield "".join(head)
    block: list[str] = []
    for n in range(1, iterations + 1):
        block.append(make(n, iterations))
        if len(block) == 4096:
            yield "".join(block)
            block = []
    yield "".join(block)


def build_dense(path: Path, kind: str, size_mb: float) -> tuple[Path, int]:
    """A dense ``kind`` log of about ``size_mb`` MB at ``path``; returns it and its iteration count."""
    head, make, _ = line_maker(kind)
    sample = sum(len(make(n, 10**6).encode()) for n in range(1, 1001)) / 1000
    iterations = max(1, int((size_mb * 1e6 - len("".join(head).encode())) / sample))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for text in iteration_blocks(kind, iterations):
            handle.write(text)
    return path, iterations
