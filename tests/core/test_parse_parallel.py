"""Reading logs on several cores gives the result document a serial read gives, byte for byte.

Files are read in parallel and large files cut into byte ranges; the sizes are
made tiny here so that even the small real fixture logs are cut into many
ranges, and every range after the first starts from a guessed reader state.
"""

from __future__ import annotations

import importlib.util
import tempfile
import threading
from datetime import datetime, timedelta
from pathlib import Path

import attrs
import pytest

from tests.plugins.logfixtures import LOGS
from tprimat.contract.logfile import LogFile
from tprimat.contract.records import REPEATED_LINE, IterationRecord, LineSources, LogFact, ParseIssue, RankPeak
from tprimat.contract.registry import Registry
from tprimat.parse import parallel as parse_parallel
from tprimat.parse.logs import ParseError, parse_logs
from tprimat.result.schema import dumps_result

BENCH = Path(__file__).resolve().parents[2] / "bench" / "logshapes.py"
FIXTURE_LOGS = sorted(p for p in LOGS.rglob("*") if p.suffix in (".log", ".txt"))


def _logshapes():
    spec = importlib.util.spec_from_file_location("logshapes", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


def _document(paths, registry, workers):
    try:
        outcome = parse_logs(paths, registry=registry, workers=workers, allow_mismatch=True)
    except ParseError as exc:
        return f"error: {exc}"
    return dumps_result(outcome.result)


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: p.name[:60])
def test_each_fixture_log_reads_the_same_on_three_workers(registry, tiny_ranges, path):
    serial = _document([path], registry, workers=1)
    assert _document([path], registry, workers=3) == serial


def test_all_fixture_logs_at_once_read_the_same_in_parallel(registry, tiny_ranges):
    primus = sorted((LOGS / "primus").glob("*.log"))
    assert _document(primus, registry, workers=2) == _document(primus, registry, workers=1)


def test_whole_files_read_in_a_pool_keep_their_line_numbers_without_a_look(registry, monkeypatch):
    """No file cut into ranges: no line was numbered from a marker, so none is looked at again."""
    primus = sorted((LOGS / "primus").glob("*.log"))
    serial = _document(primus, registry, workers=1)
    monkeypatch.setattr(parse_parallel, "PARALLEL_MIN_BYTES", 0)
    for name in ("_true_source", "_true_sources"):
        monkeypatch.setattr(parse_parallel, name, lambda *_: pytest.fail("a true line number looked for"))
    assert _document(primus, registry, workers=2) == serial


def test_sources_given_as_line_numbers_get_their_true_numbers():
    """A block's sources as line numbers: shifted at once when all are one range's markers, one
    by one when they are of several ranges (or true already)."""
    first, second = parse_parallel._marker(1), parse_parallel._marker(2)
    firsts = {1: 100, 2: 500}
    one_range = LineSources("a.log:", [first, first + 3])
    parse_parallel._true_sources(one_range, firsts)
    assert list(one_range) == ["a.log:100", "a.log:103"]
    several = LineSources("a.log:", [7, first + 1, second + 2])
    parse_parallel._true_sources(several, firsts)
    assert several.lines == [7, 101, 502]
    texts = ["a.log:7", f"a.log:{first + 1}"]
    parse_parallel._true_sources(texts, firsts)
    assert texts == ["a.log:7", "a.log:101"]


def test_a_parallel_read_ends_its_pool_threads_before_it_returns(registry, tiny_ranges):
    """Writing the result may fork a child, which only a process with no other thread may do."""
    threads = threading.active_count()
    primus = sorted((LOGS / "primus").glob("*.log"))
    names = [path.name for path in primus]
    events = parse_parallel.read_events(registry, "amd_primus", primus, names, [False] * len(primus), workers=2)
    assert sum(type(event) is IterationRecord for batch in events for event in batch) > 20
    assert threading.active_count() == threads  # right after the last batch


