"""tprimat's .bin/.idx against Megatron-Core's own IndexedDataset reader and builder."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tprimat.data.indexed import IndexedReader, IndexedWriter

pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="module")
def megatron_indexed():
    pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    return module


def random_docs(seed, vocab, count=200):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=int(rng.integers(1, 300))) for _ in range(count)]


@pytest.mark.parametrize("vocab,dtype", [(4096, "uint16"), (128256, "int32"), (151665, "int32")])
def test_megatron_reads_tprimat_files(tmp_path, megatron_indexed, vocab, dtype):
    docs = random_docs(vocab, vocab)
    prefix = tmp_path / "t_text_document"
    with IndexedWriter(prefix, dtype) as writer:
        for doc in docs:
            writer.add_document(doc)
    dataset = megatron_indexed.IndexedDataset(str(prefix))
    assert len(dataset) == len(docs)
    assert dataset.document_indices.tolist() == list(range(len(docs) + 1))
    assert dataset.index.dtype == np.dtype(dtype).type
    for i, doc in enumerate(docs):
        assert np.array_equal(dataset[i], doc)
        assert dataset[i].dtype == np.dtype(dtype)


def test_same_bytes_as_megatron_builder(tmp_path, megatron_indexed):
    import torch

    docs = random_docs(1, 50000)
    dtype = megatron_indexed.DType.optimal_dtype(50000)
    builder = megatron_indexed.IndexedDatasetBuilder(str(tmp_path / "m.bin"), dtype=dtype)
    for doc in docs:
        builder.add_document(torch.from_numpy(doc.astype(np.int64)), [len(doc)])
    builder.finalize(str(tmp_path / "m.idx"))

    with IndexedWriter(tmp_path / "t", np.dtype(dtype).name) as writer:
        for doc in docs:
            writer.add_document(doc)
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"t{suffix}").read_bytes() == (tmp_path / f"m{suffix}").read_bytes()
    reader = IndexedReader(tmp_path / "m")
    assert all(np.array_equal(reader[i], doc) for i, doc in enumerate(docs))


def test_prepared_dataset_reads_back(tmp_path, megatron_indexed, documents, llama_like_tokenizer):
    from tiny_corpus import write_jsonl
    from tokenizers import Tokenizer

    from tprimat.data.pipeline import PrepareOptions, prepare

    prepared = prepare(
        PrepareOptions(
            model="llama3.1-tiny",
            input=write_jsonl(tmp_path / "c.jsonl", documents),
            tokenizer=str(llama_like_tokenizer),
            output=tmp_path / "data",
        )
    )
    dataset = megatron_indexed.IndexedDataset(str(prepared.path_prefix))
    tokenizer = Tokenizer.from_file(str(llama_like_tokenizer / "tokenizer.json"))
    eos = tokenizer.token_to_id("<|end_of_text|>")
    assert len(dataset) == len(documents) == prepared.documents
    for i, text in enumerate(documents):
        assert dataset[i].tolist() == tokenizer.encode(text).ids + [eos]


def test_large_vocabulary_gives_int32_that_megatron_reads(tmp_path, megatron_indexed, documents):
    from tiny_corpus import train_tokenizer, write_jsonl
    from tokenizers import Tokenizer

    from tprimat.data.pipeline import PrepareOptions, prepare

    big = train_tokenizer(tmp_path / "big", documents, extra_special_tokens=66000)
    prepared = prepare(
        PrepareOptions(
            model="llama3.1-8b",
            input=write_jsonl(tmp_path / "c.jsonl", documents),
            tokenizer=str(big),
            output=tmp_path / "data",
        )
    )
    assert prepared.vocab_size > 65500
    dataset = megatron_indexed.IndexedDataset(str(prepared.path_prefix))
    assert dataset.index.dtype == np.int32
    tokenizer = Tokenizer.from_file(str(big / "tokenizer.json"))
    eos = tokenizer.token_to_id("<|end_of_text|>")
    for i in (0, len(documents) - 1):
        assert dataset[i].tolist() == tokenizer.encode(documents[i]).ids + [eos]
