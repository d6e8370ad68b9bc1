"""Profiler steps from the NVTX ranges of an Nsight Systems SQLite export.

The fixtures are real exports (tests/fixtures/traces/PROVENANCE.md): a CUDA+MPI saxpy whose
program wraps each of its five kernel launches in an NVTX range ``saxpy``, a PyTorch forward
pass under ``emit_nvtx`` (nested operator ranges), and a CloverLeaf run without
``NVTX_EVENTS``.  Every expected step, time and kernel is computed here from the raw tables
with sqlite3, independently of the reader.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tprimat.cli import cli
from tprimat.errors import TprimatError
from tprimat.trace.analyze import analyze_trace
from tprimat.trace.nsys import nvtx_step_pattern, nvtx_steps, read_nsys
from tprimat.trace.reader import PROFILER_STEP, load_trace

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
SAXPY = FIXTURES / "nsys" / "saxpy-mpi-cuda_nsys_perlmutter0.sqlite.gz"
EMIT_NVTX = FIXTURES / "nsys-pytorch" / "dlprof-dummy-network-emit-nvtx_rtx2070.sqlite.gz"
CLOVERLEAF = FIXTURES / "nsys" / "perlmutter-cloverleaf-cuda.sqlite.gz"


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory):
    """The fixtures inflated, opened with sqlite3: name -> connection."""
    out = {}
    for path in (SAXPY, EMIT_NVTX, CLOVERLEAF):
        plain = tmp_path_factory.mktemp("nsys") / path.name.removesuffix(".gz")
        with gzip.open(path) as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        out[path] = sqlite3.connect(plain)
    yield out
    for con in out.values():
        con.close()


def _ranges(con: sqlite3.Connection) -> list[tuple[int, int, str]]:
    """(start ns, end ns, name) of every complete NVTX push/pop or start/end range."""
    return con.execute(
        "SELECT n.start, n.end, coalesce(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL ORDER BY n.start"
    ).fetchall()


def _outermost(ranges: list[tuple[int, int, str]], regex: str) -> list[tuple[int, int, str]]:
    """The matching ranges inside no other matching range (pairwise, the plain definition)."""
    matching = [r for r in ranges if re.search(regex, r[2])]
    return [
        r
        for r in matching
        if not any(o is not r and o[0] <= r[0] and r[1] <= o[1] and o[:2] != r[:2] for o in matching)
    ]


def test_saxpy_ranges_are_steps_with_their_times(raw) -> None:
    expected = [r for r in _ranges(raw[SAXPY]) if r[2] == "saxpy"]
    assert len(expected) == 5
    trace = read_nsys(SAXPY, nvtx_step="^saxpy$")
    assert [s.number for s in trace.steps] == [0, 1, 2, 3, 4]  # no group: numbered in time order
    assert [(s.ts, s.dur) for s in trace.steps] == [(a / 1000.0, (b - a) / 1000.0) for a, b, _ in expected]
    assert trace.steps_note is None and trace.metadata["nvtx_step"] == "^saxpy$"


def test_saxpy_kernels_are_placed_in_the_step_that_launched_them(raw) -> None:
    con = raw[SAXPY]
    steps = [r for r in _ranges(con) if r[2] == "saxpy"]
    launches = con.execute(
        "SELECT k.correlationId, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId AND r.eventClass = 0"
    ).fetchall()
    expected = Counter(k for _, t in launches for k, (a, b, _) in enumerate(steps) if a <= t < b)
    assert expected == Counter({0: 1, 1: 1, 2: 1, 3: 1, 4: 1})  # one saxpy launch inside each range
    result = analyze_trace(read_nsys(SAXPY, nvtx_step="saxpy"), steps=(0, 4))
    assert result["window"] == {"mode": "steps", "steps": [0, 1, 2, 3, 4]}
    assert [(s["step"], s["launches"]["kernels"]) for s in result["steps"]] == [(k, 1) for k in range(5)]
    assert result["launches"]["kernels"] == 5 and result["launches"]["memcpy"] == 0  # copies run outside the ranges
    # the default window, as for a Kineto trace: everything launched before the last step starts
    default = analyze_trace(read_nsys(SAXPY, nvtx_step="saxpy"))
    assert default["window"]["mode"] == "before-last-step" and default["window"]["dropped_last_step"] == 4
    assert default["launches"]["kernels"] == 4


def test_first_group_is_the_step_number_and_only_outermost_matches_count(raw) -> None:
    regex = r"aten::\w+, seq = (\d+)"
    expected = _outermost(_ranges(raw[EMIT_NVTX]), regex)
    trace = read_nsys(EMIT_NVTX, nvtx_step=regex)
    assert [s.number for s in trace.steps] == [int(re.search(regex, name).group(1)) for _, _, name in expected]
    assert [s.number for s in trace.steps] == [0, 3, 6, 7]  # aten::conv2d, conv2d, flatten, linear
    assert [(s.ts, s.dur) for s in trace.steps] == [(a / 1000.0, (b - a) / 1000.0) for a, b, _ in expected]
    all_matching = [r for r in _ranges(raw[EMIT_NVTX]) if re.search(regex, r[2])]
    assert len(all_matching) > len(expected)  # the nested aten::convolution, seq = 0 … are not steps


def test_nested_range_of_the_same_name_is_not_a_step(raw) -> None:
    expected = _outermost(_ranges(raw[EMIT_NVTX]), "traceMarker")
    trace = read_nsys(EMIT_NVTX, nvtx_step="traceMarker")
    assert [(s.ts, s.dur) for s in trace.steps] == [(a / 1000.0, (b - a) / 1000.0) for a, b, _ in expected]
    assert [s.number for s in trace.steps] == list(range(len(expected)))
    markers = [r for r in _ranges(raw[EMIT_NVTX]) if "traceMarker" in r[2]]
    assert len(markers) == len(expected) + 1  # one traceMarker range inside torch.nn.functional.linear's


def test_without_a_match_the_window_is_whole_and_the_ranges_are_named(raw) -> None:
    names = Counter(name for _, _, name in _ranges(raw[SAXPY]))
    trace = read_nsys(SAXPY)  # no ProfilerStep#N range in it
    assert trace.steps == []
    assert trace.metadata["nvtx_ranges"] == dict(names.most_common(10))
    for name, count in names.items():
        assert f"{name!r} ×{count}" in trace.steps_note
    assert "ProfilerStep#N" in trace.steps_note and "--nvtx-step" in trace.steps_note
    result = analyze_trace(trace)
    assert result["window"] == {"mode": "all", "steps": []} and result["steps_note"] == trace.steps_note
    assert "no NVTX range matches 'nothing-like-this'" in read_nsys(SAXPY, nvtx_step="nothing-like-this").steps_note


def test_long_range_names_are_shortened_and_counted_in_the_note(raw) -> None:
    names = Counter(name for _, _, name in _ranges(raw[EMIT_NVTX]))
    note = read_nsys(EMIT_NVTX).steps_note
    assert f"(of {len(names)} names)" in note and note.count(" ×") == 10
    assert max(len(n) for n in names) > 60 and "…" in note


def test_export_without_nvtx_is_read_as_before(raw) -> None:
    tables = {r[0] for r in raw[CLOVERLEAF].execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "NVTX_EVENTS" not in tables
    trace = load_trace(CLOVERLEAF)
    assert trace.steps == [] and trace.steps_note is None and trace.metadata["nvtx_ranges"] == {}
    result = analyze_trace(trace)
    assert result["window"] == {"mode": "all", "steps": []} and result["steps_note"] is None
    assert result["activities"] == result["activities_in_file"]
    asked = load_trace(CLOVERLEAF, nvtx_step="step")
    assert asked.steps == [] and asked.steps_note.startswith("no NVTX ranges in this export")


def test_a_group_that_is_no_number_is_bad_input() -> None:
    with pytest.raises(TprimatError, match=r"first group found 'Send' in the NVTX range 'MPI_Send'"):
        read_nsys(SAXPY, nvtx_step="^MPI_(Send|Recv)$")
    with pytest.raises(TprimatError, match="not a regular expression"):
        nvtx_step_pattern("step(")


_NAMES = st.sampled_from(["ProfilerStep#1", "ProfilerStep#22", "ProfilerStep#x", "forward", "ProfilerStep#3 tail"])


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 30), _NAMES), max_size=12))
def test_steps_are_the_outermost_matching_ranges(raw_ranges: list[tuple[int, int, str]]) -> None:
    ranges = [(start, start + length, name) for start, length, name in raw_ranges]
    steps = nvtx_steps(ranges, PROFILER_STEP)
    matching = sorted((r for r in ranges if PROFILER_STEP.match(r[2])), key=lambda r: (r[0], -r[1]))
    outer = []
    for r in matching:
        if not any(o[0] <= r[0] and r[1] <= o[1] for o in outer):
            outer.append(r)
    assert [(s.ts, s.dur) for s in steps] == [(a / 1000.0, (b - a) / 1000.0) for a, b, _ in outer]
    assert [s.number for s in steps] == [int(PROFILER_STEP.match(n).group(1)) for _, _, n in outer]


def test_nvtx_step_flag_of_analyze() -> None:
    result = CliRunner().invoke(cli, ["trace", "analyze", "--json", "-j", "1", "--nvtx-step", "saxpy", str(SAXPY)])
    assert result.exit_code == 0, result.output
    (rank,) = json.loads(result.output)["ranks"]
    assert rank["window"]["steps"] == [0, 1, 2, 3] and [s["step"] for s in rank["steps"]] == [0, 1, 2, 3]
    text = CliRunner().invoke(cli, ["trace", "analyze", "-j", "1", "--nvtx-step", "saxpy", str(SAXPY)]).output
    assert "steps 0..3" in text and "per profiler step" in text
    plain = CliRunner().invoke(cli, ["trace", "analyze", "-j", "1", str(SAXPY)])
    assert plain.exit_code == 0 and "whole trace" in plain.output
    assert "'MPI_Send' ×10, 'saxpy' ×5" in plain.output.replace("\n", " ")


def test_nvtx_step_flag_of_compare() -> None:
    args = ["trace", "compare", "--json", "-j", "1", str(SAXPY), str(SAXPY)]
    result = CliRunner().invoke(cli, [*args, "--nvtx-step", "^saxpy$"])
    assert result.exit_code == 0, result.output
    side = json.loads(result.output)["a"]
    assert side["steps"] == [0, 1, 2, 3, 4] and side["step_basis"] == "host"
    assert not any("NVTX" in note for note in side["notes"])
    whole = json.loads(CliRunner().invoke(cli, args).output)["a"]
    assert whole["steps"] == [] and any("most frequent NVTX ranges" in note for note in whole["notes"])


@pytest.mark.parametrize(
    ("regex", "message"),
    [("step(", "is not a regular expression"), ("^MPI_(Send)$", "not a step number")],
)
def test_bad_nvtx_step_exits_2_with_one_line(regex: str, message: str) -> None:
    for command in (["trace", "analyze", "-j", "1"], ["trace", "compare", "-j", "1", str(SAXPY)]):
        result = CliRunner().invoke(cli, [*command, "--nvtx-step", regex, str(SAXPY)])
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
