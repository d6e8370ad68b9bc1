"""Fixtures for the data tests: a small corpus and tiny tokenizers, made offline per session."""

from __future__ import annotations

from pathlib import Path

import pytest

try:  # the `data` extra; without it these tests are not collected
    import numpy  # noqa: F401
    import tokenizers  # noqa: F401
except ImportError:
    collect_ignore_glob = ["test_*.py"]
else:
    from tiny_corpus import make_documents, train_tokenizer


@pytest.fixture(scope="session")
def documents() -> list[str]:
    return make_documents()


@pytest.fixture(scope="session")
def llama_like_tokenizer(tmp_path_factory, documents) -> Path:
    """BOS added by the post-processor, like Llama 3."""
    return train_tokenizer(tmp_path_factory.mktemp("tok_llama"), documents)


@pytest.fixture(scope="session")
def qwen_like_tokenizer(tmp_path_factory, documents) -> Path:
    """No BOS, EOS ``<|endoftext|>``, like Qwen 2.5."""
    return train_tokenizer(
        tmp_path_factory.mktemp("tok_qwen"),
        documents,
        vocab_size=500,
        bos=None,
        eos="<|endoftext|>",
    )


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Nothing in these tests may reach a hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
