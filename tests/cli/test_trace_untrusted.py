"""``tprimat trace analyze`` and ``trace compare`` on hostile and malformed traces.

Each command runs in its own process, as a user runs it, with a time limit (a hang is a
failure, not a stuck test run) and a memory limit.  A broken trace is one line naming the
file and what is wrong, exit code 2; an event whose fields have the wrong type is skipped
and counted in a note; ``--json`` prints valid JSON whatever the trace holds.
"""

from __future__ import annotations

import gzip
import json
import resource
import struct
import subprocess
import sys
from pathlib import Path

import pytest

#: Seconds after which a command counts as hung.
HANG_SECONDS = 60
#: Address space a command may use: the reader's working memory is bounded well below it.
MEMORY_BYTES = 2 * 1024**3
#: A nesting depth far past any decoder's limit (200 KB of brackets).
DEEP = 100_000


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def tprimat(*args: object) -> subprocess.CompletedProcess[str]:
    """Run the tprimat CLI in a process of its own; fail the test if it is still running after HANG_SECONDS."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "tprimat.cli", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=HANG_SECONDS,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"tprimat {' '.join(map(str, args))}: still running after {HANG_SECONDS} s")


def refused(path: Path, *args: object) -> str:
    """The one-line error of ``trace analyze`` on ``path``, checked for shape."""
    done = tprimat("trace", "analyze", path, "-j", "1", *args)
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {path}: "), done.stderr[-2000:]
    return lines[0]


def analysed(path: Path) -> dict:
    """The ``--json`` analysis of ``path``: exit 0 and strict JSON (no NaN or Infinity)."""
    done = tprimat("trace", "analyze", path, "-j", "1", "--json")
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    (rank,) = json.loads(done.stdout, parse_constant=_no_constant)["ranks"]
    return rank


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in --json output")


# -- traces ----------------------------------------------------------------------------------------


def kernels(count: int = 4) -> list[dict]:
    """``count`` GEMM kernels, each with its host launch, inside two profiler steps."""
    events: list[dict] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0.0, "dur": 100.0 * count},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 100.0 * count, "dur": 100.0},
    ]
    for i in range(count):
        events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 100.0 * i, "dur": 1.0,
             "args": {"correlation": i + 1}}
        )  # fmt: skip
        events.append(
            {"ph": "X", "cat": "kernel", "name": "nvjet_tst_64x64", "ts": 100.0 * i + 5, "dur": 50.0,
             "args": {"stream": 7, "correlation": i + 1}}
        )  # fmt: skip
    return events


def encode(events: list[dict]) -> bytes:
    return ",\n".join(json.dumps(e) for e in events).encode()


def write(path: Path, data: bytes, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def members(*parts: tuple[bytes, int]) -> bytes:
    """A gzip file of several members, each ``(text, times)``: ``text`` compressed once and repeated
    (a member's text may stop anywhere; gzip joins the members' texts)."""
    return b"".join(gzip.compress(text, compresslevel=9, mtime=0) * times for text, times in parts)


def stored_gzip(text: bytes, after: bytes) -> bytes:
    """``text`` as stored (uncompressed) deflate blocks, then the raw deflate bytes ``after``."""
    out = bytearray(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
    for i in range(0, len(text), 65535):
        chunk = text[i : i + 65535]
        out += b"\x00" + struct.pack("<HH", len(chunk), len(chunk) ^ 0xFFFF) + chunk
    return bytes(out + after)


DEEP_VALUE = b"[" * DEEP + b"]" * DEEP
GOOD = encode(kernels())
DEEP_PLACES = {
    "the document": DEEP_VALUE,
    "metadata before the events": b'{"distributedInfo": ' + DEEP_VALUE + b', "traceEvents": [' + GOOD + b"]}",
    "an event": b'{"traceEvents": [' + GOOD + b", " + DEEP_VALUE + b"]}",
    "a kernel's args": b'{"traceEvents": [' + GOOD + b', {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, '
    b'"dur": 1, "args": {"stream": 7, "shapes": ' + DEEP_VALUE + b"}}]}",
    "a cpu op's args": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1, '
    b'"args": {"Input Dims": ' + DEEP_VALUE + b"}}, " + GOOD + b"]}",
    "metadata after the events": b'{"traceEvents": [' + GOOD + b'], "deviceProperties": ' + DEEP_VALUE + b"}",
}


# -- finding: hangs on small hostile files ---------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("place", list(DEEP_PLACES))
def test_deep_nesting_is_refused_at_once(tmp_path, place, gz):
    path = write(tmp_path / ("deep.json.gz" if gz else "deep.json"), DEEP_PLACES[place], gz)
    assert path.stat().st_size < 250_000
    line = refused(path)
    assert "refused: nested deeper than the decoder's nesting limit" in line


def test_a_gzip_of_2_gib_of_white_space_is_refused(tmp_path):
    head = b'{"traceEvents": [' + GOOD + b","
    path = tmp_path / "space.json.gz"
    path.write_bytes(members((head, 1), (b" " * (16 << 20), 128), (GOOD + b"]}", 1)))
    assert path.stat().st_size < 3_000_000
    line = refused(path)
    assert "refused" in line and "32 MiB" in line and "without a boundary between two events" in line


def test_a_gzip_holding_a_1_gib_string_is_refused(tmp_path):
    head = b'{"traceEvents": [' + GOOD + b', {"ph": "X", "cat": "kernel", "name": "'
    path = tmp_path / "string.json.gz"
    path.write_bytes(members((head, 1), (b"a" * (16 << 20), 64), (b'", "ts": 1, "dur": 1}]}', 1)))
    assert path.stat().st_size < 1_500_000
    assert "refused" in refused(path) and "32 MiB" in refused(path)


def test_a_gzip_inflating_past_100_times_its_size_is_refused(tmp_path):
    # valid events far apart: the white space between them inflates a thousandfold
    chunk = (json.dumps(kernels(1)[-1]).encode() + b"," + b" " * 65536) * 128
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(members((b'{"traceEvents": [', 1), (chunk, 100), (GOOD + b"]}", 1)))
    assert path.stat().st_size < 2_000_000
    line = refused(path)
    assert "refused after" in line and "100 times its" in line and "the limit for a gzip trace" in line


def test_a_huge_kernel_name_is_read_in_bounded_time(tmp_path):
    # regular expressions and the signature parser over 1 MB names: each name costs a bounded amount
    events = kernels()
    for i, unit in enumerate(("cutlass_1_", "sm1_xmma_", "a<b>", "kernel_")):
        events[3 + 2 * i]["name"] = unit * (1_000_000 // len(unit)) + str(i)
    path = write(tmp_path / "names.json", b'{"traceEvents": [' + encode(events) + b"]}")
    rank = analysed(path)
    assert rank["activities_in_file"] == 4
    assert all(len(k["short_name"]) <= 72 for k in rank["top_kernels"])


def test_many_long_kernels_over_many_steps_compare_in_bounded_time(tmp_path):
    # every kernel spans every profiler step: clipping each to each step is 64 million pieces
    count = 8000
    events = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": 10.0 * n, "dur": 10.0}
        for n in range(count)
    ]
    for i in range(count):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10.0 * i, "dur": 1.0,
                       "args": {"correlation": i + 1}})  # fmt: skip
        events.append({"ph": "X", "cat": "kernel", "name": "nvjet_tst_64x64", "ts": 10.0 * i + 1,
                       "dur": 10.0 * count, "args": {"stream": 7, "correlation": i + 1}})  # fmt: skip
    path = write(tmp_path / "rank0.json", json.dumps({"traceEvents": events}).encode())
    done = tprimat("trace", "compare", path, path, "-j", "1", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout, parse_constant=_no_constant)
    assert data["delta_us"] == 0 and data["a"]["steps"][0] == 0


# -- finding: tracebacks on wrong field types -------------------------------------------------------

WRONG = [
    ("ts", "12", "ts is a string"),
    ("ts", [1], "ts is a list"),
    ("ts", True, "ts is true"),
    ("dur", {"a": 1}, "dur is an object"),
    ("dur", -5, "dur is negative (-5)"),
    ("dur", 1e308, "dur is 1e+308 µs, above the 8.64e+10 µs limit"),
    ("name", 5, "name is a number"),
    ("cat", ["kernel"], "cat is a list"),
    ("args", "x", "args is a string"),
    ("args.stream", 1.5, "args.stream is a number, not an integer"),
    ("args.correlation", 2**70, "args.correlation does not fit in 64 bits"),
]


def _with_one_wrong(field: str, value: object) -> list[dict]:
    events = kernels()
    bad = events[-1]
    if field.startswith("args."):
        bad["args"][field[5:]] = value
    else:
        bad[field] = value
    return events


@pytest.mark.parametrize("field,value,problem", WRONG, ids=[f"{f}-{p}" for f, _, p in WRONG])
def test_a_kernel_with_a_wrong_field_is_skipped_and_counted(tmp_path, field, value, problem):
    path = write(tmp_path / "rank0.json", json.dumps({"traceEvents": _with_one_wrong(field, value)}).encode())
    rank = analysed(path)
    index = len(kernels()) - 1
    assert rank["malformed_events"] == 1
    assert rank["malformed_note"] == f"1 event with malformed fields skipped (first: event #{index}: {problem})"
    assert rank["activities_in_file"] == 3  # the other kernels are analysed


def test_the_note_is_printed_in_the_table_too(tmp_path):
    path = write(tmp_path / "rank0.json", json.dumps({"traceEvents": _with_one_wrong("ts", "12")}).encode())
    done = tprimat("trace", "analyze", path, "-j", "1")
    assert done.returncode == 0, done.stderr
    assert "note: 1 event with malformed fields skipped (first: event #9: ts is a string)" in done.stdout


@pytest.mark.parametrize(
    "bad,problem",
    [
        (b'{"ph": "X", "cat": "user_annotation", "name": 7, "ts": 0, "dur": 10}', "name is a number"),
        (b"5", "not an object but a number"),
        (b'["ProfilerStep#3"]', "not an object but a list"),
        (b'{"ph": "X", "cat": "kernel", "name": "k\xff\xfe", "ts": 1, "dur": 1}', "a string is not valid UTF-8"),
        (b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1e400, "dur": 1}', "a number is beyond the range"),
    ],
)
def test_other_malformed_events_are_skipped_and_counted(tmp_path, bad, problem):
    path = write(tmp_path / "rank0.json", b'{"traceEvents": [' + bad + b",\n" + GOOD + b"]}")
    rank = analysed(path)
    assert rank["malformed_events"] == 1
    assert rank["malformed_note"].startswith(f"1 event with malformed fields skipped (first: event #0: {problem}")


def test_dur_1e308_keeps_json_output_valid(tmp_path):
    events = kernels()
    events[-1]["dur"] = events[-3]["dur"] = 1e308  # their sum would be infinite
    path = write(tmp_path / "rank0.json", json.dumps({"traceEvents": events}).encode())
    rank = analysed(path)
    assert rank["malformed_events"] == 2 and rank["temporal"]["total_us"] < 1e6


def test_a_trace_whose_only_gpu_activity_is_malformed_is_refused(tmp_path):
    events = [e for e in kernels(1) if e["cat"] != "kernel"]
    events.append({"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 5})
    path = write(tmp_path / "rank0.json", json.dumps({"traceEvents": events}).encode())
    line = refused(path)
    assert (
        "no usable GPU activity: all 1 GPU activities have malformed fields (first: event #3: ts is a string)" in line
    )


def test_corrupt_gzip_data_is_one_line(tmp_path):
    invalid_block = b"\x07\x00\x00\x00"  # a final deflate block of the reserved type
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(stored_gzip(b'{"traceEvents": [' + GOOD * 300 + b",", invalid_block))
    assert "corrupt gzip data" in refused(path)
    path.write_bytes(stored_gzip(b"", invalid_block))
    assert "not a readable JSON trace (corrupt gzip data" in refused(path)
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + GOOD + b"]}")[:-6])  # the CRC cut off
    assert "truncated" in refused(path)


def test_table_output_shows_names_with_markup_as_they_are(tmp_path):
    events = kernels()
    events[3]["name"] = "foo[/]"
    events[5]["name"] = "[bold]bar"
    path = write(tmp_path / "rank0.json", json.dumps({"traceEvents": events}).encode())
    done = tprimat("trace", "analyze", path, "-j", "1")
    assert done.returncode == 0, done.stderr
    assert "foo[/]" in done.stdout and "[bold]bar" in done.stdout


def test_hostile_names_and_step_numbers_are_no_traceback(tmp_path):
    events = kernels()
    events[3]["name"] = "void Kernel<" * 3000 + "x" + ">" * 3000 + "(int)"  # launchers nested 3000 deep
    events[5]["name"] = "_Z" + "9" * 5000  # a mangled name whose length has 5000 digits
    events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + "9" * 5000, "ts": 0, "dur": 1})
    path = write(tmp_path / "rank0.json", json.dumps({"traceEvents": events}).encode())
    rank = analysed(path)
    assert rank["activities_in_file"] == 4 and rank["malformed_events"] == 0


def test_compare_carries_the_note(tmp_path):
    good = write(tmp_path / "a.json", json.dumps({"traceEvents": kernels()}).encode())
    bad = write(tmp_path / "b.json", json.dumps({"traceEvents": _with_one_wrong("dur", -1)}).encode())
    done = tprimat("trace", "compare", good, bad, "-j", "1")
    assert done.returncode == 0, done.stderr
    assert "note: b.json: 1 event with malformed fields skipped (first: event #9: dur is negative (-1))" in done.stdout
