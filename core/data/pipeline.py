"""``prepare``: fetch → clean → tokenize → write → verify → fingerprint, each step resumable.

Layout under the output directory (``data/`` by default)::

    <dataset>/<family>/
        raw/documents.jsonl         fetched documents, one {"text": ...} per line
        raw/step.json               what was fetched, from where, and the file's sha256
        clean/documents.jsonl       documents that passed the filters
        clean/step.json             filter settings and what each filter dropped
        tokenized/parts-<key>/      per-chunk token parts while tokenizing (removed after write)
        tokenized/<dataset>_text_document.bin / .idx   the Megatron indexed dataset
        tokenized/step.json         the inputs the data was made from
        tokenizer/                  a copy of the tokenizer files used
        dataset.json                counts, fingerprint, provenance (read by load_prepared)

``<family>`` is the model family (``llama``, ``qwen2``) when the model's own
tokenizer is used, and ``<family>-tok<8 hex>`` (from the tokenizer fingerprint)
for any other tokenizer, so token ids of two tokenizers never share a directory.

Every step records the digest of its inputs in its ``step.json``; a re-run
skips a step whose record matches and whose output is present, and redoes it
(and everything after it) otherwise.  Tokenizing keeps finished chunks across
an interruption.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from tprimat.data.clean import CleanOptions, CleanStats, clean_documents
from tprimat.data.tokenizer import sha256_file
from tprimat.errors import TprimatError

if TYPE_CHECKING:
    from tprimat.contract.plans import PreparedDataset
    from tprimat.data.tokenizer import TokenizerInfo
    from tprimat.settings.models import ModelSpec

STEPS = ("fetch", "clean", "tokenize", "write", "verify", "fingerprint")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class PrepareError(TprimatError):
    """Data preparation that cannot go on."""


@attrs.frozen(kw_only=True)
class PrepareOptions:
    """Everything ``tprimat prepare-data`` is asked to do."""

    model: str
    dataset: str | None = None  # a key of HUB_CORPORA (bc, c4)
    input: Path | None = None  # a local file or directory
    name: str | None = None  # dataset directory name (default: the corpus key or input stem)
    tokenizer: str | None = None  # default: the model's own
    max_documents: int | None = None
    output: Path = Path("data")
    workers: int = 1
    clean: CleanOptions = attrs.Factory(CleanOptions)
    text_field: str = "text"
    text_unit: str = "line"
    chunk_documents: int = 4096

    def __attrs_post_init__(self) -> None:
        if (self.dataset is None) == (self.input is None):
            raise PrepareError("give exactly one of a hub dataset (bc, c4) or a local input path")
        if self.max_documents is not None and self.max_documents < 1:
            raise PrepareError("max_documents must be at least 1")
        if self.chunk_documents < 1:
            raise PrepareError("chunk_documents must be at least 1")

    def dataset_name(self) -> str:
        if self.name:
            name = self.name
        elif self.dataset:
            name = self.dataset
        else:
            assert self.input is not None
            stem = Path(self.input).name
            for suffix in (".gz", ".jsonl", ".json", ".parquet", ".txt", ".ndjson", ".text"):
                stem = stem.removesuffix(suffix)
            name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._") or "input"
        if not _NAME.match(name):
            raise PrepareError(f"dataset name {name!r} must be letters, digits, '.', '_' or '-'")
        return name


class Reporter:
    """Receives progress; the CLI shows it, tests record it.  The base class ignores it all."""

    def step(self, name: str, status: str, detail: str = "") -> None:
        """``status`` is ``start``, ``done`` or ``skipped``."""

    def documents_done(self, step: str, documents: int) -> None:
        """Running count of documents written by ``fetch`` or ``clean`` (every 10,000)."""

    def tokenize_start(self, total_documents: int) -> None:
        pass

    def tokenize_advance(self, documents: int, tokens: int) -> None:
        pass

    def tokenize_end(self) -> None:
        pass


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _read_step(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / "step.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_step(directory: Path, record: dict[str, Any]) -> None:
    from tprimat.atomic import atomic_write_text

    record = {**record, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_text(directory / "step.json", json.dumps(record, indent=2, sort_keys=True) + "\n")


def _write_jsonl(path: Path, texts: Iterable[str], progress: Callable[[int], None] | None = None) -> tuple[int, str]:
    """Write documents as JSON lines atomically; (count, sha256 of the file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    digest = hashlib.sha256()
    count = 0
    with open(tmp, "wb") as handle:
        for text in texts:
            line = (json.dumps({"text": text}, ensure_ascii=False) + "\n").encode("utf-8")
            digest.update(line)
            handle.write(line)
            count += 1
            if progress is not None and count % 10_000 == 0:
                progress(count)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return count, digest.hexdigest()


def _iter_jsonl(path: Path) -> Iterable[str]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)["text"]


