"""``tprimat make-tokenizer`` makes the small tokenizer a tiny model's data needs, offline; ``doctor``
warns about a gated tokenizer only when the run's tokenizer comes from the hub, and about a loaded CPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.running.doctor import Probe, run_checks

pytest.importorskip("tokenizers")

_spec = importlib.util.spec_from_file_location(
    "tiny_corpus", Path(__file__).parents[1] / "core" / "data" / "tiny_corpus.py"
)
assert _spec is not None and _spec.loader is not None
tiny_corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiny_corpus)


@pytest.fixture
def corpus(tmp_path) -> Path:
    return tiny_corpus.write_jsonl(tmp_path / "corpus.jsonl", tiny_corpus.make_documents(200))


def _invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


@pytest.mark.parametrize(
    ("model", "bos", "eos"),
    [("llama3.1-tiny", "<|begin_of_text|>", "<|end_of_text|>"), ("qwen2.5-tiny", None, "<|endoftext|>")],
)
def test_a_tokenizer_is_made_from_a_local_corpus_for_the_models_family(tmp_path, corpus, model, bos, eos):
    from tprimat.data.tokenizer import load_tokenizer

    out = tmp_path / "tok"
    done = _invoke(
        "make-tokenizer", "--input", str(corpus), "--model", model, "--output", str(out), "--vocab-size", "600"
    )
    assert done.exit_code == 0, done.output
    assert f"to {out}" in done.output and "learned from 200 documents" in done.output
    tokenizer, info = load_tokenizer(out)
    assert info.eos_token == eos and info.vocab_size <= 600
    ids = tokenizer.encode("the café").ids
    assert (ids[0] == tokenizer.token_to_id(bos)) if bos else (tokenizer.id_to_token(ids[0]) not in (eos,))
    # the same corpus gives the same tokenizer (a dataset's fingerprint depends on it)
    again = tmp_path / "again"
    _invoke("make-tokenizer", "--input", str(corpus), "--model", model, "--output", str(again), "--vocab-size", "600")
    assert (again / "tokenizer.json").read_bytes() == (out / "tokenizer.json").read_bytes()


def test_a_vocabulary_larger_than_the_models_is_one_error_line(tmp_path, corpus):
    done = CliRunner().invoke(
        cli, ["make-tokenizer", "--input", str(corpus), "--model", "llama3.1-tiny", "--output", str(tmp_path / "t"),
              "--vocab-size", "5000"],
    )  # fmt: skip
    assert done.exit_code == 2 and done.stderr.count("\n") == 1
    assert "--vocab-size 5000: llama3.1-tiny has a vocabulary of 4096 tokens at most" in done.stderr


def test_doctor_does_not_ask_for_a_hub_token_when_the_dataset_has_a_local_tokenizer(tmp_path, corpus):
    tok = tmp_path / "tok"
    assert (
        _invoke("make-tokenizer", "--input", str(corpus), "--model", "llama3.1-tiny", "--output", str(tok)).exit_code
        == 0
    )
    prepared = _invoke(
        "prepare-data", "--model", "llama3.1-tiny", "--tokenizer", str(tok), "--input", str(corpus),
        "--output", str(tmp_path / "data"), "--json",
    )  # fmt: skip
    assert prepared.exit_code == 0, prepared.output
    dataset = json.loads(prepared.output)["directory"]
    no_token = {"HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": "", "HF_HUB_OFFLINE": ""}
    local = _invoke(
        "doctor", "--json", "--set", f"data.dataset={json.dumps(dataset)}", "--output", str(tmp_path), env=no_token
    )
    assert "hf-token" not in {f["check"] for f in json.loads(local.output)["findings"]}

    # the same dataset made with the model's own (gated) tokenizer from the hub: the token is needed
    hub = Path(tmp_path / "hub")
    hub.mkdir()
    record = json.loads((Path(dataset) / "dataset.json").read_text())
    (hub / "dataset.json").write_text(json.dumps({**record, "tokenizer": "meta-llama/Llama-3.1-8B"}))
    gated = _invoke(
        "doctor", "--json", "--set", f"data.dataset={json.dumps(str(hub))}", "--output", str(tmp_path), env=no_token
    )
    (finding,) = [f for f in json.loads(gated.output)["findings"] if f["check"] == "hf-token"]
    assert "meta-llama/Llama-3.1-8B" in finding["message"]


def test_a_heavily_loaded_cpu_is_a_warning_naming_the_figures():
    def loaded(one: float, cores: int) -> list[str]:
        probe = Probe(
            env={}, read_file=lambda path: None, run_tool=lambda argv: None, load_average=lambda: (one, 3.5, 2.0),
            cpu_count=lambda: cores,
        )  # fmt: skip
        return [f.message for f in run_checks(probe) if f.check == "cpu-load"]

    (message,) = loaded(5.8, 2)
    assert "load average 5.80 (1 min), 3.50 (5 min) on 2 core(s)" in message
    assert loaded(1.9, 2) == [] and loaded(5.8, 8) == []


def test_doctor_reports_the_load_of_this_machine(monkeypatch, tmp_path):
    monkeypatch.setattr("tprimat.running.doctor._load_average", lambda: (40.0, 30.0, 20.0))
    monkeypatch.setattr("tprimat.running.doctor.os.cpu_count", lambda: 4)
    done = _invoke("doctor", "--json", "--output", str(tmp_path))
    (finding,) = [f for f in json.loads(done.output)["findings"] if f["check"] == "cpu-load"]
    assert "load average 40.00 (1 min), 30.00 (5 min) on 4 core(s)" in finding["message"]
