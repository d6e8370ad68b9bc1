"""``tprimat prepare-data`` end to end on a local file, offline."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli

pytest.importorskip("numpy")
pytest.importorskip("tokenizers")

_spec = importlib.util.spec_from_file_location(
    "tiny_corpus", Path(__file__).parents[1] / "core" / "data" / "tiny_corpus.py"
)
tiny_corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiny_corpus)


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    docs = tiny_corpus.make_documents(120)
    tokenizer = tiny_corpus.train_tokenizer(tmp_path / "tok", docs)
    source = tiny_corpus.write_jsonl(tmp_path / "corpus.jsonl", docs)
    return tmp_path, tokenizer, source


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_listed_in_help():
    result = invoke("--help")
    assert "prepare-data" in result.output


def test_prepare_local_file_json(setup):
    tmp_path, tokenizer, source = setup
    args = [
        "prepare-data",
        "--input",
        str(source),
        "--model",
        "qwen2.5-tiny",
        "--tokenizer",
        str(tokenizer),
        "--output",
        str(tmp_path / "data"),
        "--workers",
        "1",
        "--json",
    ]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["documents"] == 120
    assert summary["fingerprint"].startswith("sha256:")
    directory = Path(summary["directory"])
    assert directory.parent.name == "corpus" and directory.name.startswith("qwen2-tok")
    meta = json.loads((directory / "dataset.json").read_text())
    assert meta["fingerprint"] == summary["fingerprint"] and meta["model"] == "qwen2.5-tiny"
    # a second run finds everything done and gives the same answer
    again = invoke(*args)
    assert json.loads(again.output) == summary


def test_prepare_shows_steps_and_table(setup):
    tmp_path, tokenizer, source = setup
    result = CliRunner().invoke(
        cli,
        [
            "prepare-data",
            "--input",
            str(source),
            "--model",
            "llama3.1-tiny",
            "--tokenizer",
            str(tokenizer),
            "--output",
            str(tmp_path / "out"),
            "--workers",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    for step in ("fetch", "clean", "tokenize", "write", "verify", "fingerprint"):
        assert step in result.output
    assert "use it with: --set data.dataset=" in result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--model", "llama3.1-tiny"], "exactly one of --dataset"),
        (["--model", "nope", "--input", "{src}"], "unknown model 'nope'"),
        (
            ["--model", "llama3.1-tiny", "--input", "{src}", "--tokenizer", "{tmp}/nothing/here"],
            "neither a directory nor a hub id",
        ),
    ],
)
def test_errors_are_one_line(setup, args, message):
    tmp_path, _, source = setup
    args = [a.format(src=source, tmp=tmp_path) for a in args]
    result = CliRunner().invoke(cli, ["prepare-data", *args, "--output", str(tmp_path / "d")])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_gated_tokenizer_offline_is_a_clear_error(setup, monkeypatch):
    tmp_path, _, source = setup
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    result = CliRunner().invoke(
        cli, ["prepare-data", "--input", str(source), "--model", "llama3.1-8b", "--output", str(tmp_path / "d")]
    )
    assert result.exit_code == 2
    assert "meta-llama/Llama-3.1-8B" in result.output and "offline" in result.output


def test_check_mode(setup):
    tmp_path, tokenizer, source = setup
    made = json.loads(
        invoke(
            "prepare-data",
            "--input",
            str(source),
            "--model",
            "llama3.1-tiny",
            "--tokenizer",
            str(tokenizer),
            "--output",
            str(tmp_path / "data"),
            "--workers",
            "1",
            "--json",
        ).output
    )
    result = invoke("prepare-data", "--check", made["directory"], "--json")
    assert result.exit_code == 0
    assert json.loads(result.output)["fingerprint"] == made["fingerprint"]
    idx = Path(made["path_prefix"] + ".idx")
    idx.write_bytes(idx.read_bytes()[:-3])
    broken = CliRunner().invoke(cli, ["prepare-data", "--check", made["directory"]])
    assert broken.exit_code == 2 and "check 'idx.size' failed" in broken.output
