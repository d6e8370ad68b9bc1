"""Where documents come from: Hugging Face hub corpora or local files.

Hub corpora are read with ``datasets.load_dataset(..., streaming=True)`` so
that only the requested number of documents is downloaded.  With
``HF_DATASETS_OFFLINE=1`` (or ``HF_HUB_OFFLINE=1``) the same call is made
without streaming, which makes ``datasets`` read its local cache.  ``HF_TOKEN``
(environment or ``.tprimat.env``) is passed as ``token=`` and never written.

Local input is a file or a directory (read recursively, in sorted order) of
JSON lines (``.jsonl``, ``.json``, optionally ``.gz``), Parquet (``.parquet``)
or plain text (``.txt``, optionally ``.gz``).  JSON lines and Parquet take the
document from ``text_field``; plain text is split into documents by line, by
blank-line-separated paragraph, or one document per file.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import attrs

from tprimat.errors import TprimatError


class FetchError(TprimatError):
    """Documents that cannot be read."""


@attrs.frozen(kw_only=True)
class HubCorpus:
    """A corpus on the Hugging Face hub and exactly how ``datasets`` loads it."""

    key: str
    path: str
    name: str | None
    split: str
    text_field: str
    default_documents: int  # read this many unless --max-documents says otherwise
    revision: str | None = None
    description: str = ""


#: The built-in corpora (``--dataset``).  BookCorpus is read from the hub's Parquet
#: export of its repository (recent ``datasets`` no longer run loading scripts).
HUB_CORPORA: dict[str, HubCorpus] = {
    "bc": HubCorpus(
        key="bc",
        path="bookcorpus/bookcorpus",
        name=None,
        split="train",
        text_field="text",
        default_documents=10_000_000,  # about 150M Llama 3 tokens
        revision="refs/convert/parquet",
        description="BookCorpus (one row per sentence-split line of a book)",
    ),
    "c4": HubCorpus(
        key="c4",
        path="allenai/c4",
        name="en",
        split="train",
        text_field="text",
        default_documents=1_000_000,  # about 500M Llama 3 tokens
        description="C4 English (Colossal Clean Crawled Corpus, one row per web page)",
    ),
}

TEXT_UNITS = ("line", "paragraph", "file")
_JSON_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".ndjson")
_TEXT_SUFFIXES = (".txt", ".txt.gz", ".text")
_PARQUET_SUFFIXES = (".parquet",)


def datasets_offline() -> bool:
    flags = (os.environ.get("HF_DATASETS_OFFLINE", ""), os.environ.get("HF_HUB_OFFLINE", ""))
    return any(flag.strip().lower() in {"1", "true", "yes", "on"} for flag in flags)


def hub_load_arguments(corpus: HubCorpus, *, offline: bool) -> dict[str, Any]:
    """The keyword arguments tprimat passes to ``datasets.load_dataset`` (without the token)."""
    arguments: dict[str, Any] = {
        "path": corpus.path,
        "name": corpus.name,
        "split": corpus.split,
        "streaming": not offline,
    }
    if corpus.revision:
        arguments["revision"] = corpus.revision
    return arguments


def iter_hub_documents(
    corpus: HubCorpus,
    max_documents: int | None,
    *,
    offline: bool | None = None,
    load_dataset: Callable[..., Any] | None = None,
) -> Iterator[str]:
    """Documents of a hub corpus, at most ``max_documents`` of them."""
    from tprimat.secrets import get_secret, redact_text

    offline = datasets_offline() if offline is None else offline
    if load_dataset is None:
        load_dataset = _datasets_loader()
    arguments = hub_load_arguments(corpus, offline=offline)
    token = get_secret("HF_TOKEN")
    if token:
        arguments["token"] = token
    try:
        dataset = load_dataset(**arguments)
        count = 0
        for row in dataset:
            if max_documents is not None and count >= max_documents:
                break
            text = row.get(corpus.text_field)
            if isinstance(text, str):
                count += 1
                yield text
    except FetchError:
        raise
    except Exception as exc:  # noqa: BLE001 - datasets/hub raise many types; keep the message
        where = "the local datasets cache (offline)" if offline else "the hub"
        message = redact_text(str(exc)).splitlines()[0] if str(exc) else type(exc).__name__
        raise FetchError(f"cannot read {corpus.path} from {where}: {message}") from None


def _datasets_loader() -> Callable[..., Any]:
    """``datasets.load_dataset``, or a :class:`FetchError` that says how to install it."""
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise FetchError("reading a hub corpus needs the `datasets` package: pip install 'tprimat[data]'") from exc
    return load_dataset


def local_files(path: Path) -> list[Path]:
    """The input files under ``path`` in a stable order (sorted relative paths)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FetchError(f"input {path} does not exist")
    suffixes = _JSON_SUFFIXES + _TEXT_SUFFIXES + _PARQUET_SUFFIXES
    files = sorted(
        (p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith(suffixes)),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    if not files:
        raise FetchError(f"no .jsonl, .json, .parquet or .txt files under {path}")
    return files


def _open_text(path: Path) -> TextIO:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="strict", newline="")
    return open(path, encoding="utf-8", errors="strict", newline="")  # noqa: SIM115


def _iter_json_lines(path: Path, text_field: str) -> Iterator[str]:
    with _open_text(path) as handle:
        first = handle.read(1)
        handle.seek(0)
        if first == "[":  # a JSON array of records
            records = json.load(handle)
            for i, record in enumerate(records):
                yield _field(record, text_field, path, i + 1)
            return
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise FetchError(f"{path}:{number}: not valid JSON ({exc})") from None
            yield _field(record, text_field, path, number)


def _field(record: Any, text_field: str, path: Path, number: int) -> str:
    if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
        raise FetchError(f"{path}:{number}: record has no string field {text_field!r}")
    return record[text_field]


def _iter_parquet(path: Path, text_field: str) -> Iterator[str]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise FetchError("reading Parquet needs pyarrow: pip install 'tprimat[data]'") from exc
    parquet = pq.ParquetFile(path)
    if text_field not in parquet.schema_arrow.names:
        raise FetchError(f"{path}: no column {text_field!r} (columns: {', '.join(parquet.schema_arrow.names)})")
    for batch in parquet.iter_batches(columns=[text_field], batch_size=8192):
        for text in batch.column(0).to_pylist():
            if isinstance(text, str):
                yield text


def _iter_text(path: Path, unit: str) -> Iterator[str]:
    with _open_text(path) as handle:
        if unit == "file":
            yield handle.read()
        elif unit == "line":
            for line in handle:
                yield line.rstrip("\r\n")
        else:
            paragraph: list[str] = []
            for line in handle:
                if line.strip():
                    paragraph.append(line.rstrip("\r\n"))
                elif paragraph:
                    yield "\n".join(paragraph)
                    paragraph = []
            if paragraph:
                yield "\n".join(paragraph)


def iter_local_documents(path: Path, *, text_field: str = "text", text_unit: str = "line") -> Iterator[str]:
    """Documents from local files (see the module docstring for the formats)."""
    if text_unit not in TEXT_UNITS:
        raise FetchError(f"text unit must be one of {', '.join(TEXT_UNITS)}, got {text_unit!r}")
    for file in local_files(path):
        name = file.name.lower()
        try:
            if name.endswith(_PARQUET_SUFFIXES):
                yield from _iter_parquet(file, text_field)
            elif name.endswith(_JSON_SUFFIXES):
                yield from _iter_json_lines(file, text_field)
            else:
                yield from _iter_text(file, text_unit)
        except UnicodeDecodeError as exc:
            raise FetchError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
