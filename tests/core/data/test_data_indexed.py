"""The Megatron indexed format: round trips, and a named check for every kind of damage."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tprimat.data.indexed import (
    HEADER_SIZE,
    IndexedDatasetError,
    IndexedReader,
    IndexedWriter,
    token_dtype_for_vocab,
)
from tprimat.data.verify import verify_dataset

EOS = 2


def write(prefix, docs, dtype="uint16"):
    with IndexedWriter(prefix, dtype) as writer:
        for doc in docs:
            writer.add_document(np.array(doc))
    return prefix


@pytest.fixture
def dataset(tmp_path):
    docs = [[5, 6, 7, EOS], [9, EOS], [1, 1, 1, 1, 1, EOS]]
    return write(tmp_path / "d_text_document", docs), docs


def test_dtype_follows_megatron():
    assert token_dtype_for_vocab(4096) == "uint16"
    assert token_dtype_for_vocab(65499) == "uint16"
    assert token_dtype_for_vocab(65500) == "int32"
    assert token_dtype_for_vocab(128256) == "int32"
    assert token_dtype_for_vocab(151665) == "int32"


def test_layout_is_exactly_megatrons(dataset):
    prefix, docs = dataset
    raw = (prefix.parent / "d_text_document.idx").read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    assert struct.unpack_from("<QBQQ", raw, 9) == (1, 8, 3, 4)
    lengths = np.frombuffer(raw, "<i4", 3, HEADER_SIZE)
    pointers = np.frombuffer(raw, "<i8", 3, HEADER_SIZE + 12)
    doc_index = np.frombuffer(raw, "<i8", 4, HEADER_SIZE + 36)
    assert lengths.tolist() == [4, 2, 6]
    assert pointers.tolist() == [0, 8, 12]
    assert doc_index.tolist() == [0, 1, 2, 3]
    assert len(raw) == HEADER_SIZE + 3 * 12 + 4 * 8
    assert (prefix.parent / "d_text_document.bin").read_bytes() == np.array(sum(docs, []), dtype="<u2").tobytes()


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(st.lists(st.integers(0, 2**31 - 1), max_size=40), max_size=30),
    dtype=st.sampled_from(["int32", "int64"]),
)
def test_round_trip(tmp_path_factory, docs, dtype):
    prefix = write(tmp_path_factory.mktemp("rt") / "x", docs, dtype)
    reader = IndexedReader(prefix)
    assert len(reader) == reader.document_count == len(docs)
    assert [reader[i].tolist() for i in range(len(docs))] == docs
    assert reader.token_count == sum(map(len, docs))


def test_verify_passes_and_reports(dataset):
    prefix, docs = dataset
    summary = verify_dataset(
        prefix, vocab_size=10, eos_id=EOS, documents=3, tokens=12, decode=lambda ids: " ".join(map(str, ids))
    )
    assert summary == {"documents": 3, "tokens": 12, "dtype": "uint16", "sample": "5 6 7 2"}


def corrupt(path, offset, data):
    raw = bytearray(path.read_bytes())
    raw[offset : offset + len(data)] = data
    path.write_bytes(bytes(raw))


def check_of(prefix, **kw):
    with pytest.raises(IndexedDatasetError) as info:
        verify_dataset(prefix, vocab_size=kw.pop("vocab_size", 10), **kw)
    assert f"check {info.value.check!r} failed" in str(info.value)
    return info.value.check


def test_missing_files(tmp_path, dataset):
    prefix, _ = dataset
    assert check_of(tmp_path / "nothing") == "idx.exists"
    (prefix.parent / "d_text_document.bin").unlink()
    assert check_of(prefix) == "bin.exists"


def test_bad_magic(dataset):
    prefix, _ = dataset
    corrupt(prefix.parent / "d_text_document.idx", 0, b"XXIDIDX")
    assert check_of(prefix) == "idx.header"


def test_short_index(dataset):
    prefix, _ = dataset
    idx = prefix.parent / "d_text_document.idx"
    idx.write_bytes(idx.read_bytes()[:20])
    assert check_of(prefix) == "idx.header"


def test_version_and_dtype(dataset):
    prefix, _ = dataset
    idx = prefix.parent / "d_text_document.idx"
    good = idx.read_bytes()
    corrupt(idx, 9, struct.pack("<Q", 2))
    assert check_of(prefix) == "idx.version"
    idx.write_bytes(good)
    corrupt(idx, 17, b"\x63")
    assert check_of(prefix) == "idx.dtype"


def test_truncated_index(dataset):
    prefix, _ = dataset
    idx = prefix.parent / "d_text_document.idx"
    idx.write_bytes(idx.read_bytes()[:-5])
    assert check_of(prefix) == "idx.size"


def test_counts_that_do_not_match_the_file(dataset):
    prefix, _ = dataset
    corrupt(prefix.parent / "d_text_document.idx", 18, struct.pack("<Q", 4))
    assert check_of(prefix) == "idx.size"


def test_pointer_corruption(dataset):
    prefix, _ = dataset
    corrupt(prefix.parent / "d_text_document.idx", HEADER_SIZE + 12 + 8, struct.pack("<q", 10))
    check = check_of(prefix)
    assert check == "idx.pointers"


def test_document_index_corruption(dataset):
    prefix, _ = dataset
    corrupt(prefix.parent / "d_text_document.idx", HEADER_SIZE + 36 + 24, struct.pack("<q", 7))
    assert check_of(prefix) == "idx.document_index"


def test_truncated_and_padded_data(dataset):
    prefix, _ = dataset
    binf = prefix.parent / "d_text_document.bin"
    good = binf.read_bytes()
    binf.write_bytes(good[:-2])
    assert check_of(prefix) == "bin.size"
    binf.write_bytes(good + b"\x00\x00")
    assert check_of(prefix) == "bin.size"


def test_token_out_of_range(dataset):
    prefix, _ = dataset
    assert check_of(prefix, vocab_size=8) == "token_range"  # token 9 in document 1


def test_missing_eos(dataset):
    prefix, _ = dataset
    corrupt(prefix.parent / "d_text_document.bin", 2 * 5, struct.pack("<H", 3))
    with pytest.raises(IndexedDatasetError, match="document 1 ends with token 3"):
        verify_dataset(prefix, vocab_size=10, eos_id=EOS)


def test_counts_differ_from_the_record(dataset):
    prefix, _ = dataset
    assert check_of(prefix, documents=4) == "counts"
    assert check_of(prefix, tokens=11) == "counts"


def test_undecodable(dataset):
    prefix, _ = dataset

    def broken(ids):
        raise ValueError("bad id")

    assert check_of(prefix, decode=broken) == "decode"


def test_interrupted_writer_leaves_no_dataset(tmp_path):
    prefix = tmp_path / "p"
    with pytest.raises(RuntimeError):
        with IndexedWriter(prefix, "uint16") as writer:
            writer.add_document(np.array([1, 2]))
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_writer_refuses_inconsistent_lengths(tmp_path):
    writer = IndexedWriter(tmp_path / "p", "uint16")
    with pytest.raises(ValueError, match="add up"):
        writer.add_documents(np.array([1, 2, 3]), np.array([2]))
    writer.abort()