def test_the_workers_ranges_wait_on_disk_and_are_gone_once_read(registry, tiny_ranges, tmp_path, monkeypatch):
    """Ranges read ahead wait in files of a spool directory, not in memory; it is removed at the
    end, also when the read stops early."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    primus = sorted((LOGS / "primus").glob("*.log"))
    names = [path.name for path in primus]
    events = parse_parallel.read_events(registry, "amd_primus", primus, names, [False] * len(primus), workers=2)

    def spools():  # (multiprocessing may make a directory of its own here)
        return list(tmp_path.glob("tprimat-events-*"))

    next(events)
    assert len(spools()) == 1
    assert list(events) and not spools()
    stopped = parse_parallel.read_events(registry, "amd_primus", primus, names, [False] * len(primus), workers=2)
    next(stopped)
    stopped.close()
    assert not spools()


def test_interleaved_console_log_and_rank_tree_read_the_same(registry, tiny_ranges, tmp_path, monkeypatch):
    reread = []
    real = parse_parallel._range

    def spy(unit, start, end, first_lineno, state):
        if start:
            reread.append(start)  # in this process: a range read again after a wrong guess
        return real(unit, start, end, first_lineno, state)

    monkeypatch.setattr(parse_parallel, "_range", spy)
    shapes = _logshapes()
    interleaved = shapes.build_interleaved(tmp_path / "console.log", 1)
    tree = shapes.build_tree(tmp_path / "tree", 1)
    for paths in ([interleaved], [tree]):
        serial = _document(paths, registry, workers=1)
        assert "dropped" in serial  # the copies from other ranks were found
        assert _document(paths, registry, workers=2) == serial
    assert reread == []  # every guessed state was right: each range was read once


def test_a_range_far_after_an_evaluation_is_guessed_with_the_triggers_it_turned_on(
    registry, tiny_ranges, tmp_path, monkeypatch
):
    """An evaluation turns on the MLPerf end-line triggers for the rest of a Primus stream.

    The chunks just before a later range do not show it; the state at the end of the worker's
    own earlier range does.  Without it, each later range whose lead chunks show no evaluation
    is read again; with it, only a worker's first ranges can be (how many depends on which
    worker takes which range: none usually, three seen on a loaded machine): fewer than half.
    """
    monkeypatch.setattr(parse_parallel, "RANGE_MAX_BYTES", 32 * 1024)
    path = _logshapes().build_interleaved(tmp_path / "console.log", 1, evaluation_every=10)
    serial = _document([path], registry, workers=1)
    assert serial.count('"eval_loss"') == 4  # the first in the first quarter of the log
    assert path.stat().st_size // parse_parallel.RANGE_MAX_BYTES > 20  # ranges
    reread = _reread_spy(monkeypatch)
    assert _document([path], registry, workers=2) == serial
    with_own_state = len(reread)
    reread.clear()
    monkeypatch.setattr(parse_parallel, "_known_state", lambda unit: None)
    assert _document([path], registry, workers=2) == serial
    assert with_own_state < len(reread) / 2, (with_own_state, len(reread))


def _titan_lines(steps: int) -> list[str]:
    """The fixture's TorchTitan step line for steps 1..``steps``, 1.637 s apart, each printed by two ranks."""
    fixture = LOGS / "torchtitan" / "torchtitan_2026-02-24_pr2389_moe-gate-fp32_step4-5_excerpt.log"
    template = fixture.read_text(encoding="utf-8").splitlines(True)[2]
    lines = []
    for step in range(1, steps + 1):
        stamp = datetime(2026, 2, 24, 19, 46, 17) + timedelta(milliseconds=1637 * step)
        line = template.replace("2026-02-24 19:46:19,145", stamp.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3])
        lines += [line.replace("step:  5 ", f"step: {step} ")] * 2
    return lines


def test_torchtitan_step_lines_cut_into_ranges_keep_their_step_times(registry, tiny_ranges, tmp_path):
    """A TorchTitan step's time is the time since the step before: that step is part of the state."""
    path = tmp_path / "titan.log"
    path.write_text("".join(_titan_lines(300)), encoding="utf-8")
    serial = _read([path], registry, workers=1)
    assert [r.step_time_s for r in serial.iterations[1:]] == [1.637] * 299
    assert path.stat().st_size > 20 * 4096  # many ranges
    assert dumps_result(_read([path], registry, workers=2)) == dumps_result(serial)


