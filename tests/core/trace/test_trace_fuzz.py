"""Seeded fuzzing of ``tprimat trace analyze`` / ``trace compare`` over every fixture trace.

Each fixture, and a miniature of it (its metadata and about 1500 of its events), is mutated:
truncated, overwritten with binary garbage, NUL bytes, invalid UTF-8, a field of the wrong
JSON type, deep nesting, gzip and size bombs; and changed in ways that keep it the same
trace (indentation, key order, unknown fields, metadata after the events, gzip or not).
Every case must end in a result or in the one-line error of exit code 2 (never a
traceback, never a hang); a field of the wrong type must be skipped and counted; a
same-trace change must give exactly the analysis of the miniature.

The cases run in a process of their own per fixture (this file, run as a script), under a
time limit and a memory limit, and report one JSON line each.  The default run takes one
seed per fixture; ``-m slow`` runs many more.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import resource
import subprocess
import sys
import traceback
from pathlib import Path

import msgspec
import pytest

FIXTURES = sorted(
    p
    for sub in ("hta", "tracelens")
    for p in (Path(__file__).parents[2] / "fixtures" / "traces" / sub).iterdir()
    if p.name.endswith((".json", ".json.gz"))
)
#: Seconds a fixture's cases may take before they count as hung.
HANG_SECONDS = 60
MEMORY_BYTES = 3 * 1024**3
GPU = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")
LAUNCH = ("cuda_runtime", "cuda_driver")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def run_cases(fixture: Path, out: Path, seeds: range, timeout: float = HANG_SECONDS) -> list[dict]:
    """The outcome of every case of ``fixture`` for ``seeds``, from a process of their own."""
    try:
        done = subprocess.run(
            [sys.executable, __file__, str(fixture), str(out), str(seeds.start), str(seeds.stop)],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired as exc:
        last = (exc.stdout or b"").decode(errors="replace").strip().splitlines()[-1:] if exc.stdout else []
        pytest.fail(f"{fixture.name}: the cases did not finish in {timeout} s (last finished: {last})")
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def check(outcomes: list[dict]) -> None:
    bad = [o for o in outcomes if o["outcome"] not in ("result", "error")]
    assert not bad, json.dumps(bad[:5], indent=1)[:6000]
    assert outcomes and any(o["outcome"] == "result" for o in outcomes)


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name[:40])
def test_fuzz_one_seed(fixture, tmp_path):
    check(run_cases(fixture, tmp_path, range(1)))


@pytest.mark.slow
@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name[:40])
def test_fuzz_many_seeds(fixture, tmp_path):
    # TPRIMAT_FUZZ_SEEDS=N tries more (CI's slow stage keeps the run short)
    seeds = int(os.environ.get("TPRIMAT_FUZZ_SEEDS", "4"))
    check(run_cases(fixture, tmp_path, range(1, seeds + 1), timeout=seeds * HANG_SECONDS))


# -- the cases (run as a script) -------------------------------------------------------------------

WRONG: dict[str, list] = {
    "ph": [5, 1.5, True, [], {"a": 1}],
    "cat": [5, False, ["kernel"], {}],
    "name": [7, 2.5, True, ["k"], {"k": 1}],
    "ts": ["12", [1], {}, True, 1e300, -1e300, 10**400, -(10**30)],
    "dur": ["5", [], {"d": 1}, False, -1, -0.5, 1e308, 1e11, 10**400, -(10**400)],
    "args": ["x", 5, [1], True],
    "args.stream": [1.5, "7", [7], True, 2**64],
    "args.correlation": [2.5, "9", {}, False, -(2**64)],
}
INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"]
ODD_STRINGS = ["}, {", "]", '"}, {"', "\\", "ProfilerStep#", "\u2028", "[bold]x[/]", "é" * 3]


def _mini(document: dict) -> dict:
    """The document with its GPU activity, launches and steps (the first 1200) and 300 other events."""
    events = document["traceEvents"]
    wanted = [
        i
        for i, e in enumerate(events)
        if isinstance(e, dict) and (e.get("cat") in GPU + LAUNCH or str(e.get("name", "")).startswith("ProfilerStep"))
    ][:1200]
    chosen = set(wanted)
    others = [i for i in range(len(events)) if i not in chosen][:300]
    keep = sorted({*wanted, *others})
    return {**document, "traceEvents": [events[i] for i in keep]}


def _kept_activity(event: dict) -> bool:
    return (
        event.get("cat") in GPU
        and event.get("ph", "X") in ("X", None)
        and isinstance(event.get("ts"), (int, float))
        and isinstance(event.get("dur"), (int, float))
    )


def _members(*parts: tuple[bytes, int]) -> bytes:
    return b"".join(gzip.compress(text, compresslevel=9, mtime=0) * times for text, times in parts)


class Cases:
    """The mutations of one fixture for one seed: (name, file bytes, file suffix, expectation)."""

    def __init__(self, fixture: Path, seed: int) -> None:
        self.rng = random.Random(f"{fixture.name}:{seed}")
        self.raw = fixture.read_bytes()
        self.gz = self.raw[:2] == b"\x1f\x8b"
        self.text = gzip.decompress(self.raw) if self.gz else self.raw
        self.mini = _mini(msgspec.json.decode(self.text))
        self.mini_text = json.dumps(self.mini).encode()

    def all(self):
        rng = self.rng
        text = self.text
        # the whole fixture: truncated, and a span of it overwritten
        cut = rng.randrange(1, len(self.raw))
        yield "whole: truncated", self.raw[:cut], ".json.gz" if self.gz else ".json", "any"
        at = rng.randrange(len(text))
        yield "whole: garbage", text[:at] + rng.randbytes(rng.randint(1, 64)) + text[at + 64 :], ".json", "any"
        mini = self.mini_text
        yield "mini: truncated", mini[: rng.randrange(1, len(mini))], ".json", "any"
        yield "mini: truncated gzip", gzip.compress(mini, mtime=0)[: rng.randrange(1, 4000)], ".json.gz", "any"
        at = rng.randrange(len(mini))
        yield "mini: garbage", mini[:at] + rng.randbytes(rng.randint(1, 32)) + mini[at + 32 :], ".json", "any"
        yield "mini: NUL bytes", self._inserted(mini, [b"\x00"] * rng.randint(1, 5)), ".json", "any"
        yield "mini: invalid UTF-8", self._in_strings(mini, rng.choices(INVALID_UTF8, k=3)), ".json", "any"
        yield from self._wrong_types()
        yield from self._deep()
        yield from self._bombs()
        yield from self._same()

    def _inserted(self, text: bytes, pieces: list[bytes]) -> bytes:
        for piece in pieces:
            at = self.rng.randrange(len(text))
            text = text[:at] + piece + text[at:]
        return text

    def _in_strings(self, text: bytes, pieces: list[bytes]) -> bytes:
        starts = [m.end() for m in re.finditer(rb'"name": "', text)] or [len(text) // 2]
        for piece in pieces:
            at = self.rng.choice(starts)
            text = text[:at] + piece + text[at:]
        return text

    def _wrong_types(self):
        rng = self.rng
        events = self.mini["traceEvents"]
        for _ in range(3):
            field = rng.choice(list(WRONG))
            candidates = [
                i
                for i, e in enumerate(events)
                if isinstance(e, dict)
                and (not field.startswith("args.") or (_kept_activity(e) and isinstance(e.get("args"), dict)))
            ]
            index = rng.choice(candidates)
            event = json.loads(json.dumps(events[index]))
            value = rng.choice(WRONG[field])
            if field.startswith("args."):
                event["args"][field[5:]] = value
            else:
                event[field] = value
            document = {**self.mini, "traceEvents": [*events[:index], event, *events[index + 1 :]]}
            yield (
                f"wrong type: event #{index} {field} = {value!r:.40}",
                json.dumps(document).encode(),
                ".json",
                ("malformed"),
            )

    def _deep(self):
        rng = self.rng
        depth = rng.choice([600, 5000, 100_000])
        value = b"[" * depth + b"]" * depth
        head, _, rest = self.mini_text.partition(b'"traceEvents": [')
        places = {
            "an event": head + b'"traceEvents": [' + value + b", " + rest,
            "args": self.mini_text.replace(b'"args": {', b'"args": {"deep": ' + value + b", ", 1),
            "metadata": b'{"deep": ' + value + b", " + self.mini_text[1:],
        }
        for place, text in places.items():
            expect = "deep" if depth > 2000 else "any"
            if rng.random() < 0.5:
                yield f"deep {depth} in {place}", text, ".json", expect
            else:
                yield f"deep {depth} in {place}, gzip", gzip.compress(text, mtime=0), ".json.gz", expect

    def _bombs(self):
        rng = self.rng
        head, _, rest = self.mini_text.partition(b'"traceEvents": [')
        head += b'"traceEvents": ['
        kind = rng.choice(["white space", "string", "repeated events"])
        if kind == "white space":
            data = _members((head, 1), (b" " * (16 << 20), 3), (rest, 1))
        elif kind == "string":
            name = b'{"ph": "X", "cat": "kernel", "name": "'
            data = _members((head + name, 1), (b"x" * (16 << 20), 3), (b'", "ts": 1, "dur": 1}, ' + rest, 1))
        else:
            event = json.dumps(next(e for e in self.mini["traceEvents"] if _kept_activity(e))).encode()
            # valid events far apart: white space inflates a thousandfold, events a hundredfold
            data = _members((head, 1), ((event + b"," + b" " * 65536) * 128, 40), (rest, 1))
        yield f"bomb: {kind}", data, ".json.gz", "refused"

    def _same(self):
        """Changes that keep the trace what it is."""
        rng = self.rng
        document = json.loads(self.mini_text)
        events = document.pop("traceEvents")
        for event in events:
            if isinstance(event, dict) and rng.random() < 0.3:
                event[f"x_{rng.randrange(99)}"] = rng.choice([rng.choice(ODD_STRINGS), [[1, {"a": "}, {"}]], None, 1.5])
            if isinstance(event, dict) and rng.random() < 0.3:
                items = list(event.items())
                rng.shuffle(items)
                event.clear()
                event.update(items)
        keys = list(document)
        split = rng.randrange(len(keys) + 1)
        shuffled = {
            **{k: document[k] for k in keys[:split]},
            "traceEvents": events,
            **{k: document[k] for k in keys[split:]},
        }
        indent = rng.choice([None, 0, 1, 2, "\t"])
        separators = rng.choice([(",", ":"), (", ", ": "), (" ,\n ", " :  ")])
        text = json.dumps(shuffled, indent=indent, separators=separators, ensure_ascii=rng.random() < 0.5)
        data = text.encode()
        if rng.random() < 0.5:
            yield "same: re-encoded", data, ".json", "same"
        else:
            yield "same: re-encoded, gzip", gzip.compress(data, mtime=0), ".json.gz", "same"


def _analyse(runner, cli, path: Path, *extra: str):
    """``tprimat trace analyze PATH -j 1 EXTRA…``, run by click's test runner in this process."""
    return runner.invoke(cli, ["trace", "analyze", str(path), "-j", "1", *extra])


