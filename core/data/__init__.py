"""Data preparation: real corpora to Megatron indexed datasets, fingerprinted.

``tprimat prepare-data`` runs :func:`tprimat.data.pipeline.prepare` (fetch,
clean, tokenize, write, verify, fingerprint).  Other parts of tprimat read
what it made through :func:`load_prepared` (the ``dataset.json`` of a prepared
dataset) and :class:`tprimat.data.sequences.PackedSequences` (fixed-length
training samples, no torch needed).  Importing this package is cheap: numpy and
the tokenizer libraries are imported only by the functions that use them.
"""

from __future__ import annotations

from tprimat.data.prepared import (
    PreparedDatasetError,
    check_model_compatibility,
    check_prepared,
    load_prepared,
)

__all__ = [
    "PreparedDatasetError",
    "check_model_compatibility",
    "check_prepared",
    "load_prepared",
]
