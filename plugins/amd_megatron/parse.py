"""Logs of AMD's ROCm fork of Megatron-LM.

The iteration line is upstream's with one more segment, ``mem usages: X``
(the fraction of device memory in use, kept as a reported figure), and
Slurm's ``srun --label`` puts a task prefix such as ``0: `` in front of every
line.  The fork also prints ``RCCL version``, ``HIP version`` and ``ROCm
version`` lines, which become facts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tprimat.plugins.megatron.logparse import MegatronLogParser
from tprimat.plugins.megatron_core.lines import Event
from tprimat.plugins.megatron_core.stream import iter_events


class RocmMegatronLogParser(MegatronLogParser):
    name = "megatron-lm-rocm"


def parse_rocm_megatron(lines: Iterable[str], source: str) -> Iterator[Event]:
    """Events from a ROCm Megatron-LM log."""
    return iter_events(RocmMegatronLogParser(source), lines)
