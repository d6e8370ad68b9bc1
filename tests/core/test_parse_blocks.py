"""A parser that yields blocks of iteration records gives the result its records one by one give,
byte for byte, read serially or on several cores, with the records in memory or in a file."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import attrs
import pytest

from tests.core.blocks import blockified
from tests.plugins.logfixtures import LOGS
from tprimat.contract.logfile import LogFile
from tprimat.contract.records import IterationBlock, IterationRecord
from tprimat.contract.registry import Registry
from tprimat.parse import detect, logs
from tprimat.parse import parallel as parse_parallel
from tprimat.parse.errors import ParseError
from tprimat.result import collect, spill
from tprimat.result.resultjson import write_result
from tprimat.result.schema import dumps_result
from tprimat.testing import parse_events

BENCH = Path(__file__).resolve().parents[2] / "bench"
FIXTURE_LOGS = sorted(p for p in LOGS.rglob("*") if p.suffix in (".log", ".txt"))


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


class _Blocking:
    """A registry whose parsers yield their consecutive iteration records as blocks of random sizes."""

    def __init__(self, registry: Registry, seed: int) -> None:
        self._registry = registry
        chance = random.Random(seed)
        self._sizes = [chance.choice([1, 2, 3, 7, 50, 1000]) for _ in range(16)]

    def parse_metrics(self, backend, *, lines, source):
        return blockified(self._registry.parse_metrics(backend, lines=lines, source=source), self._sizes)

    def __getattr__(self, name):
        return getattr(self._registry, name)


class _Expanding(_Blocking):
    """A registry whose parsers yield every block as the records it stands for."""

    def parse_metrics(self, backend, *, lines, source):
        for event in self._registry.parse_metrics(backend, lines=lines, source=source):
            yield from event.records() if isinstance(event, IterationBlock) else [event]


def _written(paths, registry, workers, tmp_path: Path) -> tuple[str, bytes] | str:
    try:
        outcome = logs.parse_logs(paths, registry=registry, workers=workers, allow_mismatch=True)
    except ParseError as exc:
        return f"error: {exc}"
    path = write_result(outcome.result, tmp_path / f"result-{random.random()}.json")
    return dumps_result(outcome.result), path.read_bytes()


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: p.name[:60])
def test_each_fixture_log_read_as_blocks_writes_the_same_result(registry, path, tmp_path, monkeypatch):
    expected = _written([path], registry, 1, tmp_path)
    assert _written([path], _Blocking(registry, seed=len(path.name)), 1, tmp_path) == expected
    monkeypatch.setattr(spill, "BLOCK_RECORDS", 3)
    monkeypatch.setattr(collect, "BLOCK_RECORDS", 3)
    monkeypatch.setattr(collect, "HOT_RECORDS", 4)
    monkeypatch.setattr(logs, "SPILL_AFTER_RECORDS", 8)
    assert _written([path], _Blocking(registry, seed=7), 1, tmp_path) == expected


@pytest.mark.parametrize("kind", ["primus", "megatron"])
def test_a_dense_log_the_parser_reads_as_blocks_writes_what_its_records_write(
    registry, kind, tmp_path, tiny_ranges, monkeypatch
):
    """The parser's own blocks (a dense log's runs of iteration lines), serially and on two workers."""
    spec = importlib.util.spec_from_file_location("denselogs", BENCH / "denselogs.py")
    denselogs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(denselogs)
    path = tmp_path / f"{kind}.log"
    path.write_text("".join(denselogs.iteration_blocks(kind, 3000)), encoding="utf-8")
    monkeypatch.setattr(logs, "SPILL_AFTER_RECORDS", 1000)
    expected = _written([path], _Expanding(registry, seed=0), 1, tmp_path)
    assert _written([path], registry, 1, tmp_path) == expected
    assert _written([path], registry, 2, tmp_path) == expected


@pytest.mark.parametrize(
    "path",
    [p for p in FIXTURE_LOGS if p.parent.name in ("megatron", "primus")][:6],
    ids=lambda p: p.name[:60],
)
def test_fixture_logs_read_as_blocks_on_two_workers_write_the_same_result(
    registry, tiny_ranges, path, tmp_path, monkeypatch
):
    expected = _written([path], registry, 1, tmp_path)
    monkeypatch.setattr(logs, "SPILL_AFTER_RECORDS", 8)
    monkeypatch.setattr(collect, "HOT_RECORDS", 4)
    assert _written([path], _Blocking(registry, seed=3), 2, tmp_path) == expected


def test_the_blocks_of_fixture_logs_collect_as_their_records(registry):
    """Every fixture log's events (as the parser yields them, records expanded), regrouped."""
    for path in FIXTURE_LOGS:
        backend = _backend_of(registry, path)
        if backend is None:
            continue
        events = parse_events(backend, path, registry=registry)
        assert not any(isinstance(e, IterationBlock) for e in events)
        for spill_after in (None, 3):
            by_record = collect.EventCollector(spill_after=spill_after).consume(events)
            by_block = collect.EventCollector(spill_after=spill_after).consume(blockified(events, [5, 1, 64]))
            assert _summary(by_block) == _summary(by_record), path.name


def _backend_of(registry, path):
    try:
        return logs.parse_logs([path], registry=registry, allow_mismatch=True, workers=1).backend
    except ParseError:
        return None


def _summary(collector):
    return (
        [repr(attrs.astuple(r, recurse=False)) for r in collector.records],
        collector.duplicates,
        sorted(collector.replaced),
        collector.notes(),
        collector.issue_count,
    )


def test_parse_events_gives_a_block_as_its_records_unless_asked(registry):
    path = LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
    plain = parse_events("nvd_megatron", path, registry=registry)
    blocking = _Blocking(registry, seed=1)
    expanded = parse_events("nvd_megatron", path, registry=blocking)
    assert [repr(e) for e in expanded] == [repr(e) for e in plain]
    raw = parse_events("nvd_megatron", path, registry=blocking, blocks=True)
    assert any(isinstance(e, IterationBlock) for e in raw)


def test_wrap_probe_counts_a_block_as_its_records(registry):
    path = LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
    lines = list(LogFile(path))
    for sizes in ([1], [2], [3, 1], [1000]):
        blocking = _Blocking(registry, seed=0)
        blocking._sizes = sizes
        assert detect._iterations(lines, blocking, "nvd_megatron", path.name) == detect._iterations(
            lines, registry, "nvd_megatron", path.name
        )


def test_a_range_s_blocks_get_true_line_numbers_and_count_their_iterations():
    firsts = {3: 101}
    marker = parse_parallel._marker(3)
    records = [
        IterationRecord(iteration=i, step_time_s=1.0, source=f"a:b.log:{marker + i}", mem_allocated_gib=1.5)
        for i in range(4)
    ]
    records.append(IterationRecord(iteration=9, mem_allocated_gib=2.0, source=f"a:b.log:{marker + 9}"))
    events = list(blockified(records, [10]))
    assert parse_parallel._iterations(events) == {0, 1, 2, 3}
    parse_parallel._adopt(events, firsts, {})
    assert events[0].column("source") == [f"a:b.log:{101 + i}" for i in (0, 1, 2, 3, 9)]
    mixed = list(blockified([*records[:2], IterationRecord(iteration=5, source="other.log:7")], [10]))
    parse_parallel._adopt(mixed, firsts, {})
    assert mixed[0].column("source") == ["a:b.log:101", "a:b.log:102", "other.log:7"]