def _outcome(result, path: Path, expect: str, base: dict | None) -> tuple[str, str]:
    """("result" | "error" | "traceback" | "unexpected", detail) of one ``trace analyze --json`` run."""
    if result.exit_code == 2 and result.exception is not None and isinstance(result.exception, SystemExit):
        lines = result.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith(f"Error: {path}: "):
            return "unexpected", f"not one line naming the file: {result.stderr[-500:]!r}"
        line = lines[0]
        if expect == "same" or (expect == "malformed" and "no usable" not in line):
            return "unexpected", f"an error where a result was expected: {line[:300]}"
        if expect == "deep" and "nested deeper" not in line:
            return "unexpected", f"not the nesting limit: {line[:300]}"
        if expect == "refused" and "refused" not in line:
            return "unexpected", f"not a limit: {line[:300]}"
        return "error", line[:300]
    if result.exit_code != 0:
        text = "".join(traceback.format_exception(result.exception)) if result.exception else result.output
        return "traceback", text[-2000:]
    try:
        (rank,) = json.loads(result.stdout, parse_constant=_no_constant)["ranks"]
    except (ValueError, KeyError) as exc:
        return "unexpected", f"--json output is not valid JSON: {exc}"
    if expect == "malformed" and rank["malformed_events"] != 1:
        return (
            "unexpected",
            f"a wrong-typed field was not counted: {rank['malformed_events']}, {rank['malformed_note']}",
        )
    if expect in ("deep", "refused"):
        return "unexpected", "a result where a limit should refuse the trace"
    if expect == "same":
        rank.pop("file")
        if rank != base:
            return "unexpected", "a same-trace change changed the analysis"
    return "result", rank["malformed_note"] or ""


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} in JSON")


