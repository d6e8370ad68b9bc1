"""Numbers written by msgspec and respelled: exactly as json writes them, or no text at all."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.compiled import EXACT, compiled_or_skip
from tests.plugins.logfixtures import LOGS
from tprimat.contract.records import ITERATION_FIELDS, iteration_values
from tprimat.contract.registry import Registry
from tprimat.parse.logs import parse_logs
from tprimat.result import compiled as result_compiled
from tprimat.result import floattext
from tprimat.result.floattext import numbers_text

#: Where msgspec or ``repr`` change how they write a float, and the ends of the floats.
EDGES = (5e-324, 2.2250738585072014e-308, 1e-100, 1e-10, 1e-09, 1e-06, 1e-05, 0.0001, 1.0, 1e15, 1e16, 1e17)
EDGES += (1e22, 1e100, 1.7976931348623157e308)


def _json_items(values) -> str:
    return json.dumps(list(values), separators=(",", ":"))[1:-1]


def floats_text(values) -> str | None:
    """:func:`numbers_text` as text."""
    text = numbers_text(values)
    return None if text is None else text.decode("ascii")


def _stepped(edge: float, steps: int) -> float:
    """The float ``steps`` floats above ``edge`` (below, for negative steps)."""
    for _ in range(abs(steps)):
        edge = math.nextafter(edge, math.inf if steps > 0 else 0.0)
    return edge


_near_edges = st.builds(_stepped, st.sampled_from(EDGES), st.integers(-3, 3))
#: Floats of a few significant digits (as logs print them) of any magnitude.
_decimal = st.builds(
    lambda digits, exponent: float(f"{digits}e{exponent}"), st.integers(1, 10**17), st.integers(-340, 310)
)
_signed = st.builds(
    lambda magnitude, negative: -magnitude if negative else magnitude,
    st.one_of(st.floats(allow_nan=False, allow_infinity=False), _near_edges, _decimal, st.just(0.0)),
    st.booleans(),
).filter(math.isfinite)


@given(st.lists(_signed, max_size=40))
def test_any_finite_floats_are_written_as_json_writes_them_or_not_at_all(values):
    text = floats_text(values)
    assert text is None or text == _json_items(values)


@pytest.fixture(params=["compiled", "python"])
def respelling_form(request, monkeypatch) -> str:
    """Run a test with the compiled respelling of ``0.0000d`` items, then with the Python one."""
    compiled = compiled_or_skip(EXACT).fifth_decimals if request.param == "compiled" else None
    monkeypatch.setattr(result_compiled, "FIFTH_DECIMALS", compiled)
    return request.param


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.binary(max_size=40), st.text(alphabet="0.-,e15[]", max_size=40).map(str.encode)))
@example(b"[10.00001,0.00005,-0.000012]")
@example(b"[.0.00001,1.0.00001,0.0000,0.0000e5]")
@example(b"0.00001,[0.00001")
def test_the_compiled_respelling_is_the_python_one(text):
    assert compiled_or_skip(EXACT).fifth_decimals(text) == floattext._fifth_decimal_respelled(text)


@pytest.mark.usefixtures("respelling_form")
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_floats_at_every_edge_are_written_as_json_writes_them(sign):
    values = [sign * _stepped(edge, steps) for edge in EDGES for steps in range(-3, 4)]
    values += [sign * x for x in (9.8e-06, 1e-05, 1.5e-05, 2.5e-05, 9.5e-05, 1.2345e-06, 2.1e-09, 1.5e20, 0.0)]
    values += [sign * x for x in (10.00001, 100.000015, 3000.00009, 1.0000000000000002e16)]  # "0.0000" within
    values = [x for x in values if math.isfinite(x)]
    assert floats_text(values) == _json_items(values)
    assert floats_text(tuple(values)) == _json_items(values)


_learning_rates = st.floats(1e-7, 1e-2)
_step_times_s = st.floats(0.05, 120.0)
_losses = st.floats(0.5, 12.0)
_counts = st.integers(0, 10**18).map(float)


@pytest.mark.usefixtures("respelling_form")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(*(st.lists(column, min_size=1) for column in (_learning_rates, _step_times_s, _losses, _counts))))
def test_realistic_columns_are_written(values):
    assert floats_text(values) == _json_items(values)


def test_the_float_columns_of_a_real_log_are_written():
    path = LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
    records = parse_logs([path], registry=Registry.from_environment(), allow_mismatch=True).result.iterations
    columns = dict(zip(ITERATION_FIELDS, zip(*map(iteration_values, records), strict=True), strict=True))
    floats = {name: values for name, values in columns.items() if {type(v) for v in values} == {float}}
    lr_text = floats_text(floats["lr"])
    assert lr_text is not None and "e-05" in lr_text and "e-06" in lr_text  # both bands respelled
    for name, values in floats.items():
        assert floats_text(values) == _json_items(values), name


def test_no_values_are_no_items():
    assert floats_text([]) == ""


class _Float(float):
    pass


@pytest.mark.usefixtures("within_form")
@pytest.mark.parametrize("odd", [math.nan, math.inf, -math.inf, True, "0.5", [0.5], _Float(0.5)])
def test_no_text_where_a_value_is_not_a_finite_number_or_none(odd):
    assert floats_text([0.5, 1e-05, odd, 2.0]) is None
    assert floats_text([odd]) is None
    assert floats_text((None, odd, None)) is None


@pytest.mark.usefixtures("within_form")
@pytest.mark.parametrize("other", [1, 10**18, None], ids=["int", "large-int", "None"])
def test_ints_and_none_among_floats_are_written_as_json_writes_them(other):
    values = [0.5, 1e-05, other, 2.0, 1e16, None]
    assert floats_text(values) == _json_items(values)


@pytest.mark.usefixtures("within_form")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(_signed, st.none(), st.sampled_from([math.nan, math.inf, -math.inf, 2**60])), max_size=12))
def test_nones_among_numbers_are_told_from_what_msgspec_also_writes_null(values):
    text = floats_text(values)
    finite = all(value is None or math.isfinite(value) for value in values)
    assert (text == _json_items(values)) if finite else text is None


def test_no_text_where_msgspec_spells_floats_otherwise(monkeypatch):
    monkeypatch.setattr(
        floattext.msgspec.json, "encode", lambda values: json.dumps(values, separators=(",", ":")).encode()
    )
    floattext.spelling_known.cache_clear()
    try:
        assert floats_text([0.5, 1e-05]) is None
    finally:
        monkeypatch.undo()
        floattext.spelling_known.cache_clear()
    assert floats_text([0.5, 1e-05]) == "0.5,1e-05"
