"""Check a prepared ``.bin``/``.idx`` pair and fingerprint it.

:func:`verify_dataset` runs, in order, and raises
:class:`~tprimat.data.indexed.IndexedDatasetError` naming the first failed check:

``idx.exists``/``bin.exists``, ``idx.header`` (magic), ``idx.version``, ``idx.dtype``,
``idx.size`` (file size matches the counts in the header), ``idx.lengths``,
``idx.document_index``, ``idx.pointers`` (each pointer is the sum of the lengths
before it), ``bin.size`` (the data file holds exactly the indexed tokens),
``counts`` (documents and tokens equal what the write step recorded),
``token_range`` (every token id is below the vocabulary size), ``eos``
(every document ends with the end-of-text token) and ``decode`` (a sample
document decodes to text).

The fingerprint is a sha256 over a canonical text that lists the sha256 of the
``.bin``, of the ``.idx`` and of every tokenizer file (by name), the token dtype
and the document and token counts, so two datasets have the same fingerprint
exactly when they hold the same tokens made by the same tokenizer files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tprimat.data.indexed import IndexedDatasetError, IndexedReader, bin_path, idx_path
from tprimat.data.tokenizer import sha256_file

FINGERPRINT_SCHEME = "tprimat-dataset-v1"


def verify_dataset(
    prefix: str | Path,
    *,
    vocab_size: int,
    eos_id: int | None = None,
    documents: int | None = None,
    tokens: int | None = None,
    decode: Callable[[list[int]], object] | None = None,
    block_tokens: int = 1 << 24,
) -> dict[str, Any]:
    """Run every check on ``<prefix>.bin``/``.idx``; returns a summary (and a decoded sample)."""
    import numpy as np

    reader = IndexedReader(prefix)  # structural checks
    binf = bin_path(prefix)
    if documents is not None and reader.document_count != documents:
        raise IndexedDatasetError(
            "counts", idx_path(prefix), f"{reader.document_count} documents, expected {documents}"
        )
    if tokens is not None and reader.token_count != tokens:
        raise IndexedDatasetError("counts", binf, f"{reader.token_count} tokens, expected {tokens}")
    data = reader.tokens
    for start in range(0, reader.token_count, block_tokens):
        block = np.asarray(data[start : start + block_tokens])
        high = int(block.max())
        low = int(block.min())
        if high >= vocab_size or low < 0:
            position = start + int(np.flatnonzero((block >= vocab_size) | (block < 0))[0])
            raise IndexedDatasetError(
                "token_range",
                binf,
                f"token {position} has id {int(data[position])}, outside the vocabulary [0, {vocab_size})",
            )
    if eos_id is not None and reader.sequence_count:
        ends = reader.document_starts() + reader.lengths.astype(np.int64) - 1
        empty = reader.lengths == 0
        if empty.any():
            raise IndexedDatasetError("eos", binf, f"document {int(np.flatnonzero(empty)[0])} is empty")
        wrong = np.flatnonzero(np.asarray(data[ends]) != eos_id)
        if wrong.size:
            raise IndexedDatasetError(
                "eos",
                binf,
                f"document {int(wrong[0])} ends with token {int(data[ends[wrong[0]]])}, "
                f"not the end-of-text token {eos_id}",
            )
    sample = None
    if decode is not None and reader.sequence_count:
        ids = [int(t) for t in reader[0][:64]]
        try:
            sample = decode(ids)
        except Exception as exc:  # noqa: BLE001 - any decoder failure is this check's failure
            raise IndexedDatasetError("decode", binf, f"document 0 does not decode: {exc}") from None
        if not isinstance(sample, str):
            raise IndexedDatasetError("decode", binf, "document 0 does not decode to text")
    return {
        "documents": reader.document_count,
        "tokens": reader.token_count,
        "dtype": reader.dtype,
        "sample": sample,
    }


def fingerprint_inputs(
    prefix: str | Path, tokenizer_hashes: dict[str, str], *, documents: int, tokens: int, dtype: str
) -> dict[str, Any]:
    """What the fingerprint covers (stored in ``dataset.json`` so it can be recomputed)."""
    return {
        "scheme": FINGERPRINT_SCHEME,
        "bin_sha256": sha256_file(bin_path(prefix)),
        "idx_sha256": sha256_file(idx_path(prefix)),
        "tokenizer_sha256": dict(sorted(tokenizer_hashes.items())),
        "dtype": dtype,
        "documents": documents,
        "tokens": tokens,
    }


def fingerprint_of(inputs: dict[str, Any]) -> str:
    """``sha256:<hex>`` over the canonical text of :func:`fingerprint_inputs`."""
    lines = [
        f"scheme={inputs['scheme']}",
        f"bin={inputs['bin_sha256']}",
        f"idx={inputs['idx_sha256']}",
        *(f"tokenizer/{name}={digest}" for name, digest in sorted(inputs["tokenizer_sha256"].items())),
        f"dtype={inputs['dtype']}",
        f"documents={inputs['documents']}",
        f"tokens={inputs['tokens']}",
    ]
    return "sha256:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()
