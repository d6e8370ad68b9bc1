import json

from tprimat.hardware.platform import PlatformInfo
from tprimat.running.manifest import (
    capture_manifest,
    find_manifest,
    load_manifest,
    performance_environment,
    write_manifest,
)
from tprimat.secrets import REDACTED, get_secret, load_env_file, redact_env, redact_text

TOKEN = "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqR"


def test_secret_names_and_token_shapes_are_redacted(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    env = redact_env({"HF_TOKEN": TOKEN, "NCCL_DEBUG": "WARN", "OTHER": f"x={TOKEN}"})
    assert env == {"HF_TOKEN": REDACTED, "NCCL_DEBUG": "WARN", "OTHER": f"x={REDACTED}"}
    assert TOKEN not in redact_text(f"curl -H 'Authorization: Bearer {TOKEN}'")


def test_env_file_is_read_for_secrets(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    path = tmp_path / ".tprimat.env"
    path.write_text(f"# secrets\nexport HF_TOKEN='{TOKEN}'\n")
    assert load_env_file(path) == {"HF_TOKEN": TOKEN}
    assert get_secret("HF_TOKEN", path) == TOKEN
    assert load_env_file(tmp_path / "missing") == {}


def test_manifest_records_performance_env_without_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("NCCL_MIN_NCHANNELS", "112")
    monkeypatch.setenv("HSA_NO_SCRATCH_RECLAIM", "1")
    info = PlatformInfo(
        platform="amd",
        device_name="AMD Instinct MI300X",
        device_count=8,
        memory_per_device_gib=192.0,
        driver_version="6.8.5",
        stack="rocm",
        stack_version="6.4.1",
        source="rocm-smi",
    )
    manifest = capture_manifest(info, nodes=2)
    path = write_manifest(manifest, tmp_path)
    assert TOKEN not in path.read_text()
    loaded = load_manifest(path)
    assert loaded.hardware.device_name == "AMD Instinct MI300X" and loaded.hardware.nodes == 2
    assert loaded.software.rocm == "6.4.1" and loaded.software.cuda is None
    assert loaded.environment["NCCL_MIN_NCHANNELS"] == "112"
    assert loaded.environment["HF_TOKEN"] == REDACTED
    assert "PATH" not in performance_environment({"PATH": "/bin", "OMP_NUM_THREADS": "8"})


def test_manifest_is_found_next_to_a_log(tmp_path):
    run = tmp_path / "runs" / "r1"
    (run / "logs").mkdir(parents=True)
    log = run / "logs" / "rank-0.log"
    log.write_text("")
    assert find_manifest(log) is None
    write_manifest(capture_manifest(PlatformInfo(platform="cpu")), run)
    assert find_manifest(log) == run / "manifest.json"


def test_a_broken_manifest_is_a_clear_error(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"tprimat_version": "0"}))
    import pytest

    from tprimat.running.manifest import ManifestError

    with pytest.raises(ManifestError, match="not a tprimat manifest"):
        load_manifest(path)
