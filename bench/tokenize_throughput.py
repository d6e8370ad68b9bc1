#!/usr/bin/env python3
"""Tokenization throughput: ``tprimat prepare-data`` vs Megatron-LM's ``tools/preprocess_data.py``.

Both tools read the same JSON-lines corpus with the same Hugging Face tokenizer
on the same machine with the same number of worker processes; the bench prints
wall time, tokens and tokens/s for each, and checks that the two ``.bin``/``.idx``
pairs are byte-identical (same tokens, same format).

    MEGATRON_PATH=/path/to/Megatron-LM python bench/tokenize_throughput.py --size-mb 100

Without ``--corpus`` a corpus of at least ``--size-mb`` MB is assembled from
paragraphs of the text files (``.txt``, ``.md``, ``.rst``) installed with this
Python (its standard library and site-packages), shuffled with a fixed seed.
Without ``--tokenizer`` a byte-level BPE tokenizer (Llama 3 pre-tokenizer regex,
``--vocab-size`` tokens, BOS added, EOS appended) is trained on a sample of it
and saved in Hugging Face format; pass a real model's tokenizer directory to
measure that instead.  Megatron-LM runs under ``--megatron-python`` (default:
this interpreter; ``MEGATRON_PYTHON``) with ``PYTHONPATH=$MEGATRON_PATH``; its
code is run from that checkout, never copied.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from tprimat.hardware.platform import cpu_model

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def text_files() -> list[Path]:
    roots = {Path(sysconfig.get_paths()[key]) for key in ("stdlib", "purelib", "platlib")}
    files: set[Path] = set()
    for root in roots:
        for suffix in ("*.txt", "*.md", "*.rst"):
            files.update(p for p in root.rglob(suffix) if p.is_file())
    return sorted(files)


def paragraphs() -> list[str]:
    seen: set[str] = set()
    out = []
    for path in text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for block in text.split("\n\n"):
            block = block.strip()
            if len(block) >= 40 and block not in seen:
                seen.add(block)
                out.append(block)
    return out


def build_corpus(path: Path, size_mb: float, seed: int = 1234) -> None:
    pool = paragraphs()
    if not pool:
        raise SystemExit("no text files found to build a corpus from; pass --corpus")
    rng = random.Random(seed)
    target = int(size_mb * 1e6)
    written = 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        while written < target:
            doc = "\n\n".join(rng.choices(pool, k=rng.randint(1, 12)))
            line = json.dumps({"text": doc}, ensure_ascii=False) + "\n"
            handle.write(line)
            written += len(line.encode("utf-8"))
    tmp.replace(path)


def train_tokenizer(corpus: Path, directory: Path, vocab_size: int) -> None:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    bos, eos = "<|begin_of_text|>", "<|end_of_text|>"
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[bos, eos],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )

    def sample():
        with open(corpus, encoding="utf-8") as handle:
            for i, line in enumerate(handle):
                if i >= 20000:
                    return
                yield json.loads(line)["text"]

    tokenizer.train_from_iterator(sample(), trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, tokenizer.token_to_id(bos))]
    )
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "model_max_length": 131072,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (directory / "special_tokens_map.json").write_text(json.dumps({"bos_token": bos, "eos_token": eos}))


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def run_tprimat(corpus: Path, tokenizer: Path, workers: int, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    argv = [
        sys.executable,
        "-c",
        "from tprimat.cli import main; main()",
        "prepare-data",
        "--input",
        str(corpus),
        "--name",
        "corpus",
        "--model",
        "llama3.1-8b",
        "--tokenizer",
        str(tokenizer),
        "--output",
        str(out),
        "--workers",
        str(workers),
        "--normalize",
        "none",
        "--no-dedup",
        "--min-chars",
        "0",
        "--min-words",
        "0",
        "--json",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(f"tprimat failed:\n{result.stdout}\n{result.stderr}")
    summary = json.loads(result.stdout)
    step = json.loads((Path(summary["directory"]) / "tokenized" / "step.json").read_text())
    return {
        "wall_s": wall,
        "tokens": summary["tokens"],
        "documents": summary["documents"],
        "tokenize_s": step["tokenize_seconds"],
        "prefix": summary["path_prefix"],
    }


def run_megatron(corpus: Path, tokenizer: Path, workers: int, out: Path, megatron: Path, python: str) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    argv = [
        python,
        str(megatron / "tools" / "preprocess_data.py"),
        "--input",
        str(corpus),
        "--output-prefix",
        str(out / "corpus"),
        "--tokenizer-type",
        "HuggingFaceTokenizer",
        "--tokenizer-model",
        str(tokenizer),
        "--append-eod",
        "--workers",
        str(workers),
        "--log-interval",
        "1000000",
    ]
    env = {**os.environ, "PYTHONPATH": str(megatron), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(f"Megatron-LM failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    prefix = out / "corpus_text_document"
    from tprimat.data.indexed import IndexedReader

    reader = IndexedReader(prefix)
    return {"wall_s": wall, "tokens": reader.token_count, "documents": reader.document_count, "prefix": str(prefix)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, help="a JSON-lines corpus with a 'text' field")
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--tokenizer", type=Path, help="a Hugging Face tokenizer directory")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)) or 1)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tprimat-bench-tokenize"))
    parser.add_argument("--megatron-path", type=Path, default=os.environ.get("MEGATRON_PATH"))
    parser.add_argument("--megatron-python", default=os.environ.get("MEGATRON_PYTHON", sys.executable))
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each tool, alternating which goes first; medians reported"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    script = args.megatron_path and args.megatron_path / "tools" / "preprocess_data.py"
    if script is None or not script.is_file():
        raise SystemExit("set MEGATRON_PATH (or --megatron-path) to a Megatron-LM checkout")

    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus or args.workdir / f"corpus-{args.size_mb:g}mb.jsonl"
    if not corpus.is_file():
        print(f"building {corpus} ...", file=sys.stderr)
        build_corpus(corpus, args.size_mb)
    tokenizer = args.tokenizer or args.workdir / f"tokenizer-bpe{args.vocab_size}"
    if not (tokenizer / "tokenizer.json").is_file():
        print(f"training {tokenizer} ...", file=sys.stderr)
        train_tokenizer(corpus, tokenizer, args.vocab_size)

    corpus_mb = corpus.stat().st_size / 1e6
    print(f"corpus {corpus} ({corpus_mb:.1f} MB), tokenizer {tokenizer}, workers {args.workers}", file=sys.stderr)
    runs = []
    for attempt in range(args.repeat):
        # alternate the order so that neither tool always runs on a warmer page cache
        order = ("tprimat", "megatron") if attempt % 2 == 0 else ("megatron", "tprimat")
        run = {}
        for tool in order:
            if tool == "tprimat":
                run[tool] = run_tprimat(corpus, tokenizer, args.workers, args.workdir / "tprimat")
            else:
                run[tool] = run_megatron(
                    corpus, tokenizer, args.workers, args.workdir / "megatron", args.megatron_path, args.megatron_python
                )
        run["load_average_1m"] = os.getloadavg()[0]
        runs.append(run)
    mine, theirs = runs[-1]["tprimat"], runs[-1]["megatron"]
    identical = all(sha256(Path(mine["prefix"] + s)) == sha256(Path(theirs["prefix"] + s)) for s in (".bin", ".idx"))
    megatron_commit = (
        os.environ.get("MEGATRON_COMMIT")
        or subprocess.run(
            ["git", "-C", str(args.megatron_path), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        or "unknown"
    )

    def median(values):
        return statistics.median(values)

    tokens = mine["tokens"]
    rows = [
        ("tprimat prepare-data (all six steps)", median([r["tprimat"]["wall_s"] for r in runs])),
        ("tprimat tokenize step only", median([r["tprimat"]["tokenize_s"] for r in runs])),
        ("Megatron-LM preprocess_data.py", median([r["megatron"]["wall_s"] for r in runs])),
    ]
    print(f"{'tool (median of ' + str(len(runs)) + ')':<40} {'wall s':>9} {'tokens':>13} {'tokens/s':>12} {'MB/s':>7}")
    for name, seconds in rows:
        print(f"{name:<40} {seconds:>9.2f} {tokens:>13,} {tokens / seconds:>12,.0f} {corpus_mb / seconds:>7.2f}")
    ratios = [r["megatron"]["wall_s"] / r["tprimat"]["wall_s"] for r in runs]
    ratio = median(ratios)
    print(
        "tprimat end-to-end / Megatron-LM tokens/s per run: "
        + ", ".join(f"{x:.2f}x" for x in ratios)
        + f" (median {ratio:.2f}x)"
    )
    print(f"outputs byte-identical: {'yes' if identical else 'NO'}")
    results = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{cpu_model() or platform.machine()}, {os.cpu_count()} logical CPUs, {platform.system()}",
        "python": platform.python_version(),
        "corpus_mb": round(corpus_mb, 1),
        "corpus_sha256": sha256(corpus),
        "tokenizer": str(tokenizer),
        "workers": args.workers,
        "megatron_commit": megatron_commit,
        "runs": runs,
        "ratios_end_to_end": [round(x, 3) for x in ratios],
        "ratio_end_to_end_median": round(ratio, 3),
        "byte_identical": identical,
    }
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
