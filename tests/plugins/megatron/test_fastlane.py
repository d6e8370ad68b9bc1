"""Runs of iteration lines read at once (by their shape) give exactly what the line reader gives.

The reference is the same parser fed line by line from text (``iter_events`` over ``str`` lines),
which never reads by shape; a file is read from its bytes, where runs of iteration lines come as
``IterationBlock`` events.  Both must give the same events (blocks expanded into their records:
same values, same types, same ``reported`` names in the same order), the same facts, issues and
rank peaks, and leave the parser in the same state: with the compiled readers of log lines and
with the Python ones.
"""

from __future__ import annotations

import importlib.util
import math
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.events import shown
from tests.plugins.logfixtures import LOGS
from tprimat.contract.logfile import LogFile
from tprimat.contract.records import REPEATED_LINE, FigureColumns, IterationBlock, IterationRecord
from tprimat.plugins.amd_megatron.parse import RocmMegatronLogParser
from tprimat.plugins.amd_primus.parse import PrimusLogParser
from tprimat.plugins.megatron import fastlane
from tprimat.plugins.megatron_core.stream import iter_events
from tprimat.plugins.nvd_megatron.parse import MegatronLMLogParser
from tprimat.result.collect import EventCollector

BENCH = Path(__file__).resolve().parents[3] / "bench"
PARSERS = {"primus": PrimusLogParser, "megatron": MegatronLMLogParser}

#: Every test runs with the compiled readers of log lines, then with the Python ones.
pytestmark = pytest.mark.usefixtures("line_readers")


def _denselogs() -> Any:
    spec = importlib.util.spec_from_file_location("denselogs", BENCH / "denselogs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dense(kind: str, iterations: int) -> list[str]:
    return "".join(_denselogs().iteration_blocks(kind, iterations)).splitlines(keepends=True)


def _expanded(events: list[Any]) -> tuple[list[Any], int]:
    """The events with each block as its records, and how many records came in blocks."""
    out: list[Any] = []
    in_blocks = 0
    for event in events:
        if isinstance(event, IterationBlock):
            out.extend(event.records())
            in_blocks += len(event)
        else:
            out.append(event)
    return out, in_blocks


def _compare(parser: Callable[[str], Any], path: Path, chunk_bytes: int = 1 << 20) -> tuple[int, int]:
    """Read ``path`` from its bytes, from its bytes without the fast lane, and as text lines; assert
    the same; returns (records, records in blocks)."""
    by_bytes = parser(path.name)
    events, in_blocks = _expanded(list(iter_events(by_bytes, LogFile(path, chunk_bytes=chunk_bytes))))
    line_by_line = parser(path.name)
    line_by_line.fast_lane = None
    chunked = list(iter_events(line_by_line, LogFile(path, chunk_bytes=chunk_bytes)))
    assert list(map(shown, events)) == list(map(shown, chunked))
    by_lines = parser(path.name)
    with open(path, encoding="utf-8", errors="replace") as handle:
        reference = list(iter_events(by_lines, list(handle)))
    assert by_bytes.state() == by_lines.state() == line_by_line.state()
    if REPEATED_LINE in events:  # a copy recognised by its bytes: the text reader reads it again
        _same_collected(EventCollector().consume(events), EventCollector().consume(reference))
    else:
        assert list(map(shown, events)) == list(map(shown, reference))
    return sum(isinstance(event, IterationRecord) for event in reference), in_blocks


def _same_collected(a: EventCollector, b: EventCollector) -> None:
    assert a.records == b.records
    assert a.duplicates == b.duplicates and a.replaced == b.replaced
    assert {k: f.value for k, f in a.facts.items()} == {k: f.value for k, f in b.facts.items()}
    assert a.issues == b.issues and a.issue_count == b.issue_count


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 1 << 16])
@pytest.mark.parametrize("kind", ["primus", "megatron"])
def test_dense_logs_read_by_shape_as_line_by_line(tmp_path, kind, chunk_bytes):
    path = tmp_path / f"{kind}.log"
    path.write_text("".join(_dense(kind, 3000)), encoding="utf-8")
    records, in_blocks = _compare(PARSERS[kind], path, chunk_bytes)
    assert records >= 3000
    assert in_blocks >= 0.9 * records  # the runs are read by shape, not line by line


