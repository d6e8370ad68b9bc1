"""Benchmark: the collector's CPU per iteration record, records one by one vs the same records as blocks.

A parser that reads a run of iteration lines at once yields one ``IterationBlock`` for them
(see ``tprimat.contract.records``); the core takes a block whole, as columns.  This times, for
the events a dense ``bench/denselogs.py`` log gives (parsed once, beforehand, not timed):

The parser's own blocks, if it yields any, are taken apart into records and the records grouped
again into blocks of ``--block-records`` (a run of records between other events: a block).

* ``collect``: ``EventCollector(spill_after=SPILL_AFTER_RECORDS)`` taking every event and giving
  its records (the older ones moved to the temporary file, as ``tprimat parse`` collects a long log);
* ``pack + unpack``: the events sent between processes in pieces, as a parallel read sends them.

Each figure is the best of ``--repeat`` runs (the machine may be shared), in µs of CPU per record.

    python bench/collect_blocks.py [--kind primus] [--records 200000] [--block-records 2048] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import denselogs  # noqa: E402  (bench/ is not a package)


def _cpu(function, *arguments) -> float:
    start = time.process_time()
    function(*arguments)
    return time.process_time() - start


def _as_blocks(events: list, size: int) -> list:
    """``events`` with each run of consecutive records as blocks of up to ``size`` records."""
    from tprimat.contract.records import IterationBlock, IterationRecord, iteration_values

    grouped: list = []
    run: list = []

    def close() -> None:
        if run:
            columns = tuple(list(column) for column in zip(*map(iteration_values, run), strict=True))
            grouped.append(IterationBlock(columns=columns))
            run.clear()

    for event in events:
        if type(event) is IterationRecord:
            run.append(event)
            if len(run) == size:
                close()
        else:
            close()
            grouped.append(event)
    close()
    return grouped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="primus", choices=denselogs.KINDS)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--block-records", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from tprimat.contract.logfile import LogFile
    from tprimat.contract.records import IterationBlock, IterationRecord
    from tprimat.contract.registry import Registry
    from tprimat.parse.logs import SPILL_AFTER_RECORDS
    from tprimat.parse.parallel import PIECE_EVENTS, _pieces
    from tprimat.result.collect import EventCollector
    from tprimat.result.packing import pack, unpack

    backend = {"primus": "amd_primus", "megatron": "nvd_megatron", "nemo2": "nvd_nemo", "torchtitan": "amd_primus"}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{args.kind}.log"
        with open(path, "w", encoding="utf-8") as handle:
            handle.writelines(denselogs.iteration_blocks(args.kind, args.records))
        registry = Registry.from_environment()
        events = []  # one record per iteration line (a parser's blocks as their records)
        for event in registry.parse_metrics(backend[args.kind], lines=LogFile(path), source=path.name):
            events.extend(event.records() if isinstance(event, IterationBlock) else [event])
    records = sum(1 for event in events if type(event) is IterationRecord)
    blocks = _as_blocks(events, args.block_records)

    def collect(stream: list) -> None:
        collector = EventCollector(spill_after=SPILL_AFTER_RECORDS)
        collector.consume(stream)
        assert len(collector.records) <= records

    def send(stream: list) -> None:
        for piece in _pieces(stream, PIECE_EVENTS):
            unpack(pack(piece))

    print(f"{args.kind}: {records} records, blocks of up to {args.block_records}; µs of CPU per record")
    print(f"{'stage':<16}{'records':>10}{'blocks':>10}{'ratio':>8}")
    for name, stage in (("collect", collect), ("pack + unpack", send)):
        one = min(_cpu(stage, events) for _ in range(args.repeat)) / records * 1e6
        whole = min(_cpu(stage, blocks) for _ in range(args.repeat)) / records * 1e6
        print(f"{name:<16}{one:>10.2f}{whole:>10.2f}{one / whole:>7.1f}x")


if __name__ == "__main__":
    main()