def _output_ok(directory: Path, record: dict[str, Any], key: str, file: Path) -> bool:
    return record.get("inputs_digest") == key and file.is_file() and file.stat().st_size == record.get("bytes")


def _source_description(options: PrepareOptions) -> dict[str, Any]:
    from tprimat.data.fetch import HUB_CORPORA, hub_load_arguments, local_files

    if options.dataset is not None:
        corpus = HUB_CORPORA.get(options.dataset)
        if corpus is None:
            raise PrepareError(
                f"unknown dataset {options.dataset!r}; known: {', '.join(sorted(HUB_CORPORA))} "
                "(or use a local input path)"
            )
        arguments = hub_load_arguments(corpus, offline=False)
        arguments.pop("streaming")
        return {"kind": "hub", "corpus": corpus.key, "load_dataset": arguments}
    assert options.input is not None
    root = Path(options.input).expanduser().resolve()
    files = [
        {
            "path": (p.relative_to(root).as_posix() if root.is_dir() else p.name),
            "bytes": p.stat().st_size,
            "sha256": sha256_file(p),
        }
        for p in local_files(root)
    ]
    return {
        "kind": "local",
        "path": str(root),
        "files": files,
        "text_field": options.text_field,
        "text_unit": options.text_unit,
    }


def _documents(options: PrepareOptions) -> Iterable[str]:
    from tprimat.data.fetch import HUB_CORPORA, iter_hub_documents, iter_local_documents

    if options.dataset is not None:
        corpus = HUB_CORPORA[options.dataset]
        yield from iter_hub_documents(corpus, _max_documents(options))
        return
    assert options.input is not None
    documents = iter_local_documents(
        Path(options.input).expanduser().resolve(),
        text_field=options.text_field,
        text_unit=options.text_unit,
    )
    for count, text in enumerate(documents):
        if options.max_documents is not None and count >= options.max_documents:
            return
        yield text


def _max_documents(options: PrepareOptions) -> int | None:
    """The document limit: as asked, else the hub corpus's default, else all."""
    from tprimat.data.fetch import HUB_CORPORA

    if options.max_documents is not None or options.dataset is None:
        return options.max_documents
    return HUB_CORPORA[options.dataset].default_documents


def dataset_directory(options: PrepareOptions, model: ModelSpec, tokenizer_info: TokenizerInfo) -> Path:
    """``<output>/<dataset>/<family>`` (see the module docstring)."""
    family = model.family
    default = model.tokenizer
    if options.tokenizer and options.tokenizer != default:
        family = f"{family}-tok{tokenizer_info.fingerprint[:8]}"
    return Path(options.output) / options.dataset_name() / family


def _fetch(options: PrepareOptions, raw_dir: Path, reporter: Reporter) -> dict[str, Any]:
    """Step 1: the source's documents as JSON lines (skipped when the same source was fetched)."""
    source = _source_description(options)
    max_documents = _max_documents(options)
    fetch_key = _digest({"source": source, "max_documents": max_documents})
    raw_file = raw_dir / "documents.jsonl"
    record = _read_step(raw_dir)
    if _output_ok(raw_dir, record, fetch_key, raw_file):
        reporter.step("fetch", "skipped", f"{record['documents']} documents already fetched")
        return record
    reporter.step("fetch", "start")
    count, digest = _write_jsonl(raw_file, _documents(options), lambda n: reporter.documents_done("fetch", n))
    if count == 0:
        raise PrepareError("the source yielded no documents")
    record = {
        "step": "fetch",
        "inputs_digest": fetch_key,
        "source": source,
        "max_documents": max_documents,
        "documents": count,
        "bytes": raw_file.stat().st_size,
        "sha256": digest,
    }
    _write_step(raw_dir, record)
    reporter.step("fetch", "done", f"{count} documents")
    return record


