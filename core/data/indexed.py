"""The Megatron indexed dataset format (``<prefix>.bin`` + ``<prefix>.idx``), in numpy.

This is the format Megatron-LM's ``tools/preprocess_data.py`` writes and that
Megatron-Core, Primus and NeMo read (``IndexedDataset``).  tprimat writes and
reads it with numpy alone so that preparing and inspecting data needs neither
torch nor Megatron; a test reads tprimat's files back with Megatron-Core's own
reader to prove they are identical to what it expects.

``.bin`` is every token of every sequence, back to back, in one integer dtype.
``.idx`` is, little-endian:

========================  =========================================================
``MMIDIDX\\x00\\x00``      9 bytes, magic
version                   uint64, always 1
dtype code                uint8 (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
                          6 float64, 7 float32, 8 uint16)
sequence count ``S``      uint64
document count ``D``      uint64 (entries in the document index, i.e. documents + 1)
sequence lengths          int32 × S, tokens per sequence
sequence pointers         int64 × S, byte offset of each sequence in ``.bin``
document index            int64 × D, sequence index where each document starts,
                          starting at 0 and ending at S
========================  =========================================================

tprimat writes one sequence per document (as ``preprocess_data.py`` does
without ``--split-sentences``), so the document index is ``0, 1, ..., S``.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from tprimat.errors import TprimatError

if TYPE_CHECKING:
    from types import TracebackType

    import numpy
    import numpy.typing

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER_SIZE = len(MAGIC) + 8 + 1 + 8 + 8  # magic, version, dtype code, two counts

#: dtype code -> numpy dtype name (Megatron-Core's ``DType`` numbering).
DTYPE_CODES: dict[int, str] = {
    1: "uint8",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "float64",
    7: "float32",
    8: "uint16",
}
CODE_OF_DTYPE: dict[str, int] = {name: code for code, name in DTYPE_CODES.items()}

#: Megatron picks uint16 below this vocabulary size and int32 from it on.
UINT16_VOCAB_LIMIT = 65500


class IndexedDatasetError(TprimatError):
    """A ``.bin``/``.idx`` pair that fails a named consistency check."""

    def __init__(self, check: str, path: str | Path, detail: str) -> None:
        self.check = check
        self.path = Path(path)
        self.detail = detail
        super().__init__(f"{self.path}: check {check!r} failed: {detail}")


def token_dtype_for_vocab(vocab_size: int) -> str:
    """The token dtype for a vocabulary (uint16 below 65500 tokens, else int32), as Megatron."""
    if vocab_size <= 0:
        raise ValueError(f"vocabulary size must be positive, got {vocab_size}")
    return "uint16" if vocab_size < UINT16_VOCAB_LIMIT else "int32"


def bin_path(prefix: str | Path) -> Path:
    return Path(f"{prefix}.bin")


def idx_path(prefix: str | Path) -> Path:
    return Path(f"{prefix}.idx")


def encode_index(lengths: numpy.ndarray, dtype: str) -> bytes:
    """The ``.idx`` bytes for sequences of ``lengths`` tokens of ``dtype``, one per document."""
    import numpy as np

    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and (lengths.min() < 0 or lengths.max() > np.iinfo(np.int32).max):
        raise ValueError("sequence lengths must fit in int32")
    count = int(lengths.size)
    itemsize = np.dtype(dtype).itemsize
    pointers = np.zeros(count, dtype=np.int64)
    if count > 1:
        np.cumsum(lengths[:-1] * itemsize, out=pointers[1:])
    document_index = np.arange(count + 1, dtype=np.int64)
    return b"".join(
        (
            MAGIC,
            struct.pack("<Q", VERSION),
            struct.pack("<B", CODE_OF_DTYPE[dtype]),
            struct.pack("<Q", count),
            struct.pack("<Q", count + 1),
            lengths.astype("<i4").tobytes(),
            pointers.astype("<i8").tobytes(),
            document_index.astype("<i8").tobytes(),
        )
    )


class IndexedWriter:
    """Append documents to ``<prefix>.bin``, then write ``<prefix>.idx`` on :meth:`finalize`.

    Both files are written under temporary names and renamed only when the
    index is complete, so an interrupted write never leaves a pair that looks
    valid.
    """

    def __init__(self, prefix: str | Path, dtype: str) -> None:
        import numpy as np

        if dtype not in CODE_OF_DTYPE:
            raise ValueError(f"unsupported token dtype {dtype!r}")
        self.prefix = Path(prefix)
        self.dtype = dtype
        self._np_dtype = np.dtype(dtype).newbyteorder("<")
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        self._bin_tmp = Path(f"{self.prefix}.bin.partial")
        self._idx_tmp = Path(f"{self.prefix}.idx.partial")
        self._bin: BinaryIO | None = open(self._bin_tmp, "wb")  # noqa: SIM115
        self._lengths: list[numpy.ndarray] = []
        self.documents = 0
        self.tokens = 0

    def add_documents(self, tokens: numpy.ndarray, lengths: numpy.ndarray) -> None:
        """Append documents given as one flat token array and the length of each document."""
        import numpy as np

        if self._bin is None:
            raise RuntimeError("writer is already finalized")
        lengths = np.asarray(lengths, dtype=np.int64)
        if int(lengths.sum()) != len(tokens):
            raise ValueError(f"lengths add up to {int(lengths.sum())}, tokens are {len(tokens)}")
        self._bin.write(np.asarray(tokens).astype(self._np_dtype, copy=False).tobytes())
        self._lengths.append(lengths)
        self.documents += int(lengths.size)
        self.tokens += int(lengths.sum())

    def add_document(self, tokens: numpy.typing.ArrayLike) -> None:
        import numpy as np

        array = np.asarray(tokens)
        self.add_documents(array, np.array([array.size]))

    def finalize(self) -> None:
        """Write the index and move both files into place."""
        import numpy as np

        if self._bin is None:
            return
        self._bin.flush()
        os.fsync(self._bin.fileno())
        self._bin.close()
        self._bin = None
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        with open(self._idx_tmp, "wb") as handle:
            handle.write(encode_index(lengths, self.dtype))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(self._bin_tmp, bin_path(self.prefix))
        os.replace(self._idx_tmp, idx_path(self.prefix))

    def abort(self) -> None:
        if self._bin is not None:
            self._bin.close()
            self._bin = None
        self._bin_tmp.unlink(missing_ok=True)
        self._idx_tmp.unlink(missing_ok=True)

    def __enter__(self) -> IndexedWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.finalize()
        else:
            self.abort()


class IndexedReader:
    """Read a Megatron indexed dataset, checking its structure first.

    Every structural check (header, version, dtype, counts, document index,
    pointers, ``.bin`` size) runs on open; a failure raises
    :class:`IndexedDatasetError` naming the check.  Token values are checked by
    :func:`tprimat.data.verify.verify_dataset`.
    """

    def __init__(self, prefix: str | Path) -> None:
        import numpy as np

        self.prefix = Path(prefix)
        idx, binf = idx_path(prefix), bin_path(prefix)
        for path, check in ((idx, "idx.exists"), (binf, "bin.exists")):
            if not path.is_file():
                raise IndexedDatasetError(check, path, "file not found")
        size = idx.stat().st_size
        if size < HEADER_SIZE:
            raise IndexedDatasetError("idx.header", idx, f"{size} bytes, shorter than the {HEADER_SIZE}-byte header")
        # mapped, not read: an index of millions of documents stays in the page cache
        raw = np.memmap(idx, dtype=np.uint8, mode="r")
        header = bytes(raw[:HEADER_SIZE])
        if header[: len(MAGIC)] != MAGIC:
            raise IndexedDatasetError("idx.header", idx, f"magic is {header[: len(MAGIC)]!r}, expected {MAGIC!r}")
        offset = len(MAGIC)
        (version,) = struct.unpack_from("<Q", header, offset)
        if version != VERSION:
            raise IndexedDatasetError("idx.version", idx, f"version {version}, expected {VERSION}")
        (code,) = struct.unpack_from("<B", header, offset + 8)
        if code not in DTYPE_CODES:
            raise IndexedDatasetError("idx.dtype", idx, f"unknown dtype code {code}")
        self.dtype = DTYPE_CODES[code]
        sequences, documents = struct.unpack_from("<QQ", header, offset + 9)
        expected = HEADER_SIZE + sequences * (4 + 8) + documents * 8
        if size != expected:
            raise IndexedDatasetError(
                "idx.size",
                idx,
                f"{size} bytes, but {sequences} sequences and {documents} document-index "
                f"entries need {expected} (truncated or corrupted index)",
            )
        self.sequence_count = int(sequences)
        pos = HEADER_SIZE
        self.lengths = np.frombuffer(raw, dtype="<i4", count=sequences, offset=pos)
        pos += 4 * sequences
        self.pointers = np.frombuffer(raw, dtype="<i8", count=sequences, offset=pos)
        pos += 8 * sequences
        self.document_index = np.frombuffer(raw, dtype="<i8", count=documents, offset=pos)
        self._check_index(idx)
        itemsize = np.dtype(self.dtype).itemsize
        self.itemsize = itemsize
        self.token_count = int(self.lengths.sum(dtype=np.int64))
        expected_bin = self.token_count * itemsize
        actual_bin = binf.stat().st_size
        if actual_bin != expected_bin:
            raise IndexedDatasetError(
                "bin.size",
                binf,
                f"{actual_bin} bytes, but the index describes {self.token_count} tokens of "
                f"{self.dtype} = {expected_bin} bytes (truncated, or not this index's data)",
            )
        self.tokens = (
            np.memmap(binf, dtype=np.dtype(self.dtype).newbyteorder("<"), mode="r")
            if expected_bin
            else np.zeros(0, dtype=self.dtype)
        )

    def _check_index(self, idx: Path) -> None:
        import numpy as np

        lengths, pointers, docs = self.lengths, self.pointers, self.document_index
        if lengths.size and lengths.min() < 0:
            raise IndexedDatasetError("idx.lengths", idx, "negative sequence length")
        if docs.size < 1 or docs[0] != 0 or docs[-1] != self.sequence_count:
            raise IndexedDatasetError(
                "idx.document_index",
                idx,
                f"document index must run from 0 to {self.sequence_count}, "
                f"got {docs[:1].tolist()}..{docs[-1:].tolist()}",
            )
        if docs.size > 1 and np.any(np.diff(docs) < 0):
            raise IndexedDatasetError("idx.document_index", idx, "document index is not sorted")
        itemsize = np.dtype(self.dtype).itemsize
        expected = np.zeros(self.sequence_count, dtype=np.int64)
        if self.sequence_count > 1:
            np.cumsum(lengths[:-1].astype(np.int64) * itemsize, out=expected[1:])
        bad = np.flatnonzero(pointers != expected)
        if bad.size:
            i = int(bad[0])
            raise IndexedDatasetError(
                "idx.pointers",
                idx,
                f"sequence {i} starts at byte {int(pointers[i])}, but the lengths before it "
                f"put it at {int(expected[i])}",
            )

    @property
    def document_count(self) -> int:
        return int(self.document_index.size - 1)

    def __len__(self) -> int:
        return self.sequence_count

    def __getitem__(self, i: int) -> numpy.ndarray:
        if not -self.sequence_count <= i < self.sequence_count:
            raise IndexError(f"sequence {i} out of range for {self.sequence_count}")
        i %= self.sequence_count
        start = int(self.pointers[i]) // self.itemsize
        return self.tokens[start : start + int(self.lengths[i])]

    def document_starts(self) -> numpy.ndarray:
        """Token offset where each sequence starts (int64)."""
        return self.pointers // self.itemsize
