"""``tprimat prepare-data``: a real corpus to a fingerprinted Megatron indexed dataset."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tprimat.cli.output import echo_json
from tprimat.data.pipeline import Reporter

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID
    from rich.status import Status


class _ConsoleReporter(Reporter):
    """Step lines and a tokenization progress bar (documents, tokens/s) on stderr."""

    def __init__(self, quiet: bool) -> None:
        from tprimat.cli.output import make_console

        self.console = make_console(stderr=True, quiet=quiet)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._tokens = 0
        self._started = 0.0
        self._status: Status | None = None

    def documents_done(self, step: str, documents: int) -> None:
        if self._status is not None:
            self._status.update(f"{step}: {documents:,} documents")

    def step(self, name: str, status: str, detail: str = "") -> None:
        if status == "start":
            if name in ("fetch", "clean"):
                self._status = self.console.status(f"{name}: starting", spinner="dots")
                self._status.start()
            return  # the done/skipped line follows; tokenizing shows a progress bar meanwhile
        if self._status is not None:
            self._status.stop()
            self._status = None
        word = "skipped" if status == "skipped" else "done"
        text = f"[bold]{name:<11}[/bold] {word}"
        self.console.print(text + (f": {detail}" if detail else ""), highlight=False)

    def tokenize_start(self, total_documents: int) -> None:
        import time

        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._tokens = 0
        self._started = time.perf_counter()
        self._progress = Progress(
            TextColumn("tokenize"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("docs"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("tokenize", total=total_documents, rate="")

    def tokenize_advance(self, documents: int, tokens: int) -> None:
        import time

        if self._progress is None or self._task is None:  # set together by tokenize_start
            return
        self._tokens += tokens
        elapsed = max(time.perf_counter() - self._started, 1e-9)
        rate = f"{self._tokens / elapsed:,.0f} tokens/s"
        self._progress.update(self._task, advance=documents, rate=rate)

    def tokenize_end(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def close(self) -> None:
        """Stop any spinner or bar (also when a step fails)."""
        self.tokenize_end()
        if self._status is not None:
            self._status.stop()
            self._status = None


@click.command("prepare-data")
@click.option(
    "--dataset",
    type=click.Choice(["bc", "c4"]),
    help="A hub corpus: bc (BookCorpus) or c4 (C4 English), read with `datasets`.",
)
@click.option(
    "--input",
    "input_path",
    type=click.Path(exists=True, path_type=Path),
    help="A local .jsonl/.json/.parquet/.txt file or a directory of them.",
)
@click.option("--model", help="Model whose tokenizer and vocabulary to use (required).")
@click.option("--tokenizer", help="Tokenizer directory or hub id (default: the model's own).")
@click.option(
    "--max-documents",
    type=click.IntRange(min=1),
    help="Stop after this many source documents (default: all of a local input; 10,000,000 for bc, 1,000,000 for c4).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("data"),
    show_default=True,
    help="Root directory for OUTPUT/<name>/<family>/.",
)
@click.option("--name", help="Dataset directory name (default: bc, c4, or the input's name).")
@click.option(
    "--workers", type=click.IntRange(min=1), default=None, help="Tokenizer processes (default: every CPU core)."
)
@click.option("--text-field", default="text", show_default=True, help="JSON/Parquet field holding the document text.")
@click.option(
    "--text-unit",
    type=click.Choice(["line", "paragraph", "file"]),
    default="line",
    show_default=True,
    help="How plain-text files split into documents.",
)
@click.option(
    "--min-chars",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Drop documents shorter than this many characters.",
)
@click.option(
    "--min-words", type=click.IntRange(min=0), default=1, show_default=True, help="Drop documents with fewer words."
)
@click.option(
    "--normalize",
    type=click.Choice(["NFC", "NFKC", "NFD", "NFKD", "none"]),
    default="NFC",
    show_default=True,
    help="Unicode normalisation before filtering.",
)
@click.option("--dedup/--no-dedup", default=True, show_default=True, help="Drop exact duplicate documents.")
@click.option(
    "--chunk-documents",
    type=click.IntRange(min=1),
    default=4096,
    show_default=True,
    help="Documents per tokenization chunk (the unit of resumption).",
)
@click.option(
    "--check",
    "check_path",
    type=click.Path(path_type=Path),
    help="Only re-verify a prepared dataset directory and recompute its fingerprint.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (no progress).")
def prepare_data(
    check_path: Path | None,
    dataset: str | None,
    input_path: Path | None,
    model: str,
    tokenizer: str | None,
    max_documents: int | None,
    output: Path,
    name: str | None,
    workers: int | None,
    text_field: str,
    text_unit: str,
    min_chars: int,
    min_words: int,
    normalize: str,
    dedup: bool,
    chunk_documents: int,
    as_json: bool,
) -> None:
    """Fetch, clean, tokenize and fingerprint a corpus for MODEL.

    Writes a Megatron indexed dataset (.bin/.idx) and dataset.json to
    OUTPUT/<name>/<family>/; re-running skips finished steps.  Point a benchmark
    at it with `--set data.dataset=OUTPUT/<name>/<family>`.  With --check DIR,
    re-verify a prepared dataset (for example after copying it to another
    machine) and recompute its fingerprint.
    """
    from tprimat.data.clean import CleanOptions
    from tprimat.data.pipeline import PrepareError, PrepareOptions, prepare

    if check_path is not None:
        from tprimat.data import check_prepared

        checked = check_prepared(check_path)
        if as_json:
            echo_json({"ok": True, **checked})
        else:
            click.echo(f"{check_path}: every check passed; fingerprint {checked['fingerprint']}")
        return
    if not model:
        raise PrepareError("--model is required")
    if (dataset is None) == (input_path is None):
        raise PrepareError("give exactly one of --dataset (bc, c4) or --input PATH")
    options = PrepareOptions(
        model=model,
        dataset=dataset,
        input=input_path,
        name=name,
        tokenizer=tokenizer,
        max_documents=max_documents,
        output=output,
        workers=workers or len(os.sched_getaffinity(0)) or 1,
        clean=CleanOptions(normalize=normalize, min_chars=min_chars, min_words=min_words, dedup=dedup),
        text_field=text_field,
        text_unit=text_unit,
        chunk_documents=chunk_documents,
    )
    reporter = _ConsoleReporter(quiet=as_json)
    try:
        prepared = prepare(options, reporter)
    finally:
        reporter.close()
    directory = prepared.path_prefix.parent.parent
    summary = {
        "directory": str(directory),
        "path_prefix": str(prepared.path_prefix),
        "tokenizer": prepared.tokenizer,
        "documents": prepared.documents,
        "tokens": prepared.tokens,
        "vocab_size": prepared.vocab_size,
        "fingerprint": prepared.fingerprint,
    }
    if as_json:
        echo_json(summary)
        return
    from tprimat.cli.output import print_table

    print_table("Prepared dataset", ["field", "value"], list(summary.items()))
    click.echo(f"use it with: --set data.dataset={directory}")


@click.command("make-tokenizer")
@click.option(
    "--input",
    "input_path",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="The corpus to learn from: a local .jsonl/.json/.parquet/.txt file or a directory of them.",
)
@click.option(
    "--model",
    required=True,
    help="The model it is for: its family decides the special tokens, its vocabulary the largest size.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write tokenizer.json, tokenizer_config.json and special_tokens_map.json into.",
)
@click.option(
    "--vocab-size",
    type=click.IntRange(min=1),
    help="Tokens at most, special tokens included (default: the model's vocabulary).",
)
@click.option("--text-field", default="text", show_default=True, help="JSON/Parquet field holding the document text.")
@click.option(
    "--text-unit",
    type=click.Choice(["line", "paragraph", "file"]),
    default="line",
    show_default=True,
    help="How plain-text files split into documents.",
)
@click.option(
    "--max-documents", type=click.IntRange(min=1), help="Learn from the first this many documents (default: all)."
)
def make_tokenizer(
    input_path: Path,
    model: str,
    output: Path,
    vocab_size: int | None,
    text_field: str,
    text_unit: str,
    max_documents: int | None,
) -> None:
    """Train a small byte-level BPE tokenizer for MODEL from a local corpus, offline.

    For the tiny models (llama3.1-tiny, qwen2.5-tiny), whose data needs a
    tokenizer of at most 4096 tokens, and for machines that cannot download
    the models' own (gated) tokenizers.  The result is a Hugging Face fast
    tokenizer directory: give it to `tprimat prepare-data --tokenizer DIR`.
    It is how tprimat's own tests make their tokenizers.
    """
    import itertools

    from tprimat.data.fetch import iter_local_documents
    from tprimat.data.tokenizer import FAMILY_SPECIAL_TOKENS, TokenizerError, load_tokenizer, train_tokenizer
    from tprimat.errors import TprimatError
    from tprimat.settings.models import UnknownModelError, get_model

    try:
        spec = get_model(model)
    except UnknownModelError as exc:
        raise TprimatError(f"--model: {exc}") from None
    size = vocab_size or spec.vocab_size
    if size > spec.vocab_size:
        raise TprimatError(f"--vocab-size {size}: {spec.name} has a vocabulary of {spec.vocab_size} tokens at most")
    bos, eos = FAMILY_SPECIAL_TOKENS.get(spec.family, FAMILY_SPECIAL_TOKENS["llama"])
    documents = itertools.islice(
        iter_local_documents(input_path, text_field=text_field, text_unit=text_unit), max_documents
    )
    first = next(documents, None)
    if first is None:
        raise TokenizerError(f"--input {input_path}: no documents to learn from")
    counted = _Counted(itertools.chain([first], documents))
    train_tokenizer(output, counted, vocab_size=size, bos=bos, eos=eos)
    _, info = load_tokenizer(output)
    click.echo(
        f"wrote a {info.vocab_size}-token tokenizer for {spec.name} to {output} "
        f"(learned from {counted.count:,} documents; end of text {info.eos_token!r})"
    )
    click.echo(f"use it with: tprimat prepare-data --model {spec.name} --tokenizer {output} --input ...")


class _Counted:
    """An iterable of documents that counts what it gave."""

    def __init__(self, documents: Any) -> None:
        self.documents = documents
        self.count = 0

    def __iter__(self) -> Any:
        for document in self.documents:
            self.count += 1
            yield document