def _clean(
    options: PrepareOptions, fetched: dict[str, Any], raw_dir: Path, clean_dir: Path, reporter: Reporter
) -> dict[str, Any]:
    """Step 2: the documents the filters keep (skipped when the same documents were cleaned alike)."""
    clean_key = _digest({"raw": fetched["sha256"], "clean": options.clean.to_dict()})
    clean_file = clean_dir / "documents.jsonl"
    record = _read_step(clean_dir)
    if _output_ok(clean_dir, record, clean_key, clean_file):
        reporter.step("clean", "skipped", f"{record['stats']['kept']} documents already clean")
        return record
    reporter.step("clean", "start")
    stats = CleanStats()
    count, digest = _write_jsonl(
        clean_file,
        clean_documents(_iter_jsonl(raw_dir / "documents.jsonl"), options.clean, stats),
        lambda n: reporter.documents_done("clean", n),
    )
    if count == 0:
        raise PrepareError(f"every document was dropped by the filters: {stats.dropped}")
    record = {
        "step": "clean",
        "inputs_digest": clean_key,
        "options": options.clean.to_dict(),
        "stats": stats.to_dict(),
        "bytes": clean_file.stat().st_size,
        "sha256": digest,
    }
    _write_step(clean_dir, record)
    dropped = ", ".join(f"{k} {v}" for k, v in stats.dropped.items() if v) or "none"
    reporter.step("clean", "done", f"kept {stats.kept} of {stats.read}; dropped: {dropped}")
    return record