@pytest.mark.parametrize("kind", ["primus", "megatron"])
def test_a_run_s_figures_are_kept_by_name(tmp_path, kind):
    path = tmp_path / f"{kind}.log"
    path.write_text("".join(_dense(kind, 600)), encoding="utf-8")
    blocks = [e for e in iter_events(PARSERS[kind](path.name), LogFile(path)) if isinstance(e, IterationBlock)]
    figures = [block.column("reported") for block in blocks]
    assert figures and all(type(column) is FigureColumns for column in figures)
    assert all(list(column.names) == sorted(column.names) for column in figures)


@pytest.mark.parametrize("kind", ["primus", "megatron"])
def test_dense_logs_with_crlf_line_ends_read_by_shape_as_line_by_line(tmp_path, kind):
    path = tmp_path / f"{kind}.log"
    path.write_bytes("".join(_dense(kind, 600)).replace("\n", "\r\n").encode())
    records, in_blocks = _compare(PARSERS[kind], path, 1 << 16)
    assert in_blocks >= 0.8 * records


FIXTURES = [
    *(("primus", path) for path in sorted((LOGS / "primus").iterdir()) + sorted((LOGS / "torchtitan").iterdir())),
    *(("megatron", path) for path in sorted((LOGS / "megatron").iterdir()) + sorted((LOGS / "bridge").iterdir())),
]


@pytest.mark.parametrize(("kind", "path"), FIXTURES, ids=[path.name for _, path in FIXTURES])
def test_fixture_logs_read_from_bytes_as_line_by_line(kind, path):
    _compare(PARSERS[kind], path)
    _compare(PARSERS[kind], path, chunk_bytes=4096)
    if kind == "megatron":
        _compare(RocmMegatronLogParser, path)


def _sub(pattern: str, replacement: str) -> Callable[[str], str]:
    return lambda line: re.sub(pattern, replacement, line, count=1)


def _cut(line: str) -> str:
    """The line broken after a segment's "|": Megatron's wrapped line, continued on the next."""
    middle = line.index("| learning rate")
    return line[: middle + 1] + "\n" + line[middle + 1 :].lstrip()


