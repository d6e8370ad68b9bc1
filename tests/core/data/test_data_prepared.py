"""load_prepared: the dataset.json contract other parts of tprimat rely on."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tprimat.contract.plans import PreparedDataset
from tprimat.data import PreparedDatasetError, load_prepared
from tprimat.data.indexed import IndexedWriter
from tprimat.errors import TprimatError


def make(tmp_path, **changes):
    root = tmp_path / "ds"
    (root / "tokenizer").mkdir(parents=True)
    with IndexedWriter(root / "tokenized" / "x_text_document", "uint16") as writer:
        writer.add_document(np.array([4, 5, 2]))
    body = {
        "format": "tprimat-dataset",
        "version": 1,
        "path_prefix": "tokenized/x_text_document",
        "tokenizer": "tokenizer",
        "fingerprint": "sha256:" + "ab" * 32,
        "documents": 1,
        "tokens": 3,
        "vocab_size": 4096,
    }
    body.update(changes)
    body = {k: v for k, v in body.items() if v is not None}
    (root / "dataset.json").write_text(json.dumps(body))
    return root


def test_loads_directory_or_file(tmp_path):
    root = make(tmp_path)
    prepared = load_prepared(root)
    assert isinstance(prepared, PreparedDataset)
    assert prepared.path_prefix == (root / "tokenized" / "x_text_document").resolve()
    assert prepared.tokenizer == str((root / "tokenizer").resolve())
    assert (prepared.documents, prepared.tokens, prepared.vocab_size) == (1, 3, 4096)
    assert load_prepared(root / "dataset.json") == prepared


def test_hub_tokenizer_id_is_kept(tmp_path):
    root = make(tmp_path, tokenizer="meta-llama/Llama-3.1-8B")
    assert load_prepared(root).tokenizer == "meta-llama/Llama-3.1-8B"


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"format": "other"}, "not a tprimat dataset"),
        ({"version": 9}, "format version 9"),
        ({"documents": "1"}, "'documents' must be a int"),
        ({"tokens": None}, "'tokens' must be a int"),
        ({"fingerprint": "md5:00"}, "not a sha256"),
        ({"path_prefix": "tokenized/missing"}, "missing.bin is missing"),
    ],
)
def test_invalid_descriptions(tmp_path, changes, message):
    root = make(tmp_path, **changes)
    with pytest.raises(PreparedDatasetError, match=message):
        load_prepared(root)


def test_missing_and_broken(tmp_path):
    with pytest.raises(TprimatError, match="does not exist"):
        load_prepared(tmp_path / "nowhere")
    with pytest.raises(TprimatError, match="no dataset.json"):
        load_prepared(tmp_path)
    (tmp_path / "dataset.json").write_text("{not json")
    with pytest.raises(TprimatError, match="not valid JSON"):
        load_prepared(tmp_path)


def test_model_compatibility(tmp_path):
    from tprimat.data import check_model_compatibility
    from tprimat.settings.models import get_model

    root = make(tmp_path, model_family="qwen2", tokenizer_source="Qwen/Qwen2.5-7B", vocab_size=151665)
    check_model_compatibility(root, "qwen2.5-7b")
    with pytest.raises(PreparedDatasetError, match="tokenized for the qwen2 family"):
        check_model_compatibility(root, get_model("llama3.1-8b"))
    with pytest.raises(PreparedDatasetError, match="151665 tokens, more than the 4096"):
        check_model_compatibility(root, "qwen2.5-tiny")
    with pytest.raises(PreparedDatasetError, match="unknown model"):
        check_model_compatibility(root, "gpt-9")
