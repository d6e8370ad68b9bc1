"""A convergence run refuses mock data before anything starts (exit code 2, the fix named)."""

from __future__ import annotations

from click.testing import CliRunner

from tprimat.cli import cli


def test_convergence_needs_a_prepared_dataset(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--backend",
            "torch",
            "--model",
            "llama3.1-tiny",
            "--output",
            str(tmp_path),
            "--set",
            "convergence.enabled=true",
        ],
    )
    assert result.exit_code == 2
    assert "tprimat prepare-data" in result.output and "data.dataset" in result.output
    assert not any(tmp_path.iterdir())
