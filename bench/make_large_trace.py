"""Make a large Kineto trace by repeating a real one end to end in time (for the trace bench).

Each copy's events are shifted past the previous copy's last event, and its
correlation ids, flow ids, External ids and ProfilerStep numbers are offset so
that the result is one consistent trace of many steps.  Writes plain JSON
(streaming, one event at a time).  Output goes where you say (keep it out of
the repository)::

    python bench/make_large_trace.py tests/fixtures/traces/hta/trace_diff_control_control.json.gz \\
        /tmp/large_trace.json --min-bytes 1100000000
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def load(path: Path) -> dict:
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--min-bytes", type=int, default=1_100_000_000)
    args = parser.parse_args()

    trace = load(args.source)
    events = trace.pop("traceEvents")
    timed = [e for e in events if "ts" in e]
    start = min(float(e["ts"]) for e in timed)
    end = max(float(e["ts"]) + float(e.get("dur", 0) or 0) for e in timed)
    shift_us = (end - start) + 1000.0
    ids = [
        int(e["args"]["correlation"])
        for e in events
        if isinstance(e.get("args"), dict) and isinstance(e["args"].get("correlation"), int)
    ]
    id_offset = (max(ids) if ids else 0) + 1
    steps = [int(m.group(1)) for e in events if (m := STEP.match(str(e.get("name", ""))))]
    step_offset = (max(steps) - min(steps) + 1) if steps else 0

    head = {k: v for k, v in trace.items()}
    written = 0
    copies = 0
    with open(args.output, "w") as out:
        prefix = json.dumps(head)[:-1] + (", " if head else "") + '"traceEvents": [\n'
        out.write(prefix)
        written += len(prefix)
        first = True
        while written < args.min_bytes:
            for event in events:
                e = dict(event)
                if "ts" in e:
                    e["ts"] = float(e["ts"]) + copies * shift_us
                if isinstance(e.get("args"), dict):
                    a = dict(e["args"])
                    for key in ("correlation", "External id"):
                        if isinstance(a.get(key), int) and a[key] > 0:
                            a[key] += copies * id_offset
                    e["args"] = a
                if isinstance(e.get("id"), int):
                    e["id"] += copies * id_offset
                m = STEP.match(str(e.get("name", "")))
                if m:
                    e["name"] = f"ProfilerStep#{int(m.group(1)) + copies * step_offset}"
                line = ("" if first else ",\n") + json.dumps(e)
                first = False
                out.write(line)
                written += len(line)
            copies += 1
        out.write("\n]}\n")
    print(
        f"{args.output}: {written / 1e9:.2f} GB, {copies} copies of {args.source.name}, {copies * len(events)} events"
    )


if __name__ == "__main__":
    main()
