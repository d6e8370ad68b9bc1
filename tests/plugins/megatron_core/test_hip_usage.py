"""Primus's ``hip mem usage`` field: one reader for the iteration records and the per-rank peaks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.plugins.logfixtures import LOGS, events_of, records_of
from tprimat.plugins.amd_primus.parse import parse_primus
from tprimat.plugins.megatron_core.lines import LineError, parse_units
from tprimat.plugins.megatron_core.memory_lines import (
    parse_hip_usage,
    read_hip_usage,
    scan_memory,
    scan_memory_file,
)

LEGACY = LOGS / "primus" / "primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log"


def _first_field_line() -> str:
    lines = LEGACY.read_text(encoding="utf-8", errors="replace").splitlines()
    return next(line for line in lines if "hip mem usage" in line and "\x1b" not in line)


def test_the_value_is_used_and_total_gib_as_primus_prints_them():
    # Primus prints bytes / 1024**3 labelled "GB": GiB, kept as printed (MI325X: 255.98 GiB in all).
    assert read_hip_usage("153.81GB/102.17GB/255.98GB/60.09%") == (153.81, 255.98)
    with pytest.raises(LineError):
        read_hip_usage("153.81GB/102.17GB/255.98GB")  # cut off


def test_records_text_scan_and_byte_scan_read_the_same_figures(tmp_path):
    line = _first_field_line()
    record = next(r for r in records_of(events_of(parse_primus, LEGACY)) if r.mem_device_used_gib is not None)
    assert (record.mem_device_used_gib, record.mem_device_total_gib) == (153.81, 255.98)
    peak = parse_hip_usage(line)
    assert (peak.rank, peak.device_used_gib, peak.device_total_gib) == (7, 153.81, 255.98)
    path = tmp_path / "one.log"
    path.write_text(line + "\n", encoding="utf-8")
    assert scan_memory_file(path).ranks == scan_memory([line]).ranks == (peak,)


def test_a_value_that_only_looks_like_figures_is_left_out_by_both_scans(tmp_path):
    line = _first_field_line().replace("153.81GB/", "153.8.1GB/")
    assert parse_hip_usage(line) is None
    path = tmp_path / "bad.log"
    path.write_text(line + "\n", encoding="utf-8")
    assert scan_memory_file(path).ranks == scan_memory([line]).ranks == ()


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.GiB% e-n", max_size=8), min_size=1, max_size=5).map("/".join))
def test_the_printed_form_reads_as_the_unit_list_reader_reads_it(value):
    try:
        expected = tuple(parse_units(value, 4, (0, 2)))
    except LineError:
        with pytest.raises(LineError):
            read_hip_usage(value)
    else:
        assert read_hip_usage(value) == pytest.approx(expected, nan_ok=True)


@pytest.mark.parametrize("value", ["153.81GB/102.17GB/255.98GB/60.09%", " 1.GB/2GB/.5GB/3% ", "7/8/9/10"])
def test_printed_and_other_spellings_agree_with_the_unit_list_reader(value):
    assert read_hip_usage(value) == tuple(parse_units(value, 4, (0, 2)))
