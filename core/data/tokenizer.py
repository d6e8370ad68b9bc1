"""Find, load and fingerprint a Hugging Face tokenizer (fast ``tokenizer.json`` format).

A tokenizer is a directory holding ``tokenizer.json`` (and usually
``tokenizer_config.json`` / ``special_tokens_map.json``), or a Hugging Face
hub id whose tokenizer files are downloaded into the hub cache (``HF_TOKEN``
from the environment or ``.tprimat.env`` is used for gated repos and is never
written anywhere).  Tokens are made by the ``tokenizers`` library with the
tokenizer's own post-processor, exactly as ``AutoTokenizer(text).input_ids``
(and so Megatron-LM's ``HuggingFaceTokenizer``) makes them; the end-of-text
token is appended by the caller.

:func:`train_tokenizer` makes a small byte-level BPE tokenizer from a corpus, offline, in the
same format (``tprimat make-tokenizer``): what the tiny models need on a laptop or in CI,
where the models' own tokenizers are too large or gated.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from tprimat.errors import TprimatError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

#: Files that define a tokenizer's behaviour; all that exist are copied and fingerprinted.
TOKENIZER_FILES: tuple[str, ...] = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)


class TokenizerError(TprimatError):
    """A tokenizer that cannot be found or used."""


@attrs.frozen(kw_only=True)
class TokenizerInfo:
    """A loaded tokenizer's identity: where it is, what it appends, how big its vocabulary is."""

    source: str  # what the user named: a directory or a hub id
    directory: Path
    files: tuple[str, ...]  # file names present in ``directory``, sorted
    eos_token: str
    eos_id: int
    vocab_size: int  # including added (special) tokens
    file_hashes: dict[str, str]  # name -> sha256

    @property
    def fingerprint(self) -> str:
        """sha256 over the tokenizer files (names and contents)."""
        digest = hashlib.sha256()
        for name in sorted(self.file_hashes):
            digest.update(f"{name}\0{self.file_hashes[name]}\n".encode())
        return digest.hexdigest()


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def resolve_tokenizer_dir(source: str) -> Path:
    """A local directory holding the tokenizer files of ``source`` (a path or a hub id)."""
    path = Path(source).expanduser()
    if path.is_file() and path.name == "tokenizer.json":
        path = path.parent
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise TokenizerError(
                f"tokenizer directory {path} has no tokenizer.json (a fast Hugging Face "
                "tokenizer is needed; save it with tokenizer.save_pretrained(DIR))"
            )
        return path
    if path.exists() or source.startswith((".", "/", "~")) or source.count("/") != 1:
        raise TokenizerError(f"tokenizer {source!r} is neither a directory nor a hub id (org/name)")
    return _download_tokenizer(source)


def _download_tokenizer(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - huggingface_hub comes with tokenizers
        raise TokenizerError("huggingface_hub is needed to fetch a tokenizer by hub id") from exc
    from tprimat.secrets import get_secret

    try:
        directory = snapshot_download(
            repo_id=repo_id,
            allow_patterns=list(TOKENIZER_FILES),
            token=get_secret("HF_TOKEN") or None,
            local_files_only=hub_offline(),
        )
    except Exception as exc:  # noqa: BLE001 - hub errors have many types; keep the message
        from tprimat.secrets import redact_text

        hint = (
            " (offline: HF_HUB_OFFLINE is set and the tokenizer is not in the local cache)"
            if hub_offline()
            else " (gated models need HF_TOKEN in the environment or .tprimat.env)"
        )
        raise TokenizerError(
            f"cannot get tokenizer {repo_id!r}: {redact_text(str(exc)).splitlines()[0]}{hint}"
        ) from None
    path = Path(directory)
    if not (path / "tokenizer.json").is_file():
        raise TokenizerError(f"hub repo {repo_id!r} has no tokenizer.json")
    return path


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_tokenizer(source: str | Path) -> tuple[Tokenizer, TokenizerInfo]:
    """Load ``source`` and return ``(tokenizers.Tokenizer, TokenizerInfo)``."""
    from tokenizers import Tokenizer

    directory = resolve_tokenizer_dir(str(source))
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    eos = None
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        eos = _token_text(_read_json(directory / name).get("eos_token"))
        if eos:
            break
    if not eos:
        raise TokenizerError(
            f"tokenizer {source}: no eos_token in tokenizer_config.json or "
            "special_tokens_map.json; documents need an end-of-text token"
        )
    eos_id = tokenizer.token_to_id(eos)
    if eos_id is None:
        raise TokenizerError(f"tokenizer {source}: eos_token {eos!r} is not in its vocabulary")
    files = tuple(sorted(n for n in TOKENIZER_FILES if (directory / n).is_file()))
    info = TokenizerInfo(
        source=str(source),
        directory=directory,
        files=files,
        eos_token=eos,
        eos_id=int(eos_id),
        vocab_size=int(tokenizer.get_vocab_size(with_added_tokens=True)),
        file_hashes={n: sha256_file(directory / n) for n in files},
    )
    return tokenizer, info


def copy_tokenizer(info: TokenizerInfo, destination: Path) -> None:
    """Copy the tokenizer files next to the data so the dataset is self-contained."""
    destination.mkdir(parents=True, exist_ok=True)
    for stale in destination.iterdir():
        if stale.is_file() and stale.name not in info.files:
            stale.unlink()
    for name in info.files:
        target = destination / name
        if target.is_file() and sha256_file(target) == info.file_hashes[name]:
            continue
        tmp = destination / f".{name}.tmp"
        shutil.copyfile(info.directory / name, tmp)
        os.replace(tmp, target)


#: Special tokens of a model family: (beginning-of-text added in front of every document or None, end-of-text).
FAMILY_SPECIAL_TOKENS: dict[str, tuple[str | None, str]] = {
    "llama": ("<|begin_of_text|>", "<|end_of_text|>"),
    "qwen2": (None, "<|endoftext|>"),
}


def train_tokenizer(
    directory: Path,
    documents: Iterable[str],
    *,
    vocab_size: int,
    bos: str | None = "<|begin_of_text|>",
    eos: str = "<|end_of_text|>",
    extra_special_tokens: int = 0,
) -> Path:
    """Train a byte-level BPE tokenizer on ``documents`` and save it in ``directory`` (Hugging Face fast format).

    At most ``vocab_size`` tokens, the special ones included (a small corpus gives fewer: no
    merge is left).  ``bos``, when given, is put in front of every document by the
    post-processor, as Llama 3's tokenizer does; ``eos`` is what the data pipeline appends.
    Deterministic: the same documents give the same files.
    """
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    except ImportError:
        raise TokenizerError("training a tokenizer needs the tokenizers package: pip install 'tprimat[data]'") from None

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = [token for token in (bos, eos) if token]
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
    config: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "model_max_length": 2048}
    if bos:
        config["bos_token"] = bos
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (directory / "special_tokens_map.json").write_text(json.dumps({"eos_token": eos}))
    return directory
