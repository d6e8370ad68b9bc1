"""Benchmark: ``tprimat parse`` on DENSE logs (and the sparse shapes), beside ``grep -c`` and an older version.

A long run logged every iteration is mostly iteration lines; ``bench/denselogs.py`` builds such
logs from every iteration-line form of the fixtures (Primus, Megatron-LM, NeMo 2, TorchTitan).
The sparse shapes of ``bench/logshapes.py`` (a few iteration lines padded by start-up lines) are
kept beside them.  Each round runs, for each input: ``grep -c`` for its iteration lines, then
every ``tprimat`` given (``--old`` and ``--new``, alternating so that the machine's load falls
on both), each with its default ``--jobs`` unless ``--jobs`` is given.  With ``--pure`` the new
one also runs with ``TPRIMAT_PURE_PYTHON=1`` ("new, Python only"): what an install without a C
compiler, which builds no compiled module, gets.

Per input and version: wall s (min / median), MB/s and records/s at the median wall time, CPU s
of the process tree, peak RSS of the process tree (``wait4``), and whether the iterations and
summary the versions wrote are the same (the records value for value, read as the loader reads
either layout; the summary on the figures both write; the rest of a result may differ between
versions: provenance, fields added since).

    python bench/dense_parse.py --old-commit 8cc004e [--new tprimat] [--pure] \\
        [--inputs primus:1024,megatron:256,nemo2:256,torchtitan:256,console:1024,tree:1024] [--rounds 1]

Inputs are built under ``--root`` (default /tmp) and deleted at the end (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import denselogs  # noqa: E402  (bench/ is not a package)
import logshapes  # noqa: E402
from oldversion import old_executable  # noqa: E402

#: What ``grep -c`` counts in each kind of log: its iteration lines.
GREP = {
    "primus": "number of nan iterations",
    "megatron": "number of nan iterations",
    "nemo2": "Training epoch",
    "torchtitan": "tps:",
    "console": "iteration",
    "tree": "iteration",
    "titan-sparse": "tps:",
}
SPARSE = {
    "console": logshapes.build_interleaved,
    "tree": logshapes.build_tree,
    "titan-sparse": logshapes.build_torchtitan,
}


def _files(path: Path) -> list[str]:
    return [str(path)] if path.is_file() else sorted(str(p) for p in path.rglob("*.log"))


def _grep(path: Path, pattern: str) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(
        ["sh", "-c", 'cat "$@" | grep -c -F "$0"', pattern, *_files(path)], capture_output=True, text=True
    )
    return time.perf_counter() - started, int(done.stdout.strip() or 0)


def _compared(output: Path) -> tuple[str, dict[str, Any], int]:
    """The digest of a result file's records, its summary, and its number of records.

    The document is read and brought to this tprimat's schema by the loader's own migrations
    (:func:`tprimat.result.schema.migrate`), so that the records of versions that lay them out
    differently (a list of objects up to schema 4, columns from 5, the framework's figures as
    columns from 6) compare by their values:
    the digest is that of each field's column, as compact JSON, in the record's field order.
    """
    from tprimat.contract.records import ITERATION_FIELDS
    from tprimat.result.schema import migrate

    data = migrate(json.loads(output.read_text(encoding="utf-8")), origin=str(output))
    columns = data.pop("iterations")
    digest = hashlib.sha256()
    for name in ITERATION_FIELDS:
        digest.update(json.dumps(columns.get(name), separators=(",", ":")).encode())
    count = len(columns["iteration"])
    return digest.hexdigest()[:12], data["summary"], count


def compared_apart(output: Path) -> tuple[str, dict[str, Any], int]:
    """:func:`_compared` in a child process: reading a large result grows the process that reads
    it, and every later run, forked from this one, would start (and count its peak) that large."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            with os.fdopen(writer, "wb") as pipe:
                pipe.write(pickle.dumps(_compared(output)))
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    if not data:
        raise SystemExit(f"{output}: could not be read back")
    return pickle.loads(data)  # noqa: S301  (this process's own child wrote it)


def same_results(results: list[tuple[str, dict[str, Any], int]]) -> bool:
    first_digest, first_summary, _ = results[0]
    for digest, summary, _ in results[1:]:
        common = first_summary.keys() & summary.keys()
        if digest != first_digest or any(first_summary[key] != summary[key] for key in common):
            return False
    return True


def _run(
    version: tuple[str, dict[str, str]], backend: str, source: Path, output: Path, jobs: int | None
) -> tuple[float, float, int, Any]:
    """One ``tprimat parse`` (an executable and the environment it adds) in a child: wall s, CPU s,
    peak RSS MiB, what is compared of its result."""
    executable, environment = version
    output.unlink(missing_ok=True)
    command = [executable, "parse", "--backend", backend, str(source), "-o", str(output)]
    if jobs is not None:
        command[2:2] = ["-j", str(jobs)]
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.execvpe(executable, command, {**os.environ, **environment})
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed (status {status})")
    compared = compared_apart(output)
    output.unlink()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024, compared


