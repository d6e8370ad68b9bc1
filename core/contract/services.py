"""tprimat's services a backend's own training program may use, through the contract.

A backend that trains in a program tprimat ships (the ``torch`` backend) reads
prepared data, holds out the validation split and writes MLPerf-style logs with
the same code ``tprimat prepare-data`` and the convergence tools use, so both
sides agree by construction.  This module is the one door to those services:
each name is imported from its home on first use, so importing the contract
stays cheap and the contract's own modules never depend on them.

* :class:`IndexedReader` — a Megatron ``.bin``/``.idx`` pair, without torch
  (:mod:`tprimat.data.indexed`);
* :class:`PackedSequences` — fixed-length training samples packed from it
  (:mod:`tprimat.data.sequences`);
* :func:`training_sequences`, :func:`validation_sequences`,
  :func:`training_sample_count` — the held-out split by document
  (:mod:`tprimat.convergence.split`), and :func:`iteration_budget`, the
  iterations a convergence run may train (:mod:`tprimat.convergence`);
* :class:`MlperfLog`, :func:`mlperf_hyperparameters`, :func:`mlperf_available`,
  :data:`MLPERF_LOG_NAME` — the ``:::MLLOG`` writer (:mod:`tprimat.mlperf.writer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers see them; at run time they load on first use
    from tprimat.convergence import iteration_budget
    from tprimat.convergence.split import training_sample_count, training_sequences, validation_sequences
    from tprimat.data.indexed import IndexedReader
    from tprimat.data.sequences import PackedSequences
    from tprimat.mlperf.writer import LOG_NAME as MLPERF_LOG_NAME
    from tprimat.mlperf.writer import MlperfLog
    from tprimat.mlperf.writer import available as mlperf_available
    from tprimat.mlperf.writer import hyperparameters as mlperf_hyperparameters

__all__ = [
    "IndexedReader",
    "PackedSequences",
    "training_sequences",
    "validation_sequences",
    "training_sample_count",
    "iteration_budget",
    "MlperfLog",
    "mlperf_hyperparameters",
    "mlperf_available",
    "MLPERF_LOG_NAME",
]


def __getattr__(name: str) -> Any:
    if name == "IndexedReader":
        from tprimat.data.indexed import IndexedReader

        return IndexedReader
    if name == "PackedSequences":
        from tprimat.data.sequences import PackedSequences

        return PackedSequences
    if name in {"training_sequences", "validation_sequences", "training_sample_count"}:
        from tprimat.convergence import split

        return getattr(split, name)
    if name == "iteration_budget":
        from tprimat.convergence import iteration_budget

        return iteration_budget
    if name in {"MlperfLog", "mlperf_hyperparameters", "mlperf_available", "MLPERF_LOG_NAME"}:
        from tprimat.mlperf import writer

        return getattr(
            writer,
            {
                "mlperf_hyperparameters": "hyperparameters",
                "mlperf_available": "available",
                "MLPERF_LOG_NAME": "LOG_NAME",
            }.get(name, name),
        )
    raise AttributeError(f"module 'tprimat.contract.services' has no attribute {name!r}")