def test_a_torchtitan_step_line_ends_the_start_up_lines(registry, tmp_path):
    """As an iteration line does: a worker's guess of a later range then reads the chunks up to
    the first step, not the first 64 MiB of the file (the start-up bytes)."""
    path = tmp_path / "titan.log"
    path.write_text("".join(_titan_lines(3)), encoding="utf-8")
    lines = LogFile(path)
    list(registry.parse_metrics("amd_primus", lines=lines, source="titan.log"))
    assert lines.started and lines.final_state[0]  # the parser's own "started"


def test_a_rotated_torchtitan_log_keeps_the_step_time_across_the_rotation(registry, tiny_ranges, tmp_path):
    lines = _titan_lines(300)
    rank = tmp_path / "logs" / "pre_trainer" / "rank-0"
    rank.mkdir(parents=True)
    (rank / "debug.log.1").write_text("".join(lines[:301]), encoding="utf-8")  # ends inside step 151
    (rank / "debug.log").write_text("".join(lines[301:]), encoding="utf-8")
    serial = _read([tmp_path / "logs"], registry, workers=1)
    assert [r.step_time_s for r in serial.iterations[1:]] == [1.637] * 299
    assert dumps_result(_read([tmp_path / "logs"], registry, workers=2)) == dumps_result(serial)


def test_a_wrong_guess_of_the_reader_state_is_read_again(registry, tiny_ranges, monkeypatch):
    """The guessed state is only a shortcut: a wrong one is caught and the range re-read."""
    real = parse_parallel._read_later_range

    def wrong_guess(unit):
        read = real(unit)
        return parse_parallel._Read(
            events=[REPEATED_LINE], final_state=read.final_state, assumed_state=("not", "the", "state")
        )

    monkeypatch.setattr(parse_parallel, "_read_later_range", wrong_guess)
    path = LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
    assert _document([path], registry, workers=2) == _document([path], registry, workers=1)


def test_an_unreadable_file_is_named(registry, tiny_ranges, tmp_path):
    path = LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
    gone = tmp_path / "gone.log"
    gone.write_bytes(path.read_bytes())
    outcome = parse_logs([path, gone], registry=registry, workers=2, allow_mismatch=True)
    assert outcome.result.iterations
    gone.chmod(0)
    try:
        if gone.open("rb"):  # running as root: permissions do not stop reading
            pytest.skip("permissions are not enforced for this user")
    except OSError:
        pass
    with pytest.raises(ParseError, match="gone.log: cannot read"):
        parse_logs([path, gone], registry=registry, workers=2, allow_mismatch=True)


def test_ranges_of_a_reader_that_does_not_count_its_lines_are_counted_for_it(registry, tiny_ranges, monkeypatch):
    """The true line numbers of later ranges come from each reader's count, or else from counting."""
    monkeypatch.setattr(LogFile, "line_count", property(lambda self: None, lambda self, value: None), raising=False)
    path = LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
    serial = _document([path], registry, workers=1)
    assert '"source": "mlm_2023-07-16' in serial
    assert _document([path], registry, workers=3) == serial


def test_an_iteration_line_continued_across_a_range_boundary_keeps_its_line_number(registry, monkeypatch):
    """Ranges of one line each: a wrapped iteration line is held from one range into the next."""
    monkeypatch.setattr(parse_parallel, "LEAD_BYTES", 64)
    monkeypatch.setattr(parse_parallel, "CHUNK_BYTES", 64)
    monkeypatch.setattr(parse_parallel, "SPLIT_MIN_BYTES", 256)
    monkeypatch.setattr(parse_parallel, "RANGE_MAX_BYTES", 64)
    monkeypatch.setattr(parse_parallel, "PARALLEL_MIN_BYTES", 0)
    path = next(LOGS.rglob("cloudai-test_megatron-bridge_2025-12-22_step-time-line_snippet.log"))
    serial = _document([path], registry, workers=1)
    assert '"source": ["cloudai-test_megatron-bridge_2025-12-22_step-time-line_snippet.log:' in serial
    assert _document([path], registry, workers=2) == serial


