"""What the NeMo backend says a NeMo file without a step record is (``BackendSpec.explain``)."""

from __future__ import annotations

from tests.plugins.nvd_nemo.nemologs import GPT175B, LLAMA8B, RESNET
from tprimat.plugins.nvd_nemo.explain import explain_nemo


def test_a_nemo_dllogger_file_that_ends_before_its_first_step():
    head = GPT175B.read_text(encoding="utf-8").splitlines()[:1]
    explained = explain_nemo(head, [])
    assert explained is not None and "from NeMo, with its parameters (cfg/...) but no training step record" in explained


def test_a_dllogger_stream_of_another_program():
    explained = explain_nemo(RESNET.read_text(encoding="utf-8").splitlines(), [])
    assert explained is not None and "that is not NeMo's" in explained


def test_a_nemo1_log_whose_bar_is_all_there_is():
    # The 8B run's lines without its DLL records: the bar (NeMo >= 1.21 form "Epoch 0: :") alone.
    lines = [line for line in LLAMA8B.read_text(encoding="utf-8").splitlines() if "DLL " not in line]
    explained = explain_nemo(lines, [])
    assert explained is not None and explained.startswith("a NeMo 1.x log with only its PyTorch Lightning progress bar")
    assert "dllogger_logger_kwargs.stdout=true" in explained


def test_other_logs_are_not_explained_as_nemo():
    assert explain_nemo(["iteration 1/ 10 | elapsed time per iteration (ms): 5.0 |"], []) is None
