"""Colour codes: the fast stripping gives exactly what the one documented pattern gives."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.plugins.logfixtures import LOGS
from tprimat.plugins.megatron_core.colour import strip_ansi
from tprimat.plugins.megatron_core.memory_lines import parse_hip_usage

# The definition in the module docstring, written out here on its own.
DEFINITION = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\[[0-9;]*[0-9]m")


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="\x1b[]0123456789;?mAz \x00", max_size=24))
def test_strip_ansi_is_the_one_pattern(text):
    coloured = "\x1b" in text or "[0m" in text  # a line without either is left as it is
    assert strip_ansi(text) == (DEFINITION.sub("", text) if coloured else text)


def test_real_coloured_lines():
    log = LOGS / "primus" / "primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log"
    lines = log.read_text(encoding="utf-8").splitlines()
    coloured = [line for line in lines if "\x1b[" in line]
    assert len(coloured) > 100
    for line in coloured:
        assert strip_ansi(line) == DEFINITION.sub("", line)
        assert "\x1b" not in strip_ansi(line)
    lost = [line.replace("\x1b", "") for line in coloured]
    for line in lost:
        assert strip_ansi(line) == DEFINITION.sub("", line)


def test_memory_reader_reads_a_field_with_colour_codes_inside():
    """The memory readers strip codes with the same function (a bracketed word such as [mem] is text)."""
    line = (
        "[[32m20260507 13:47:46[0m][[36mrank-7/8[0m] [mem] iteration 1/ 10 |"
        " hip mem usage/free/total/usage_ratio: 22.73[0mGB/265.25GB/287.98GB/7.89% |"
    )
    peak = parse_hip_usage(line)
    assert peak is not None
    assert (peak.rank, peak.device_used_gib, peak.device_total_gib) == (7, 22.73, 287.98)
