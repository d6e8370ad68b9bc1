"""The end of a log is numbered as the readers number it: a lone carriage return ends a line."""

from __future__ import annotations

from tests.plugins.nvd_nemo.nemologs import LLAMA70B
from tprimat.contract.logfile import LogFile
from tprimat.parse.stopreason import line_number_at, tail_text


def test_a_log_with_progress_bar_redraws_is_numbered_like_the_readers():
    """The 64xB200 NeMo log redraws its progress bar with bare \\r: each redraw is a line."""
    data = LLAMA70B.read_bytes()
    assert b"\r" in data.replace(b"\r\n", b"")
    reader_lines = [line.rstrip("\r\n") for line in LogFile(LLAMA70B)]
    offset = data.index(b"TFLOPs per sec per GPU=")
    offset = max(data.rfind(b"\n", 0, offset), data.rfind(b"\r", 0, offset)) + 1
    number = line_number_at(LLAMA70B, offset)
    assert "TFLOPs per sec per GPU=" in reader_lines[number - 1]
    start, lines = tail_text(LLAMA70B, size=len(data) // 3)
    first = line_number_at(LLAMA70B, start)
    assert lines == reader_lines[first - 1 :]