def test_figures_repeated_from_record_to_record_are_not_an_object_per_record_after_a_parallel_read(
    registry, tiny_ranges, tmp_path, monkeypatch
):
    """Pickling copies every float: records cross between processes as marshalled rows, which keep
    the objects the reader shares shared, and the first record of each batch shares the figures
    of the record before."""
    spec = importlib.util.spec_from_file_location("denselogs", BENCH.parent / "denselogs.py")
    denselogs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(denselogs)
    path = tmp_path / "dense.log"
    path.write_text("".join(denselogs.iteration_blocks("primus", 400)), encoding="utf-8")
    monkeypatch.setattr(parse_parallel, "PIECE_EVENTS", 4096)  # a range's records in one batch
    records = parse_logs([path], registry=registry, backend="amd_primus", workers=2).result.iterations
    for field in ("mem_device_total_gib", "mem_device_used_gib"):
        values = [getattr(record, field) for record in records]
        assert len(values) == 400 and len(set(values)) <= 5
        assert len({id(value) for value in values}) <= 40  # a few per range (4 here), not one per record


MEGATRON_100 = LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"


def _rotated(tmp_path: Path, cuts: tuple[int, ...]) -> Path:
    """The Megatron-LM log (--log-interval 100) as one Primus rank's debug.log, rotated at ``cuts`` (line numbers)."""
    lines = MEGATRON_100.read_text(encoding="utf-8").splitlines(True)
    rank = tmp_path / "logs" / "pre_trainer" / "rank-0"
    rank.mkdir(parents=True)
    bounds = (0, *cuts, len(lines))
    names = [f"debug.log.{n}" for n in range(len(cuts), 0, -1)] + ["debug.log"]  # oldest first
    for name, start, end in zip(names, bounds[:-1], bounds[1:], strict=True):
        (rank / name).write_text("".join(lines[start:end]), encoding="utf-8")
    return tmp_path / "logs"


def _read(paths, registry, workers):
    return parse_logs(paths, registry=registry, backend="amd_primus", workers=workers, allow_mismatch=True).result


def test_a_rotated_log_reads_as_one_stream(registry, tiny_ranges, tmp_path):
    """Each rotated file goes on from the reader's state at the end of the one before.

    Read on its own, the file after a rotation would start without the log interval (stated at
    the top of the first file): its first iteration would cover one iteration, not 100, and
    the 99 before it would be reported missing.
    """
    whole = tmp_path / "whole" / "logs" / "pre_trainer" / "rank-0"
    whole.mkdir(parents=True)
    (whole / "debug.log").write_bytes(MEGATRON_100.read_bytes())
    one_file = _read([whole.parent.parent], registry, workers=1)
    rotated = _rotated(tmp_path / "rotated", (379, 395))
    serial = _read([rotated], registry, workers=1)
    assert dumps_result(_read([rotated], registry, workers=2)) == dumps_result(serial)

    def body(record):
        return attrs.evolve(record, source=None)

    assert [body(r) for r in serial.iterations] == [body(r) for r in one_file.iterations]
    assert [r.covers_iterations for r in serial.iterations][:8] == [100] * 8
    assert not [note for note in serial.provenance.notes if "missing" in note]
    assert serial.run.status == one_file.run.status == "completed"
    sources = [r.source for r in serial.iterations]
    assert sources[5] == "debug.log.1:2"  # lines keep the numbers of their own file


def _reread_spy(monkeypatch) -> list[str]:
    """The files read again in this process (the workers' reads are not seen here)."""
    reread: list[str] = []
    real = parse_parallel._range

    def spy(unit, start, end, first_lineno, state):
        reread.append(unit.path.name)
        return real(unit, start, end, first_lineno, state)

    monkeypatch.setattr(parse_parallel, "_range", spy)
    return reread


