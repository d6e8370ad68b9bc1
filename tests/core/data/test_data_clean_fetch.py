"""Filters with their counts; sources: local formats and the exact hub call (never made here)."""

from __future__ import annotations

import gzip
import json

import pytest

from tprimat.data.clean import CleanOptions, CleanStats, clean_documents
from tprimat.data.fetch import (
    HUB_CORPORA,
    FetchError,
    hub_load_arguments,
    iter_hub_documents,
    iter_local_documents,
)


def test_filters_count_what_they_drop():
    docs = ["", "  ", "ab", "one two", "one two three", "one two three", "ﬁne words here"]
    stats = CleanStats()
    kept = list(clean_documents(docs, CleanOptions(min_chars=3, min_words=3, normalize="NFKC"), stats))
    assert kept == ["one two three", "fine words here"]
    assert stats.read == 7 and stats.kept == 2
    assert stats.dropped == {"empty": 2, "min_chars": 1, "min_words": 1, "duplicate": 1}


def test_nfc_makes_duplicates_visible_and_dedup_can_be_off():
    docs = ["caf\u00e9 ok", "cafe\u0301 ok"]
    stats = CleanStats()
    assert list(clean_documents(docs, CleanOptions(), stats)) == ["caf\u00e9 ok"]
    assert stats.dropped["duplicate"] == 1
    raw = list(clean_documents(docs, CleanOptions(normalize="none", dedup=False), CleanStats()))
    assert raw == docs
    with pytest.raises(ValueError):
        CleanOptions(normalize="NFX")


def test_hub_corpora_are_loaded_exactly_so():
    bc = hub_load_arguments(HUB_CORPORA["bc"], offline=False)
    assert bc == {
        "path": "bookcorpus/bookcorpus",
        "name": None,
        "split": "train",
        "streaming": True,
        "revision": "refs/convert/parquet",
    }
    c4 = hub_load_arguments(HUB_CORPORA["c4"], offline=True)
    assert c4 == {"path": "allenai/c4", "name": "en", "split": "train", "streaming": False}


class FakeHub:
    """Stands in for datasets.load_dataset: records the call, yields rows."""

    def __init__(self, rows):
        self.rows = rows
        self.calls = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        return iter(self.rows)


def test_hub_documents_token_and_limit(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 30)
    hub = FakeHub([{"text": f"doc {i}"} for i in range(10)] + [{"text": None}])
    docs = list(iter_hub_documents(HUB_CORPORA["c4"], 3, offline=False, load_dataset=hub))
    assert docs == ["doc 0", "doc 1", "doc 2"]
    assert hub.calls == [
        {"path": "allenai/c4", "name": "en", "split": "train", "streaming": True, "token": "hf_" + "x" * 30}
    ]


def test_hub_errors_never_show_the_token(monkeypatch):
    secret = "hf_" + "s" * 30
    monkeypatch.setenv("HF_TOKEN", secret)

    def failing(**kwargs):
        raise ConnectionError(f"401 for token {kwargs['token']}\nmore")

    with pytest.raises(FetchError) as info:
        list(iter_hub_documents(HUB_CORPORA["bc"], None, offline=True, load_dataset=failing))
    assert secret not in str(info.value)
    assert "local datasets cache (offline)" in str(info.value)


def test_local_formats(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": "one"}\n\n{"text": "two", "x": 1}\n')
    with gzip.open(tmp_path / "b.json.gz", "wt") as handle:
        json.dump([{"body": "three"}, {"body": "four"}], handle)
    (tmp_path / "c.txt").write_text("five\nsix\n\nseven\n")
    (tmp_path / "ignored.csv").write_text("x")
    assert list(iter_local_documents(tmp_path / "a.jsonl")) == ["one", "two"]
    assert list(iter_local_documents(tmp_path / "b.json.gz", text_field="body")) == ["three", "four"]
    assert list(iter_local_documents(tmp_path / "c.txt")) == ["five", "six", "", "seven"]
    assert list(iter_local_documents(tmp_path / "c.txt", text_unit="paragraph")) == ["five\nsix", "seven"]
    assert list(iter_local_documents(tmp_path / "c.txt", text_unit="file")) == ["five\nsix\n\nseven\n"]
    with pytest.raises(FetchError, match="no string field 'text'"):
        list(iter_local_documents(tmp_path))  # b.json.gz has no "text"


def test_local_errors(tmp_path):
    with pytest.raises(FetchError, match="does not exist"):
        list(iter_local_documents(tmp_path / "missing"))
    with pytest.raises(FetchError, match="no .jsonl"):
        list(iter_local_documents(tmp_path))
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{broken\n')
    with pytest.raises(FetchError, match="bad.jsonl:2: not valid JSON"):
        list(iter_local_documents(tmp_path / "bad.jsonl"))
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(FetchError, match="not UTF-8"):
        list(iter_local_documents(tmp_path / "latin.txt"))


def test_document_limits():
    from tprimat.data.pipeline import PrepareOptions, _max_documents

    assert _max_documents(PrepareOptions(model="m", dataset="c4")) == 1_000_000
    assert _max_documents(PrepareOptions(model="m", dataset="bc")) == 10_000_000
    assert _max_documents(PrepareOptions(model="m", dataset="bc", max_documents=5)) == 5
    assert _max_documents(PrepareOptions(model="m", input="x.jsonl")) is None
