"""The held-out validation split of a prepared dataset, by document.

Documents, not samples, are held out: a sample packed across a document
boundary would otherwise put the same text in training and evaluation.  The
split depends only on the number of documents and the fraction, never on
``benchmark.seed``, so repeats with different seeds and both platforms of a
comparison evaluate on the very same sequences.  The evaluation sequences are
the first ``eval_sequences`` packed samples of the held-out documents (with
a fixed packing seed), the same at every evaluation.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tprimat.errors import TprimatError

if TYPE_CHECKING:
    import numpy

    from tprimat.data.sequences import PackedSequences

#: Seed of the document permutation that picks the held-out documents (fixed on purpose).
SPLIT_SEED = 0x7673706C  # "vspl"
#: Seed of the packing of the held-out documents into evaluation sequences.
EVAL_PACKING_SEED = 0x6576616C  # "eval"


class ValidationSplitError(TprimatError):
    """A dataset too small for the requested held-out split or evaluation size."""


def split_documents(documents: int, fraction: float) -> tuple[numpy.ndarray, numpy.ndarray]:
    """``(train, validation)`` document indices, each sorted; validation holds ``fraction`` of them."""
    import numpy as np

    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be between 0 and 1, got {fraction}")
    held_out = round(documents * fraction)
    if held_out < 1 or held_out >= documents:
        raise ValidationSplitError(
            f"a dataset of {documents} documents cannot hold out {fraction:g} of them for "
            "evaluation: change convergence.validation_fraction or prepare a larger dataset"
        )
    order = np.random.Generator(np.random.PCG64(SPLIT_SEED)).permutation(documents)
    return np.sort(order[held_out:]), np.sort(order[:held_out])


def training_sample_count(path_prefix: str | Path, seq_length: int, fraction: float) -> int:
    """Samples in one epoch of the training side, from the index alone (no token is read)."""
    from tprimat.data.indexed import IndexedReader

    lengths = IndexedReader(path_prefix).lengths
    train, _ = split_documents(lengths.size, fraction)
    return max((int(lengths[train].sum()) - 1) // seq_length, 0)


def training_sequences(path_prefix: str | Path, seq_length: int, seed: int, fraction: float) -> PackedSequences:
    """The training side of the split, packed like the full dataset would be."""
    from tprimat.data.indexed import IndexedReader
    from tprimat.data.sequences import PackedSequences

    train, _ = split_documents(IndexedReader(path_prefix).lengths.size, fraction)
    return PackedSequences(path_prefix, seq_length, seed, documents=train)


def validation_sequences(path_prefix: str | Path, seq_length: int, fraction: float, count: int) -> list[numpy.ndarray]:
    """The fixed evaluation set: ``count`` sequences of ``seq_length + 1`` held-out tokens."""
    from tprimat.data.indexed import IndexedReader
    from tprimat.data.sequences import PackedSequences

    _, held_out = split_documents(IndexedReader(path_prefix).lengths.size, fraction)
    try:
        packed = PackedSequences(path_prefix, seq_length, EVAL_PACKING_SEED, documents=held_out)
    except TprimatError:
        packed = None
    available = len(packed) if packed is not None else 0
    if available < count:
        raise ValidationSplitError(
            f"the held-out {fraction:g} of {path_prefix} fills {available} sequences of "
            f"{seq_length} + 1 tokens, fewer than convergence.eval_sequences = {count}: lower "
            "eval_sequences, raise validation_fraction or prepare a larger dataset"
        )
    return [packed[i] for i in range(count)] if packed is not None else []
