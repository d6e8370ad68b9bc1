"""A small deterministic corpus and tiny BPE tokenizers saved in Hugging Face format (offline)."""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = (
    "the of and to in a is that for it as was with be by on not he i this are or his from at "
    "which but have an they you were her she there been one all we their has would when if "
    "so what more about them will no can said could time out into than some other up may "
    "café naïve résumé über straße 東京 データ γλώσσα мир"
).split()


def make_documents(count: int = 300, seed: int = 7) -> list[str]:
    """Deterministic documents of varied length, with multi-byte characters."""
    rng = random.Random(seed)
    documents = []
    for _ in range(count):
        sentences = []
        for _ in range(rng.randint(1, 6)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(3, 18))]
            sentences.append(" ".join(words).capitalize() + rng.choice(".!?"))
        documents.append(" ".join(sentences))
    return documents


def train_tokenizer(
    directory: Path,
    documents: list[str],
    *,
    vocab_size: int = 600,
    bos: str | None = "<|begin_of_text|>",
    eos: str = "<|end_of_text|>",
    extra_special_tokens: int = 0,
) -> Path:
    """A byte-level BPE tokenizer in Hugging Face format, made as `tprimat make-tokenizer` makes one."""
    from tprimat.data.tokenizer import train_tokenizer as train

    return train(
        directory, documents, vocab_size=vocab_size, bos=bos, eos=eos, extra_special_tokens=extra_special_tokens
    )


def write_jsonl(path: Path, documents: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for text in documents:
            handle.write(json.dumps({"text": text, "id": len(text)}, ensure_ascii=False) + "\n")
    return path
