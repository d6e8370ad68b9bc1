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
    """Train a byte-level BPE tokenizer and save it as a Hugging Face fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = [t for t in (bos, eos) if t]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(documents, trainer=trainer)
    if extra_special_tokens:
        tokenizer.add_special_tokens([f"<|reserved_{i}|>" for i in range(extra_special_tokens)])
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A",
            pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, tokenizer.token_to_id(bos))],
        )
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "model_max_length": 2048}
    if bos:
        config["bos_token"] = bos
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (directory / "special_tokens_map.json").write_text(json.dumps({"eos_token": eos}))
    return directory


def write_jsonl(path: Path, documents: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for text in documents:
            handle.write(json.dumps({"text": text, "id": len(text)}, ensure_ascii=False) + "\n")
    return path
