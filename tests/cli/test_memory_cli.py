"""``tprimat memory estimate``: the breakdown, the formulas, the verdict, JSON and errors."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tprimat.cli import cli


def _run(*args: str):
    return CliRunner().invoke(cli, ["memory", "estimate", *args])


def test_llama_8b_on_mi300x_fits_and_the_table_states_every_formula():
    done = _run("--model", "llama3.1-8b", "--device", "MI300X")
    assert done.exit_code == 0, done.output
    for term in ("parameters", "gradients", "optimizer states", "activations", "overhead", "total"):
        assert term in done.output
    assert "4·kv" in done.output and "Adam moments" in done.output  # the formulas, brackets and all
    assert "fits on MI300X (191.98 GiB)" in done.output


def test_llama_8b_on_h100_does_not_fit_without_recompute_and_fits_with_it():
    short = _run("--model", "llama3.1-8b", "--device", "H100")
    assert short.exit_code == 0 and "does NOT fit on H100-SXM" in short.output
    full = _run("--model", "llama3.1-8b", "--device", "H100", "--set", "training.recompute=full")
    assert full.exit_code == 0 and "fits on H100-SXM" in full.output


def test_json_carries_terms_formulas_capacity_and_margin():
    done = _run("--json", "--capacity-gib", "40", "--set", "parallel.tensor=2")
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["capacity_gib"] == 40 and data["capacity_source"] == "given"
    assert data["fits"] is False and data["margin_gib"] < 0
    assert set(data["formulas"]) == {"parameters", "gradients", "optimizer_states", "activations", "overhead"}
    assert "TP 2" in data["formulas"]["parameters"]


def test_without_a_capacity_the_verdict_says_how_to_give_one():
    done = _run()
    assert done.exit_code == 0 and "--device NAME or --capacity-gib" in done.output


def test_bad_input_is_one_line_and_exit_code_2():
    unknown_device = _run("--device", "TPU v5")
    assert unknown_device.exit_code == 2 and "no memory capacity known for device 'TPU v5'" in unknown_device.output
    unknown_model = _run("--model", "gpt-5")
    assert unknown_model.exit_code == 2 and "unknown model 'gpt-5'" in unknown_model.output
    assert len(unknown_model.output.splitlines()) == 1 and "Usage:" not in unknown_model.output
    bad_key = _run("--set", "training.recompute=sometimes")
    assert bad_key.exit_code == 2 and "recompute" in bad_key.output


def test_an_unknown_backend_names_the_known_ones():
    done = _run("--backend", "tpu_jax")
    assert done.exit_code == 2 and "unknown backend 'tpu_jax'" in done.output and "nvd_megatron" in done.output
    torch = _run("--backend", "torch", "--json")
    assert torch.exit_code == 0 and "eager modules" in torch.output