def _build(name: str, size_mb: int, root: Path) -> tuple[Path, str]:
    """The input ``name`` of about ``size_mb`` MB, and its backend."""
    if name in SPARSE:
        target = root / (name if name == "tree" else f"{name}.log")
        return SPARSE[name](target, size_mb), "amd_primus"
    path, _ = denselogs.build_dense(root / f"dense-{name}.log", name, size_mb)
    return path, denselogs.BACKENDS[name]


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", help="the reference tprimat executable (left out: the new one alone)")
    parser.add_argument("--old-commit", help="the reference: this commit of the repository (see bench/oldversion.py)")
    parser.add_argument("--new", default=shutil.which("tprimat") or "tprimat", help="the tprimat executable measured")
    parser.add_argument(
        "--inputs",
        default="primus:1024,megatron:256,nemo2:256,torchtitan:256,console:1024,tree:1024",
        help=f"comma-separated NAME:MB, NAME of {', '.join([*denselogs.KINDS, *SPARSE])}",
    )
    parser.add_argument("--pure", action="store_true", help="also run the new one with TPRIMAT_PURE_PYTHON=1")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=None, help="tprimat parse --jobs (default: its own default)")
    parser.add_argument("--root", type=Path, default=Path("/tmp/tprimat-dense-parse"))
    parser.add_argument("--keep", action="store_true", help="keep the generated inputs")
    args = parser.parse_args()

    wanted = [item.split(":") for item in args.inputs.split(",") if item]
    unknown = sorted({name for name, *_ in wanted} - set(GREP))
    if unknown:
        parser.error(f"unknown inputs: {', '.join(unknown)}")
    args.root.mkdir(parents=True, exist_ok=True)
    if args.old_commit is not None:
        args.old = str(old_executable(args.old_commit, args.root / "old"))
    versions: dict[str, tuple[str, dict[str, str]]] = {"new": (args.new, {})}
    if args.old is not None:
        versions = {"old": (args.old, {}), **versions}
    if args.pure:
        versions["new, Python only"] = (args.new, {"TPRIMAT_PURE_PYTHON": "1"})
    rows = []
    try:
        for name, size in wanted:
            source, backend = _build(name, int(size), args.root)
            megabytes = _size(source) / 1e6
            greps, runs = [], {version: [] for version in versions}
            for _ in range(args.rounds):
                greps.append(_grep(source, GREP[name]))
                for version, how in versions.items():
                    output = args.root / f"{name}-{version.replace(', ', '-').replace(' ', '-')}.json"
                    runs[version].append(_run(how, backend, source, output, args.jobs))
            records = runs["new"][0][3][2]  # the records of the result
            grep_wall = min(g[0] for g in greps)
            rows.append((name, megabytes, "grep -c", grep_wall, grep_wall, None, None, greps[0][1], "-"))
            alike = same_results([run[3] for measured in runs.values() for run in measured])
            for version, measured in runs.items():
                walls = sorted(run[0] for run in measured)
                same = "-" if len(versions) == 1 else ("yes" if alike else "NO")
                cpu = statistics.median(run[1] for run in measured)
                rss = max(run[2] for run in measured)
                rows.append((name, megabytes, version, walls[0], statistics.median(walls), cpu, rss, records, same))
            print(f"{name} done: {rows[-len(versions) - 1 :]}", file=sys.stderr)
            if not args.keep:
                shutil.rmtree(source) if source.is_dir() else source.unlink()
    finally:
        if not args.keep:
            shutil.rmtree(args.root, ignore_errors=True)

    load = os.getloadavg()
    shown = " ".join(f"{value:.2f}" for value in load)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {shown}")
    header = [
        "input",
        "MB",
        "what",
        "wall s (min / median)",
        "MB/s",
        "records/s",
        "CPU s",
        "peak RSS MiB",
        "records (grep: lines)",
    ]
    print("| " + " | ".join([*header, "same result"]) + " |")
    print("|" + "---|" * (len(header) + 1))
    for name, megabytes, what, best, median, cpu, rss, records, same in rows:
        rate = f"{records / median:,.0f}" if records else "-"
        cells = [
            name,
            f"{megabytes:.0f}",
            what,
            f"{best:.2f} / {median:.2f}",
            f"{megabytes / median:.0f}",
            rate,
            "-" if cpu is None else f"{cpu:.1f}",
            "-" if rss is None else str(rss),
            str(records),
            same,
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
