import pytest

from tprimat.settings.config import (
    ConfigError,
    config_fingerprint,
    dump_toml,
    fair_fields,
    load_config,
    parse_override,
)


def test_defaults_load_and_are_consistent():
    cfg = load_config()
    assert cfg.benchmark.model == "llama3.1-8b"
    assert cfg.world_size == 8 and cfg.data_parallel == 8
    assert cfg.training.global_batch_size % (cfg.training.micro_batch_size * cfg.data_parallel) == 0


def test_file_then_overrides(tmp_path):
    path = tmp_path / "bench.toml"
    path.write_text('[training]\nseq_length = 4096\n[benchmark]\nmodel = "qwen2.5-7b"\n')
    cfg = load_config(path, ["training.seq_length=2048", "precision.dtype=fp8"])
    assert cfg.benchmark.model == "qwen2.5-7b"
    assert cfg.training.seq_length == 2048 and cfg.precision.dtype == "fp8"


def test_override_values_are_toml_literals_or_strings():
    assert parse_override("training.lr=1e-4") == (["training", "lr"], 1e-4)
    assert parse_override("profile.ranks=[0, 1]") == (["profile", "ranks"], [0, 1])
    assert parse_override("benchmark.model=qwen2.5-7b") == (["benchmark", "model"], "qwen2.5-7b")


@pytest.mark.parametrize(
    "override, message",
    [
        ("training.seq_lenght=4096", "unknown key training.seq_lenght"),
        ("trainig.seq_length=4096", "unknown section [trainig]"),
        ("seq_length=4096", "section.key"),
        ("training.seq_length=abc", "training.seq_length"),
        ("precision.dtype=fp4", "precision.dtype"),
        ("training.global_batch_size=12", "not divisible"),
    ],
)
def test_bad_overrides_name_the_key(override, message):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert message in str(info.value)


def test_unknown_key_in_a_file_is_named(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[training]\nglobal_batch = 8\n")
    with pytest.raises(ConfigError, match="unknown key training.global_batch"):
        load_config(path)


def test_invalid_toml_is_reported(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[training\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path)


def test_dump_round_trips(tmp_path):
    cfg = load_config(None, ["training.seq_length=1024", "profile.ranks=[0, 3]"])
    path = tmp_path / "effective.toml"
    path.write_text(dump_toml(cfg))
    assert load_config(path) == cfg


def test_fingerprint_covers_fairness_fields_only():
    base = load_config()
    assert base.fingerprint() == load_config(None, ["parallel.tensor=2"]).fingerprint()
    assert base.fingerprint() == load_config(None, ["kernels.compile=true"]).fingerprint()
    for override in (
        "training.seq_length=4096",
        "training.global_batch_size=64",
        "precision.dtype=fp8",
        "benchmark.model=qwen2.5-7b",
        "benchmark.methodology=tuned",
    ):
        assert load_config(None, [override]).fingerprint() != base.fingerprint(), override


def test_dataset_is_identified_by_content():
    a = load_config(None, ["data.dataset=/cluster-a/bc"])
    b = load_config(None, ["data.dataset=/cluster-b/bc"])
    assert a.fingerprint("sha256:abc") == b.fingerprint("sha256:abc")
    assert fair_fields(load_config())["dataset"] == "mock"
    assert config_fingerprint({"a": 1, "b": 2}) == config_fingerprint({"b": 2, "a": 1})