def test_the_tail_before_a_rotation_is_read_until_it_shows_two_iterations(registry, tiny_ranges, tmp_path, monkeypatch):
    """From the last line on, more each time: the guess holds the last iteration and its interval."""
    # The first file ends in a blank line (its last line holds no iteration); no evaluation comes
    # before the last file (an evaluation adds triggers the tail would not show).
    rotated = _rotated(tmp_path, (380, 384))
    serial = dumps_result(_read([rotated], registry, workers=1))
    monkeypatch.setattr(parse_parallel, "TAIL_BYTES", 1)
    reread = _reread_spy(monkeypatch)
    assert dumps_result(_read([rotated], registry, workers=2)) == serial
    assert reread == []  # every guess was right


def test_a_wrong_guess_at_a_rotation_is_read_again(registry, tiny_ranges, tmp_path, monkeypatch):
    rotated = _rotated(tmp_path, (379, 395))
    serial = dumps_result(_read([rotated], registry, workers=1))
    real = parse_parallel._read_later_range

    def wrong_guess(unit):
        read = real(unit)
        if unit.previous is None:
            return read
        return parse_parallel._Read(events=[], final_state=read.final_state, assumed_state=("not", "the", "state"))

    monkeypatch.setattr(parse_parallel, "_read_later_range", wrong_guess)
    reread = _reread_spy(monkeypatch)
    assert dumps_result(_read([rotated], registry, workers=2)) == serial
    assert reread == ["debug.log.1", "debug.log"]


def test_what_every_rank_states_is_noted_once(registry, tmp_path):
    """Each rank's log states the same profiler window; the result says it once, read from the ranks' first files."""
    tree = _logshapes().build_tree(tmp_path / "tree", 1)
    notes = parse_logs([tree], registry=registry, workers=1).result.provenance.notes
    assert len([note for note in notes if "profiler window" in note]) == 1
    assert len(notes) == len(set(notes))


def test_a_range_s_events_are_packed_in_pieces_and_unpacked_as_they_were(monkeypatch, tmp_path):
    record = IterationRecord(
        iteration=7, step_time_s=1.5, loss=float("nan"), source="a.log:9", reported={"tflops": 300.5, "x": None}
    )
    events = [
        LogFact(key="seq_length", value=8192, source="a.log:1"),
        record,
        REPEATED_LINE,
        RankPeak(rank=3, device_used_gib=22.7),
        ParseIssue(source="a.log:12", message="skipped"),
    ]
    monkeypatch.setattr(parse_parallel, "PIECE_EVENTS", 2)
    monkeypatch.setitem(parse_parallel._CONTEXT, "spool", str(tmp_path))
    packed = parse_parallel._pack(events)
    assert len(packed.lengths) == 3 and Path(packed.path).parent == tmp_path
    assert Path(packed.path).stat().st_size == sum(packed.lengths)
    pieces = parse_parallel._unpacked(packed)
    back = next(pieces)
    assert not Path(packed.path).exists()  # deleted once opened: nothing is left behind
    back += [event for piece in pieces for event in piece]
    assert back[2] is REPEATED_LINE  # the collector counts copies by identity
    assert type(back[1]) is IterationRecord
    assert _as_text(back) == _as_text(events)  # every field of every event, the NaN loss too


def _as_text(events):
    """The events as comparable text (a NaN loss does not equal itself)."""
    return [repr(event) for event in events]


def test_one_file_too_small_to_cut_is_read_without_a_pool(registry, monkeypatch):
    """A pool for one unit only packs its events across processes: the file is read here."""
    monkeypatch.setattr(parse_parallel, "PARALLEL_MIN_BYTES", 0)
    pools = []
    monkeypatch.setattr(parse_parallel, "fork_pool", lambda *a, **k: pools.append(1))
    assert "iterations" in _document([MEGATRON_100], registry, workers=2)
    assert pools == []