def _cut_off(line: str) -> str:
    return line[: len(line) // 2] + "\n"


EDITS: dict[str, Callable[[str], str]] = {
    "nan loss": _sub(r"lm loss: \S+", "lm loss: nan"),
    "inf loss": _sub(r"lm loss: \S+", "lm loss: -inf"),
    "non-ASCII digit": _sub(r"grad norm: (\d)", "grad norm: \u0663"),
    "underscore in a value": _sub(r"lm loss: (\d)", r"lm loss: \g<1>_"),
    "missing segment": _sub(r"\| global batch size: *\d+ ", ""),
    "missing average": _sub(r"(elapsed time per iteration \(ms\): [\d.]+)/[\d.]+", r"\g<1>"),
    "wrapped line": _cut,
    "line cut off": _cut_off,
    "iteration backwards": _sub(r"iteration( +)(\d+)/", r"iteration\g<1>1/"),
    "huge step time": _sub(r"elapsed time per iteration \(ms\): [\d.]+", "elapsed time per iteration (ms): 9e12"),
    "zero step time": lambda line: re.sub(  # the same shape: only its digits change
        r"(?<=elapsed time per iteration \(ms\): )[\d.]+", lambda m: re.sub(r"\d", "0", m.group(0)), line, count=1
    ),
    "skipped iterations": _sub(r"number of skipped iterations: +0", "number of skipped iterations:   7"),
    "another rank's copy": lambda line: line + line.replace("rank-7/8", "rank-3/8"),
    "exact copy": lambda line: line + line,
    "unit in a value": _sub(r"grad norm: ([\d.]+)", r"grad norm: \g<1>ms"),
}


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("kind", ["primus", "megatron"])
def test_edited_lines_in_a_run_are_read_as_line_by_line(tmp_path, kind, edit):
    lines = _dense(kind, 900)
    iteration_lines = [i for i, line in enumerate(lines) if re.search(r"iteration +\d+/", line)]
    for index in iteration_lines[300::150]:  # inside runs the lines before were read by shape
        lines[index] = EDITS[edit](lines[index])
    path = tmp_path / "edited.log"
    path.write_text("".join(lines), encoding="utf-8")
    records, in_blocks = _compare(PARSERS[kind], path, chunk_bytes=1 << 16)
    assert in_blocks >= 0.5 * records


#: A value of a new shape (its line read line by line, its shape learned), then values of that
#: shape that the line reader refuses: each must be read line by line again.
OUT_OF_RANGE = {
    "negative skipped count": (r"number of skipped iterations: +0", "-0", "-1"),
    "NaN count too large": (r"number of nan iterations: +0", "1000000000000000", "9999999999999999"),
}


@pytest.mark.parametrize("case", list(OUT_OF_RANGE))
@pytest.mark.parametrize("kind", ["primus", "megatron"])
def test_values_out_of_range_in_a_known_shape_are_read_line_by_line(tmp_path, kind, case):
    pattern, first, then = OUT_OF_RANGE[case]
    label = pattern.split(":")[0]
    lines = _dense(kind, 900)
    iteration_lines = [i for i, line in enumerate(lines) if re.search(r"iteration +\d+/", line)]
    for n, index in enumerate(iteration_lines[300::306]):  # lines of one form: 306 = 18 x 17 forms
        lines[index] = re.sub(pattern, f"{label}: {first if n == 0 else then}", lines[index], count=1)
    path = tmp_path / "edited.log"
    path.write_text("".join(lines), encoding="utf-8")
    _compare(PARSERS[kind], path, chunk_bytes=1 << 16)


def test_interleaved_ranks_read_from_bytes_as_line_by_line(tmp_path):
    spec = importlib.util.spec_from_file_location("logshapes", BENCH / "logshapes.py")
    assert spec is not None and spec.loader is not None
    logshapes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(logshapes)
    path = logshapes.build_interleaved(tmp_path / "console.log", 1)
    _compare(PrimusLogParser, path, chunk_bytes=1 << 16)


def test_memory_reports_around_a_restart_read_as_line_by_line(tmp_path):
    """A restart from a checkpoint reads iterations again: a copy of a memory report for one of them
    is then read again (a record for its iteration came since), as the line reader decides."""
    lines = _dense("megatron", 900)
    numbered = [i for i, line in enumerate(lines) if re.search(r"iteration +\d+/", line)]
    first, again = numbered[400], numbered[600]
    iteration = int(re.search(r"iteration +(\d+)/", lines[first]).group(1))
    report = [
        f"[Rank {rank}] (after {iteration} iterations) memory (MB) | allocated: 1024.5 | max allocated: 2048.0"
        f" | reserved: 3072.0 | max reserved: {4096 + rank}.0\n"
        for rank in (0, 1)
    ]
    restart = lines[numbered[380] : first + 1]
    edited = [*lines[: first + 1], *report, *lines[first + 1 : again], *restart, *report, *lines[again:]]
    path = tmp_path / "restart.log"
    path.write_text("".join(edited), encoding="utf-8")
    _compare(MegatronLMLogParser, path, chunk_bytes=1 << 16)


_NUMBER_TEXTS = st.one_of(
    st.from_regex(r"[0-9]{1,4}(\.[0-9]{1,5})?([eE][-+]?[0-9]{1,3})?", fullmatch=True),
    st.sampled_from(["nan", "inf", "-inf", "-1.5", "+2", "0", "0.0", "1_000", "\u0663.5", "1e999", "", " ", "1.2.3"]),
)


def _same(value: Any, expected: Any) -> bool:
    both_nan = isinstance(value, float) and math.isnan(value) and math.isnan(expected)
    return type(value) is type(expected) and (value == expected or both_nan)


@given(st.lists(st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3})?([eE][-+][0-9]{1,2})?", fullmatch=True), min_size=1))
def test_values_read_per_item_are_those_of_float(texts):
    encoded = tuple(text.encode() for text in texts)
    for reader in (float, int):
        for varying in ([], [True]):
            try:
                expected = [reader(text) for text in encoded]
            except ValueError:
                continue
            assert all(map(_same, fastlane._read(encoded, reader, list(varying)), expected))


_MEGATRON_LINE = (
    " [2026-03-31 14:11:{second:02d}.448457] iteration {iteration:8d}/     900 | consumed samples: {samples:12d} |"
    " elapsed time per iteration (ms): {step} | throughput per GPU (TFLOP/s/GPU): 204.6 |"
    " learning rate: {lr} | global batch size:    80 | lm loss: {loss} | loss scale: 1.0 | grad norm: {grad} |"
    " number of skipped iterations:   {skipped} | number of nan iterations:   {nan} |\n"
)
_PRIMUS_LINE = (
    "[\x1b[32m20260507 13:47:47\x1b[0m][\x1b[36mrank-7/8\x1b[0m][DEBUG] [utils.py:425] :"
    " [2026-05-07 13:47:{second:02d}.940885] iteration {iteration:8d}/    1061 | consumed samples: {samples:12d} |"
    " elapsed time per iteration (ms): {step}/{lr} | throughput per GPU (TFLOP/s/GPU): {grad}/10.1  |"
    " tokens per GPU (tokens/s/GPU): 281.5/{loss} | learning rate: 7.9E-06 | global batch size:   128 |"
    " lm loss: {loss} | loss scale: 1.0 | grad norm: {grad} | number of skipped iterations:   {skipped} |"
    " number of nan iterations:   {nan} | hip mem usage/free/total/usage_ratio: {lr}GB/264.93GB/287.98GB/8.01%  |"
    " rocm mem usage/free/total/usage_ratio: 25.24GB/262.74GB/{grad}GB/8.76% |"
    " rank-2 rocm max mem usage/usage_ratio: {step}GB/8.98%\x1b[0m\n"
)
_COUNTS = st.sampled_from(["0", "1", "7", "9", "-1", "x", "1_0", "99999999999999999999"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["megatron", "primus"]),
    st.lists(st.tuples(_NUMBER_TEXTS, _NUMBER_TEXTS, _NUMBER_TEXTS, _NUMBER_TEXTS, _COUNTS, _COUNTS), max_size=60),
)
def test_generated_values_read_from_bytes_as_line_by_line(kind, values):
    """Any value texts (numbers of any width, NaN and inf spellings, non-ASCII digits, "_", empty,
    counts out of range) in every kind of segment (one number, ``X/Y`` pairs, memory figures with
    units) read by shape as the line reader reads them: lines whose shape repeats go in blocks."""
    template = _MEGATRON_LINE if kind == "megatron" else _PRIMUS_LINE
    lines = ["  global_batch_size ............................... 80\n", "  log_interval .................... 1\n"]
    steady = {"step": "5320.8", "lr": "1.500000E-04", "loss": "1.048310E+01", "grad": "1.5", "skipped": "0"}
    for iteration in range(1, 40):  # lines of one shape first, then the generated ones among them
        lines.append(
            template.format(second=iteration % 60, iteration=iteration, samples=80 * iteration, nan=0, **steady)
        )
    for offset, (step, lr, loss, grad, skipped, nan) in enumerate(values, 40):
        fields = {"step": step or "1.0", "lr": lr, "loss": loss, "grad": grad, "skipped": skipped, "nan": nan}
        lines.append(template.format(second=offset % 60, iteration=offset, samples=80 * offset, **fields))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "generated.log"
        path.write_text("".join(lines), encoding="utf-8")
        records, in_blocks = _compare(PARSERS[kind], path)
        assert in_blocks >= 30  # the steady lines after the first few