def main(argv: list[str]) -> None:
    from click.testing import CliRunner

    from tprimat.cli import cli

    fixture, out, first, stop = Path(argv[0]), Path(argv[1]), int(argv[2]), int(argv[3])
    runner = CliRunner()
    for seed in range(first, stop):
        cases = Cases(fixture, seed)
        base_path = out / f"mini{seed}.json"
        base_path.write_bytes(cases.mini_text)
        base_run = _analyse(runner, cli, base_path, "--json")
        assert base_run.exit_code == 0, base_run.output[-2000:]
        (base,) = json.loads(base_run.stdout)["ranks"]
        base.pop("file")
        assert base["malformed_events"] == 0
        for number, (name, data, suffix, expect) in enumerate(cases.all()):
            path = out / f"case{seed}_{number}{suffix}"
            path.write_bytes(data)
            outcome, detail = _outcome(_analyse(runner, cli, path, "--json"), path, expect, base)
            if outcome in ("result", "error") and number % 4 == 0:  # the tables and compare too
                for args in (
                    ["trace", "analyze", str(path), "-j", "1"],
                    ["trace", "compare", str(base_path), str(path)],
                ):
                    other = runner.invoke(cli, args)
                    if other.exit_code not in (0, 2) or (other.exit_code == 2 and len(other.stderr.splitlines()) != 1):
                        outcome, detail = "traceback", f"{args[1]}: {other.exception!r} {other.output[-1000:]}"
            print(json.dumps({"seed": seed, "case": name, "expect": expect, "outcome": outcome, "detail": detail}))
            sys.stdout.flush()
            path.unlink()


if __name__ == "__main__":
    main(sys.argv[1:])