def _tokenize(
    options: PrepareOptions,
    cleaned: dict[str, Any],
    clean_dir: Path,
    tok_dir: Path,
    prefix: Path,
    info: TokenizerInfo,
    dtype: str,
    reporter: Reporter,
) -> tuple[dict[str, Any], bool]:
    """Steps 3 and 4: tokenize in resumable parts and write the ``.bin``/``.idx`` pair.

    Returns the step's record and whether it was already done (skipped).
    """
    from tprimat.data.indexed import bin_path, idx_path
    from tprimat.data.tokenize import tokenize_to_parts, write_parts

    documents_expected = int(cleaned["stats"]["kept"])
    token_key = _digest(
        {
            "clean": cleaned["sha256"],
            "tokenizer": info.fingerprint,
            "dtype": dtype,
            "eos_id": info.eos_id,
            "special_tokens": "tokenizer post-processor, then eos",
        }
    )
    record = _read_step(tok_dir)
    if (
        record.get("inputs_digest") == token_key
        and bin_path(prefix).is_file()
        and idx_path(prefix).is_file()
        and bin_path(prefix).stat().st_size == record.get("bin_bytes")
    ):
        reporter.step("tokenize", "skipped", f"{record['tokens']} tokens already made")
        reporter.step("write", "skipped", str(prefix))
        return record, True
    # parts are only valid for the same inputs cut into the same chunks
    parts_key = _digest({"tokens": token_key, "chunk_documents": options.chunk_documents})
    parts_dir = tok_dir / f"parts-{parts_key[:16]}"
    if tok_dir.is_dir():
        for stale in tok_dir.glob("parts-*"):
            if stale != parts_dir:
                shutil.rmtree(stale)
    reporter.step("tokenize", "start")
    reporter.tokenize_start(documents_expected)
    try:
        started = time.perf_counter()
        counts = tokenize_to_parts(
            clean_dir / "documents.jsonl",
            parts_dir,
            tokenizer_json=info.directory / "tokenizer.json",
            eos_id=info.eos_id,
            dtype=dtype,
            workers=options.workers,
            chunk_documents=options.chunk_documents,
            progress=reporter.tokenize_advance,
        )
        seconds = time.perf_counter() - started
    finally:
        reporter.tokenize_end()
    chunks = -(-documents_expected // options.chunk_documents)
    resumed = counts["chunks_resumed"]
    reporter.step("tokenize", "done", f"{chunks} chunks ({resumed} kept from an earlier run) in {seconds:.1f} s")
    reporter.step("write", "start")
    documents, tokens = write_parts(parts_dir, chunks, prefix, dtype)
    if documents != documents_expected:
        raise PrepareError(f"wrote {documents} documents, expected {documents_expected}")
    shutil.rmtree(parts_dir)
    record = {
        "step": "tokenize",
        "inputs_digest": token_key,
        "tokenizer": info.source,
        "tokenizer_fingerprint": info.fingerprint,
        "dtype": dtype,
        "eos_id": info.eos_id,
        "documents": documents,
        "tokens": tokens,
        "bin_bytes": bin_path(prefix).stat().st_size,
        "workers": options.workers,
        "chunk_documents": options.chunk_documents,
        "tokenize_seconds": round(seconds, 3),
    }
    _write_step(tok_dir, record)
    reporter.step("write", "done", f"{documents} documents, {tokens} tokens ({dtype})")
    return record, False


def _verify(
    prefix: Path,
    info: TokenizerInfo,
    tokenizer: Any,
    tokenized: dict[str, Any],
    tok_dir: Path,
    skipped: bool,
    reporter: Reporter,
) -> dict[str, Any]:
    """Step 5: every check of the written pair; a pair changed since it was written says how to remake it."""
    from tprimat.data.indexed import IndexedDatasetError
    from tprimat.data.verify import verify_dataset

    reporter.step("verify", "start")
    try:
        summary = verify_dataset(
            prefix,
            vocab_size=info.vocab_size,
            eos_id=info.eos_id,
            documents=tokenized["documents"],
            tokens=tokenized["tokens"],
            decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
        )
    except IndexedDatasetError as exc:
        raise PrepareError(
            f"{exc} (the data was changed after it was written; remove {tok_dir} to make it again)"
            if skipped
            else str(exc)
        ) from None
    sample = (summary["sample"] or "")[:60]
    reporter.step("verify", "done", f"all checks passed; document 0 begins {sample!r}")
    return summary


def _fingerprint(
    root: Path,
    name: str,
    prefix: Path,
    model: ModelSpec,
    info: TokenizerInfo,
    summary: dict[str, Any],
    fetched: dict[str, Any],
    cleaned: dict[str, Any],
    reporter: Reporter,
) -> None:
    """Step 6: the tokenizer copied beside the data and ``dataset.json`` with the dataset's fingerprint."""
    from tprimat import __version__
    from tprimat.data.prepared import write_dataset_json
    from tprimat.data.tokenizer import copy_tokenizer
    from tprimat.data.verify import fingerprint_inputs, fingerprint_of

    reporter.step("fingerprint", "start")
    copy_tokenizer(info, root / "tokenizer")
    inputs = fingerprint_inputs(
        prefix,
        info.file_hashes,
        documents=summary["documents"],
        tokens=summary["tokens"],
        dtype=summary["dtype"],
    )
    fingerprint = fingerprint_of(inputs)
    write_dataset_json(
        root,
        {
            "name": name,
            "model": model.name,
            "model_family": model.family,
            "path_prefix": prefix.relative_to(root).as_posix(),
            "tokenizer": "tokenizer",
            "tokenizer_source": info.source,
            "tokenizer_fingerprint": info.fingerprint,
            "eos_id": info.eos_id,
            "eos_token": info.eos_token,
            "vocab_size": info.vocab_size,
            "dtype": summary["dtype"],
            "documents": summary["documents"],
            "tokens": summary["tokens"],
            "fingerprint": fingerprint,
            "fingerprint_inputs": inputs,
            "source": fetched["source"],
            "max_documents": fetched["max_documents"],
            "clean": {"options": cleaned["options"], "stats": cleaned["stats"]},
            "sample": summary["sample"],
            "created_by": f"tprimat {__version__}",
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    )
    reporter.step("fingerprint", "done", fingerprint)


def prepare(options: PrepareOptions, reporter: Reporter | None = None) -> PreparedDataset:
    """Run the pipeline; returns the :class:`~tprimat.contract.plans.PreparedDataset` it made."""
    from tprimat.data.indexed import token_dtype_for_vocab
    from tprimat.data.prepared import load_prepared
    from tprimat.data.tokenizer import load_tokenizer
    from tprimat.settings.models import UnknownModelError, get_model

    reporter = reporter or Reporter()
    for module in ("numpy", "tokenizers"):
        if importlib.util.find_spec(module) is None:
            raise PrepareError(f"prepare-data needs {module}: pip install 'tprimat[data]'")
    try:
        model = get_model(options.model)
    except UnknownModelError as exc:
        raise PrepareError(str(exc)) from None
    tokenizer_source = options.tokenizer or model.tokenizer
    if not tokenizer_source:
        raise PrepareError(f"model {model.name} names no tokenizer; pass one with --tokenizer")
    tokenizer, info = load_tokenizer(tokenizer_source)
    if info.vocab_size > model.vocab_size:
        raise PrepareError(
            f"tokenizer {tokenizer_source} has {info.vocab_size} tokens but {model.name} embeds "
            f"only {model.vocab_size}; use a tokenizer with at most {model.vocab_size} tokens"
        )
    dtype = token_dtype_for_vocab(info.vocab_size)
    root = dataset_directory(options, model, info)
    name = options.dataset_name()
    raw_dir, clean_dir, tok_dir = root / "raw", root / "clean", root / "tokenized"
    prefix = tok_dir / f"{name}_text_document"

    fetched = _fetch(options, raw_dir, reporter)
    cleaned = _clean(options, fetched, raw_dir, clean_dir, reporter)
    tokenized, skipped = _tokenize(options, cleaned, clean_dir, tok_dir, prefix, info, dtype, reporter)
    summary = _verify(prefix, info, tokenizer, tokenized, tok_dir, skipped, reporter)
    _fingerprint(root, name, prefix, model, info, summary, fetched, cleaned, reporter)
    return load_prepared(root)
