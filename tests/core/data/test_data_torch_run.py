"""A prepared dataset end to end: prepare-data, then the torch backend trains on its tokens."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from tiny_corpus import write_jsonl

from tprimat.cli import cli
from tprimat.data import load_prepared
from tprimat.data.pipeline import PrepareOptions, prepare
from tprimat.result.schema import load_result

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def test_torch_backend_trains_on_a_prepared_dataset(tmp_path, documents, llama_like_tokenizer):
    source = write_jsonl(tmp_path / "in" / "books.jsonl", documents)
    prepared = prepare(
        PrepareOptions(
            model="llama3.1-tiny",
            input=source,
            tokenizer=str(llama_like_tokenizer),
            output=tmp_path / "data",
            workers=1,
        )
    )
    dataset_dir = next((tmp_path / "data").rglob("dataset.json")).parent
    dataset = load_prepared(dataset_dir)
    assert dataset.fingerprint == prepared.fingerprint

    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--backend",
            "torch",
            "--model",
            "llama3.1-tiny",
            "--iterations",
            "4",
            "--output",
            str(tmp_path / "runs"),
            "--run-id",
            "real",
            "--set",
            f'data.dataset="{dataset_dir}"',
            "--set",
            "training.seq_length=32",
            "--set",
            "training.global_batch_size=2",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    run = load_result(tmp_path / "runs" / "real" / "result.json")
    assert run.run.status == "completed" and len(run.iterations) == 4
    assert run.config.dataset_fingerprint == dataset.fingerprint
    info = next(
        line
        for line in (tmp_path / "runs" / "real" / "logs" / "launcher.log").read_text().splitlines()
        if "TPRIMAT_INFO" in line
    )
    trainer = json.loads(info.split("TPRIMAT_INFO", 1)[1])
    assert trainer["dataset"] != "mock"
