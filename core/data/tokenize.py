"""Tokenize cleaned documents into numbered parts, in parallel and resumably.

Documents are cut into chunks of ``chunk_documents``; each chunk is encoded
with the fast tokenizer's batch encoder in a worker process and written as one
part file (``part-NNNNNN.npz``: the flat token array in the dataset's dtype and
the length of every document, end-of-text token included).  A part is written
under a temporary name and renamed when complete, so after an interruption the
next run keeps every finished part and encodes only the missing ones.  The
write step concatenates the parts, in order, into the ``.bin``/``.idx`` pair.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import Future

    import numpy

PART_GLOB = "part-*.npz"

#: Called after each finished chunk with (documents, tokens) it added.
ProgressCallback = Callable[[int, int], None]

_worker_state: dict[str, Any] = {}


def part_path(parts_dir: Path, index: int) -> Path:
    return parts_dir / f"part-{index:06d}.npz"


def _init_worker(tokenizer_json: str, eos_id: int, dtype: str, threads: bool) -> None:
    if not threads:
        # One process per core: the Rust thread pool inside each would oversubscribe.
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from tokenizers import Tokenizer

    _worker_state["tokenizer"] = Tokenizer.from_file(tokenizer_json)
    _worker_state["eos_id"] = eos_id
    _worker_state["dtype"] = dtype


def encode_texts(tokenizer: Any, texts: list[str], eos_id: int, dtype: str) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Encode documents (tokenizer's own special tokens, then EOS); flat tokens and lengths."""
    import numpy as np

    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    encodings = encode(texts, add_special_tokens=True)
    ids = [encoding.ids for encoding in encodings]
    lengths = np.fromiter((len(i) + 1 for i in ids), dtype=np.int64, count=len(ids))
    total = int(lengths.sum())
    tokens = np.fromiter(
        itertools.chain.from_iterable(itertools.chain(i, (eos_id,)) for i in ids),
        dtype=np.int64,
        count=total,
    )
    if total and (tokens.min() < 0 or tokens.max() > np.iinfo(dtype).max):
        raise ValueError(f"token id out of range for {dtype}")
    return tokens.astype(dtype), lengths


def _write_part(path: Path, tokens: numpy.ndarray, lengths: numpy.ndarray) -> None:
    import numpy as np

    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        np.savez(handle, tokens=tokens, lengths=lengths)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _encode_chunk(index: int, texts: list[str], parts_dir: str) -> tuple[int, int, int]:
    state = _worker_state
    tokens, lengths = encode_texts(state["tokenizer"], texts, state["eos_id"], state["dtype"])
    _write_part(part_path(Path(parts_dir), index), tokens, lengths)
    return index, int(lengths.size), int(tokens.size)


def read_part(path: Path) -> tuple[numpy.ndarray, numpy.ndarray]:
    """``(tokens, lengths)`` of a finished part."""
    import numpy as np

    with np.load(path) as data:
        return data["tokens"], data["lengths"]


def iter_chunks(clean_jsonl: Path, chunk_documents: int) -> Iterator[tuple[int, list[str]]]:
    """``(chunk index, raw JSON lines)`` of the cleaned corpus."""
    with open(clean_jsonl, encoding="utf-8") as handle:
        for index in itertools.count():
            lines = list(itertools.islice(handle, chunk_documents))
            if not lines:
                return
            yield index, lines


class _Tally:
    """What one :func:`tokenize_to_parts` call did, passed on to its progress callback."""

    def __init__(self, progress: ProgressCallback | None) -> None:
        self.chunks = 0
        self.chunks_resumed = 0
        self._progress = progress

    def encoded(self, documents: int, tokens: int) -> None:
        self.chunks += 1
        self._report(documents, tokens)

    def resumed(self, documents: int, tokens: int) -> None:
        self.chunks_resumed += 1
        self._report(documents, tokens)

    def counts(self) -> dict[str, int]:
        return {"chunks": self.chunks, "chunks_resumed": self.chunks_resumed}

    def _report(self, documents: int, tokens: int) -> None:
        if self._progress is not None:
            self._progress(documents, tokens)


