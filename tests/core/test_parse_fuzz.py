"""Damaged logs never crash ``tprimat parse`` and never give a result that looks valid but is not.

Every log fixture is damaged in each of the ways real logs are (cut off, binary junk, NUL
bytes, invalid UTF-8, CRLF line ends, one enormous line, numbers replaced by ``nan``, ``inf``,
``-1``, ``1e308`` or integers no run can have), with a fixed seed so that a failure can be
replayed.  Whatever comes in, the parse ends in a :class:`~tprimat.errors.TprimatError` (one
line, exit code 2) or a result; a ``completed`` result has measured iterations whose step
times are finite, positive and at most a day, and survives a round trip through its JSON.
The default run tries each damage once per fixture; ``-m slow`` tries many seeds.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from pathlib import Path

import pytest

from tests.plugins.logfixtures import LOGS
from tprimat.contract.records import MAX_STEP_TIME_S
from tprimat.contract.registry import Registry
from tprimat.errors import TprimatError
from tprimat.parse.logs import Workload, parse_logs
from tprimat.result.schema import dumps_result, result_from_dict

FIXTURES = sorted(path for path in LOGS.rglob("*") if path.is_file() and path.suffix != ".md")

#: Numbers written in place of a log's numbers: not numbers, not finite, negative, past any float
#: or any count a run can have.
REPLACEMENTS = (
    b"nan",
    b"inf",
    b"-inf",
    b"-1",
    b"0",
    b"1e308",
    b"-1e308",
    b"1e400",
    b"1.9e37",
    b"4294967296",
    b"99999999999999999",
    b"99999999999999999999999999",
)
_NUMBER = re.compile(rb"(?<![A-Za-z_])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")

DAMAGES = ("truncated", "garbage", "nul", "utf8", "crlf", "long_line", "one_number", "some_numbers", "every_number")


def damaged(data: bytes, damage: str, rng: random.Random) -> bytes:
    """``data`` with one ``damage`` done to it, drawn from ``rng``."""
    if damage == "truncated":
        return data[: rng.randrange(len(data) + 1)]
    if damage == "garbage":
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.randbytes(rng.randrange(1, 400)) + data[at:]
    if damage == "nul":
        changed = bytearray(data)
        for _ in range(rng.randrange(1, 30)):
            if changed:
                changed[rng.randrange(len(changed))] = 0
        return bytes(changed)
    if damage == "utf8":
        changed = bytearray(data)
        for _ in range(rng.randrange(1, 30)):
            at = rng.randrange(len(changed) + 1)
            changed[at:at] = rng.choice((b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"))
        return bytes(changed)
    if damage == "crlf":
        return data.replace(b"\n", b"\r\n")
    if damage == "long_line":
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.choice((b"x", b"| 1.0 ", b"iteration ")) * rng.choice((20_000, 300_000)) + data[at:]
    numbers = list(_NUMBER.finditer(data))
    if not numbers:
        return data
    count = {"one_number": 1, "some_numbers": min(len(numbers), 12), "every_number": len(numbers)}[damage]
    chosen = set(rng.sample(range(len(numbers)), count))
    same = rng.choice(REPLACEMENTS) if damage == "every_number" else None
    pieces, last = [], 0
    for index, match in enumerate(numbers):
        if index in chosen:
            pieces += [data[last : match.start()], same or rng.choice(REPLACEMENTS)]
            last = match.end()
    pieces.append(data[last:])
    return b"".join(pieces)


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


def check_parse(registry: Registry, path: Path, rng: random.Random) -> str:
    """Parse ``path``; ``"refused"`` or the result's status.  Anything but a TprimatError fails the test."""
    workload = Workload(model="llama3.1-8b") if rng.random() < 0.5 else None
    try:
        outcome = parse_logs([path], registry=registry, workers=1, allow_mismatch=True, workload=workload)
    except TprimatError as exc:
        assert "\n" not in str(exc).strip()
        return "refused"
    result = outcome.result
    summary = result.summary
    if result.run.status == "completed":
        assert summary is not None and summary.measured_iterations > 0
        step = summary.step_time_s
        assert step is not None
        for value in (step.mean, step.median, step.min, step.max, step.p5, step.p95):
            assert math.isfinite(value) and 0 < value <= MAX_STEP_TIME_S
    for record in result.iterations:  # every record kept is a physical measurement
        assert record.step_time_s is None or 0 < record.step_time_s <= MAX_STEP_TIME_S
        assert record.tokens is None or record.tokens >= 0
    loaded = result_from_dict(json.loads(dumps_result(result)))
    assert loaded.run.status == result.run.status
    return result.run.status


def fuzz(registry: Registry, tmp_path: Path, seeds: range) -> dict[str, int]:
    """Every damage to every fixture, once per seed; how the parses ended, counted."""
    ends: dict[str, int] = {}
    for seed in seeds:
        for number, fixture in enumerate(FIXTURES):
            data = fixture.read_bytes()
            for damage in DAMAGES:
                rng = random.Random(f"{seed}:{fixture.name}:{damage}")
                path = tmp_path / f"{number}-{fixture.name}"
                path.write_bytes(damaged(data, damage, rng))
                try:
                    end = check_parse(registry, path, rng)
                except Exception as exc:
                    raise AssertionError(f"seed {seed}, {fixture.name}, {damage}: {type(exc).__name__}: {exc}") from exc
                ends[end] = ends.get(end, 0) + 1
    return ends


def test_every_fixture_damaged_every_way_parses_or_is_refused(registry, tmp_path):
    ends = fuzz(registry, tmp_path, range(1))
    assert sum(ends.values()) == len(FIXTURES) * len(DAMAGES)
    assert ends.get("completed") and ends.get("refused")  # the damage neither spoils nor spares everything


@pytest.mark.slow
def test_many_seeds(registry, tmp_path):
    # TPRIMAT_FUZZ_SEEDS=N tries more (CI's slow stage keeps the run short)
    seeds = int(os.environ.get("TPRIMAT_FUZZ_SEEDS", "8"))
    ends = fuzz(registry, tmp_path, range(1, seeds + 1))
    assert sum(ends.values()) == seeds * len(FIXTURES) * len(DAMAGES)
