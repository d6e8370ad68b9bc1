"""Fixed-length training samples packed from a prepared dataset, without torch.

:class:`PackedSequences` reads a Megatron indexed dataset (one entry per
document, each ending with the end-of-text token) the way Megatron's GPT
dataset does:

1. **Document order.**  Per epoch ``e`` a generator ``numpy.random.Generator(
   PCG64([seed, e]))`` draws a permutation of the documents; the documents are
   concatenated in that order into one token stream (their EOS tokens keep
   the boundaries visible to the model; no padding, no attention reset).
2. **Cutting.**  The stream of ``T`` tokens gives ``(T - 1) // seq_length``
   samples; sample ``k`` is tokens ``[k·L, k·L + L + 1)`` with ``L =
   seq_length``, so consecutive samples share one token: the last input token
   of one is the first of the next, and each sample carries the ``L`` inputs
   plus the one extra token its labels need (labels are ``sample[1:]``).  The
   stream's tail that does not fill a sample is left out of that epoch.
3. **Sample order.**  The same generator then draws a permutation of the
   samples; item ``j`` of epoch ``e`` is sample ``perm[j]``.

``documents`` restricts all of this to a subset of the documents (the two sides
of a held-out split, :mod:`tprimat.convergence.split`).

Item ``i`` belongs to epoch ``i // samples_per_epoch``; with ``num_samples``
larger than one epoch, later epochs reshuffle documents and samples with their
own generator.  The same ``(data, seq_length, seed)`` gives the same items on
every machine, whatever numpy build.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tprimat.errors import TprimatError

if TYPE_CHECKING:
    import numpy


class PackedSequences:
    """Samples of ``seq_length + 1`` token ids (int64) from ``<path_prefix>.bin``/``.idx``."""

    def __init__(
        self,
        path_prefix: str | Path,
        seq_length: int,
        seed: int,
        *,
        num_samples: int | None = None,
        documents: numpy.ndarray | None = None,
    ) -> None:
        import numpy as np

        from tprimat.data.indexed import IndexedReader

        if seq_length < 1:
            raise ValueError(f"seq_length must be positive, got {seq_length}")
        self.path_prefix = Path(path_prefix)
        self.seq_length = int(seq_length)
        self.seed = int(seed)
        self._reader = IndexedReader(path_prefix)
        self._lengths = self._reader.lengths.astype(np.int64)
        self._starts = self._reader.document_starts()
        if documents is not None:  # a subset of the documents, e.g. one side of a held-out split
            chosen = np.asarray(documents, dtype=np.int64)
            self._lengths, self._starts = self._lengths[chosen], self._starts[chosen]
        total = int(self._lengths.sum()) if documents is not None else self._reader.token_count
        self.samples_per_epoch = (total - 1) // self.seq_length if total > 0 else 0
        if self.samples_per_epoch < 1:
            raise TprimatError(f"{path_prefix}: {total} tokens cannot fill one sample of {seq_length} + 1 tokens")
        if num_samples is not None and num_samples < 0:
            raise ValueError("num_samples must not be negative")
        self._length = self.samples_per_epoch if num_samples is None else int(num_samples)
        self._epochs: dict[int, tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]] = {}

    @property
    def documents(self) -> int:
        return int(self._lengths.size)

    @property
    def tokens(self) -> int:
        return int(self._lengths.sum())

    def __len__(self) -> int:
        return self._length

    def _epoch(self, epoch: int) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        """``(document order, cumulative ends, sample order)`` of ``epoch``; the last two epochs are cached."""
        import numpy as np

        cached = self._epochs.get(epoch)
        if cached is None:
            rng = np.random.Generator(np.random.PCG64([self.seed, epoch]))
            order = rng.permutation(self._lengths.size)
            ends = np.cumsum(self._lengths[order])
            samples = rng.permutation(self.samples_per_epoch)
            cached = (order, ends, samples)
            if len(self._epochs) >= 2:
                self._epochs.pop(next(iter(self._epochs)))
            self._epochs[epoch] = cached
        return cached

    def __getitem__(self, index: int) -> numpy.ndarray:
        import numpy as np

        if not -self._length <= index < self._length:
            raise IndexError(f"sample {index} out of range for {self._length}")
        index = int(index) % self._length
        epoch, item = divmod(index, self.samples_per_epoch)
        order, ends, samples = self._epoch(epoch)
        start = int(samples[item]) * self.seq_length
        need = self.seq_length + 1
        out = np.empty(need, dtype=np.int64)
        position = int(np.searchsorted(ends, start, side="right"))  # first document past start
        offset = start - (int(ends[position - 1]) if position else 0)
        filled = 0
        tokens = self._reader.tokens
        while filled < need:
            document = int(order[position])
            length = int(self._lengths[document])
            take = min(need - filled, length - offset)
            begin = int(self._starts[document]) + offset
            out[filled : filled + take] = tokens[begin : begin + take]
            filled += take
            position += 1
            offset = 0
        return out
