"""The whole pipeline on a local corpus with a tiny tokenizer, offline."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from tiny_corpus import train_tokenizer, write_jsonl

from tprimat.data import load_prepared
from tprimat.data.clean import CleanOptions
from tprimat.data.indexed import IndexedReader
from tprimat.data.pipeline import PrepareError, PrepareOptions, Reporter, prepare
from tprimat.data.verify import fingerprint_inputs, fingerprint_of


class Recorder(Reporter):
    def __init__(self, stop_after_chunks: int | None = None) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.chunks = 0
        self.stop_after_chunks = stop_after_chunks

    def step(self, name, status, detail=""):
        self.events.append((name, status, detail))

    def tokenize_advance(self, documents, tokens):
        self.chunks += 1
        if self.stop_after_chunks is not None and self.chunks >= self.stop_after_chunks:
            raise KeyboardInterrupt

    def status(self, name):
        return [s for n, s, _ in self.events if n == name and s != "start"]


def corpus(tmp_path: Path, documents: list[str]) -> Path:
    extra = [
        documents[0],  # exact duplicate
        "   ",  # empty after stripping
        "Cafe\u0301 au lait and more words here.",  # NFD, normalised to NFC
        "tiny",
    ]
    return write_jsonl(tmp_path / "in" / "books.jsonl", documents + extra)


def options(tmp_path, source, tokenizer, **kw):
    base = dict(
        model="llama3.1-tiny",
        input=source,
        tokenizer=str(tokenizer),
        output=tmp_path / "data",
        chunk_documents=64,
        workers=1,
    )
    base.update(kw)
    return PrepareOptions(**base)


def test_round_trip(tmp_path, documents, llama_like_tokenizer):
    from tokenizers import Tokenizer

    source = corpus(tmp_path, documents)
    recorder = Recorder()
    prepared = prepare(options(tmp_path, source, llama_like_tokenizer, clean=CleanOptions(min_chars=5)), recorder)
    root = prepared.path_prefix.parent.parent
    assert root.parent.name == "books" and root.name.startswith("llama-tok")
    assert prepared.path_prefix.name == "books_text_document"
    meta = json.loads((root / "dataset.json").read_text())
    stats = meta["clean"]["stats"]
    assert stats["read"] == len(documents) + 4
    assert stats["dropped"] == {"empty": 1, "min_chars": 1, "min_words": 0, "duplicate": 1}
    assert prepared.documents == stats["kept"] == len(documents) + 1

    tokenizer = Tokenizer.from_file(str(Path(prepared.tokenizer) / "tokenizer.json"))
    bos, eos = tokenizer.token_to_id("<|begin_of_text|>"), tokenizer.token_to_id("<|end_of_text|>")
    reader = IndexedReader(prepared.path_prefix)
    assert reader.dtype == "uint16" and reader.document_count == prepared.documents
    expected = documents + [unicodedata.normalize("NFC", "Cafe\u0301 au lait and more words here.")]
    total = 0
    for i, text in enumerate(expected):
        ids = reader[i].tolist()
        assert ids[0] == bos and ids[-1] == eos
        assert ids == tokenizer.encode(text).ids + [eos]
        assert tokenizer.decode(ids[1:-1]) == text
        total += len(ids)
    assert prepared.tokens == total == meta["tokens"]
    assert meta["vocab_size"] == prepared.vocab_size == tokenizer.get_vocab_size()
    # the fingerprint can be recomputed from the files
    inputs = fingerprint_inputs(
        prepared.path_prefix,
        meta["fingerprint_inputs"]["tokenizer_sha256"],
        documents=prepared.documents,
        tokens=prepared.tokens,
        dtype="uint16",
    )
    assert fingerprint_of(inputs) == prepared.fingerprint == meta["fingerprint"]
    assert not list((root / "tokenized").glob("parts-*"))
    assert all(status == ["done"] for status in map(recorder.status, ("fetch", "clean", "write")))


def test_rerun_skips_finished_steps_and_redoes_changed_ones(tmp_path, documents, llama_like_tokenizer):
    source = corpus(tmp_path, documents)
    first = prepare(options(tmp_path, source, llama_like_tokenizer))
    again = Recorder()
    second = prepare(options(tmp_path, source, llama_like_tokenizer), again)
    assert second == first
    for step in ("fetch", "clean", "tokenize", "write"):
        assert again.status(step) == ["skipped"]
    assert again.status("verify") == ["done"]  # verification always runs

    changed = Recorder()
    third = prepare(options(tmp_path, source, llama_like_tokenizer, clean=CleanOptions(min_words=6)), changed)
    assert changed.status("fetch") == ["skipped"]
    assert changed.status("clean") == ["done"] and changed.status("tokenize") == ["done"]
    assert third.documents < first.documents and third.fingerprint != first.fingerprint


def test_interrupted_tokenize_resumes_and_gives_the_same_dataset(tmp_path, documents, llama_like_tokenizer):
    source = corpus(tmp_path, documents)
    reference = prepare(options(tmp_path / "ref", source, llama_like_tokenizer))

    with pytest.raises(KeyboardInterrupt):
        prepare(options(tmp_path, source, llama_like_tokenizer), Recorder(stop_after_chunks=3))
    root = reference.path_prefix.parent.parent
    local = tmp_path / "data" / root.parent.name / root.name
    parts = list((local / "tokenized").glob("parts-*/part-*.npz"))
    assert len(parts) == 3
    assert not (local / "tokenized" / "books_text_document.bin").exists()

    resumed = Recorder()
    result = prepare(options(tmp_path, source, llama_like_tokenizer), resumed)
    detail = [d for n, s, d in resumed.events if n == "tokenize" and s == "done"][0]
    assert "(3 kept from an earlier run)" in detail
    assert result.fingerprint == reference.fingerprint
    assert result.tokens == reference.tokens


@pytest.mark.slow
def test_worker_processes_give_identical_tokens(tmp_path, documents, llama_like_tokenizer):
    source = corpus(tmp_path, documents)
    one = prepare(options(tmp_path / "a", source, llama_like_tokenizer, workers=1))
    two = prepare(options(tmp_path / "b", source, llama_like_tokenizer, workers=2))
    assert one.fingerprint == two.fingerprint


def test_parquet_and_text_inputs(tmp_path, documents, qwen_like_tokenizer):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = tmp_path / "mixed"
    src.mkdir()
    pq.write_table(pa.table({"text": documents[:40], "n": list(range(40))}), src / "a.parquet")
    (src / "b.txt").write_text("\n".join(documents[40:60]) + "\n", encoding="utf-8")
    write_jsonl(src / "c" / "d.jsonl", documents[60:80])
    prepared = prepare(
        PrepareOptions(
            model="qwen2.5-tiny", input=src, tokenizer=str(qwen_like_tokenizer), output=tmp_path / "data", workers=1
        )
    )
    assert prepared.documents == 80
    assert prepared.path_prefix.parent.parent.parent.name == "mixed"
    reader = IndexedReader(prepared.path_prefix)
    eos = json.loads((Path(prepared.tokenizer) / "tokenizer_config.json").read_text())["eos_token"]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(prepared.tokenizer) / "tokenizer.json"))
    for i in (0, 39, 40, 59, 60, 79):
        ids = reader[i].tolist()
        assert ids[-1] == tok.token_to_id(eos)
        assert tok.decode(ids[:-1]) == documents[i]  # no BOS for this tokenizer


def test_max_documents_and_two_tokenizers_never_share_a_directory(
    tmp_path, documents, llama_like_tokenizer, qwen_like_tokenizer
):
    source = corpus(tmp_path, documents)
    a = prepare(options(tmp_path, source, llama_like_tokenizer, max_documents=50))
    b = prepare(options(tmp_path, source, qwen_like_tokenizer, max_documents=50))
    assert a.documents == b.documents == 50
    assert a.path_prefix.parent.parent != b.path_prefix.parent.parent
    assert a.fingerprint != b.fingerprint
    assert load_prepared(a.path_prefix.parent.parent) == a


def test_tokenizer_larger_than_the_model_vocabulary_is_refused(tmp_path, documents):
    big = train_tokenizer(tmp_path / "big", documents, extra_special_tokens=4000)
    with pytest.raises(PrepareError, match="at most 4096"):
        prepare(options(tmp_path, corpus(tmp_path, documents), big))


def test_no_documents_is_an_error(tmp_path, llama_like_tokenizer):
    source = write_jsonl(tmp_path / "empty.jsonl", ["", "  "])
    with pytest.raises(PrepareError, match="dropped by the filters"):
        prepare(options(tmp_path, source, llama_like_tokenizer))


def test_uint16_is_enough_for_the_tiny_models(tmp_path, documents, llama_like_tokenizer):
    prepared = prepare(options(tmp_path, corpus(tmp_path, documents), llama_like_tokenizer))
    data = np.fromfile(f"{prepared.path_prefix}.bin", dtype="<u2")
    assert data.size == prepared.tokens and int(data.max()) < prepared.vocab_size


def test_hub_corpus_is_fetched_once_and_the_token_is_written_nowhere(
    tmp_path, monkeypatch, documents, llama_like_tokenizer
):
    import sys
    import types

    secret = "hf_" + "t" * 34
    monkeypatch.setenv("HF_TOKEN", secret)
    calls = []

    def load_dataset(**kwargs):
        calls.append(kwargs)
        return iter({"text": text} for text in documents)

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    opts = PrepareOptions(
        model="llama3.1-tiny",
        dataset="bc",
        tokenizer=str(llama_like_tokenizer),
        max_documents=120,
        output=tmp_path / "data",
        workers=1,
    )
    first = prepare(opts)
    assert first.documents == 120
    assert calls == [
        {
            "path": "bookcorpus/bookcorpus",
            "name": None,
            "split": "train",
            "streaming": False,
            "revision": "refs/convert/parquet",
            "token": secret,
        }
    ]
    root = first.path_prefix.parent.parent
    assert root.relative_to(tmp_path / "data").parts[0] == "bc"
    meta = json.loads((root / "dataset.json").read_text())
    assert meta["source"]["load_dataset"]["path"] == "bookcorpus/bookcorpus"
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path

    def unreachable(**kwargs):
        raise AssertionError("a finished fetch must not reach the hub again")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=unreachable))
    assert prepare(opts) == first


def test_check_recomputes_the_fingerprint_and_names_what_changed(tmp_path, documents, llama_like_tokenizer):
    import shutil

    from tprimat.data import PreparedDatasetError, check_prepared

    prepared = prepare(options(tmp_path, corpus(tmp_path, documents), llama_like_tokenizer))
    root = prepared.path_prefix.parent.parent
    copy = tmp_path / "elsewhere" / "ds"
    shutil.copytree(root, copy)  # a dataset directory moves between machines as a whole
    assert check_prepared(copy)["fingerprint"] == prepared.fingerprint
    assert load_prepared(copy).fingerprint == prepared.fingerprint

    binf = Path(f"{load_prepared(copy).path_prefix}.bin")
    data = bytearray(binf.read_bytes())
    data[4], data[6] = data[6], data[4]  # swap two token bytes: same size, ids still valid
    binf.write_bytes(bytes(data))
    with pytest.raises(PreparedDatasetError, match=r"fingerprint mismatch.*changed: bin_sha256"):
        check_prepared(copy)
    shutil.rmtree(copy)
    shutil.copytree(root, copy)
    config = copy / "tokenizer" / "tokenizer_config.json"
    config.write_text(config.read_text().replace("2048", "4096"))
    with pytest.raises(PreparedDatasetError, match="tokenizer/tokenizer_config.json"):
        check_prepared(copy)


def test_parts_of_another_chunk_size_are_not_reused(tmp_path, documents, llama_like_tokenizer):
    source = corpus(tmp_path, documents)
    reference = prepare(options(tmp_path / "ref", source, llama_like_tokenizer))
    with pytest.raises(KeyboardInterrupt):
        prepare(options(tmp_path, source, llama_like_tokenizer), Recorder(stop_after_chunks=2))
    resumed = Recorder()
    result = prepare(options(tmp_path, source, llama_like_tokenizer, chunk_documents=50), resumed)
    detail = [d for n, s, d in resumed.events if n == "tokenize" and s == "done"][0]
    assert "(0 kept from an earlier run)" in detail
    assert result.fingerprint == reference.fingerprint
    assert len(list(result.path_prefix.parent.glob("parts-*"))) == 0


def test_damaged_data_is_reported_on_rerun(tmp_path, documents, llama_like_tokenizer):
    prepared = prepare(options(tmp_path, corpus(tmp_path, documents), llama_like_tokenizer))
    idx = Path(f"{prepared.path_prefix}.idx")
    raw = bytearray(idx.read_bytes())
    raw[0:3] = b"BAD"
    idx.write_bytes(bytes(raw))
    with pytest.raises(PrepareError, match=r"check 'idx.header' failed.*remove .*tokenized"):
        prepare(options(tmp_path, corpus(tmp_path, documents), llama_like_tokenizer))