def _pending_chunks(
    clean_jsonl: Path, parts_dir: Path, chunk_documents: int, tally: _Tally
) -> Iterator[tuple[int, list[str]]]:
    """``(chunk index, texts)`` of every chunk without a finished part; finished ones are counted as resumed.

    A part counts as finished when it holds as many documents as its chunk.
    """
    for index, lines in iter_chunks(clean_jsonl, chunk_documents):
        existing = part_path(parts_dir, index)
        if existing.is_file():
            _, lengths = read_part(existing)
            if lengths.size == len(lines):
                tally.resumed(int(lengths.size), int(lengths.sum()))
                continue
        yield index, [json.loads(line)["text"] for line in lines]


def _encode_here(chunks: Iterator[tuple[int, list[str]]], parts_dir: Path, tally: _Tally) -> None:
    """Encode in this process (the tokenizer's own thread pool uses the cores)."""
    for index, texts in chunks:
        _, documents, tokens = _encode_chunk(index, texts, str(parts_dir))
        tally.encoded(documents, tokens)


def _encode_in_pool(
    chunks: Iterator[tuple[int, list[str]]],
    parts_dir: Path,
    tally: _Tally,
    *,
    workers: int,
    initargs: tuple[str, int, str, bool],
) -> None:
    """Encode in ``workers`` spawned processes, at most two chunks per worker in flight.

    On any failure or interruption the chunks not yet started are cancelled.
    """
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    context = multiprocessing.get_context("spawn")  # no fork under a progress-bar thread
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_init_worker, initargs=initargs
    ) as pool:
        in_flight: set[Future[tuple[int, int, int]]] = set()
        try:
            for index, texts in chunks:
                in_flight.add(pool.submit(_encode_chunk, index, texts, str(parts_dir)))
                if len(in_flight) >= 2 * workers:
                    finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                    _count_finished(finished, tally)
            _count_finished(in_flight, tally)
        except BaseException:
            for future in in_flight:
                future.cancel()
            raise


def _count_finished(futures: Iterable[Future[tuple[int, int, int]]], tally: _Tally) -> None:
    """Wait for each of ``futures`` (re-raising its error) and count what it encoded."""
    for future in futures:
        _, documents, tokens = future.result()
        tally.encoded(documents, tokens)


def tokenize_to_parts(
    clean_jsonl: Path,
    parts_dir: Path,
    *,
    tokenizer_json: Path,
    eos_id: int,
    dtype: str,
    workers: int = 1,
    chunk_documents: int = 4096,
    progress: ProgressCallback | None = None,
) -> dict[str, int]:
    """Encode every chunk that has no finished part yet; returns counts of what was done."""
    parts_dir.mkdir(parents=True, exist_ok=True)
    for stale in parts_dir.glob(".part-*.tmp"):
        stale.unlink()
    tally = _Tally(progress)
    chunks = _pending_chunks(clean_jsonl, parts_dir, chunk_documents, tally)
    if workers <= 1:
        _init_worker(str(tokenizer_json), eos_id, dtype, threads=True)
        _encode_here(chunks, parts_dir, tally)
    else:
        initargs = (str(tokenizer_json), eos_id, dtype, False)
        _encode_in_pool(chunks, parts_dir, tally, workers=workers, initargs=initargs)
    return tally.counts()


def write_parts(parts_dir: Path, chunks: int, prefix: Path, dtype: str) -> tuple[int, int]:
    """Concatenate parts 0..chunks-1 into ``<prefix>.bin``/``.idx``; (documents, tokens)."""
    from tprimat.data.indexed import IndexedWriter

    with IndexedWriter(prefix, dtype) as writer:
        for index in range(chunks):
            tokens, lengths = read_part(part_path(parts_dir, index))
            writer.add_documents(tokens, lengths)
    return writer.documents, writer.tokens
