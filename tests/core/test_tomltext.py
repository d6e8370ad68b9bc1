"""The TOML writer: whatever it writes, tomllib reads back as the same data."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tprimat.settings.config import dump_toml, load_config
from tprimat.settings.tomltext import TomlValueError, toml_document

# Every string TOML can hold: any Unicode scalar value (surrogates are not characters).
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)


@given(key=TEXT, value=TEXT)
def test_every_string_and_key_round_trips(key, value):
    assert tomllib.loads(toml_document({key: value})) == {key: value}


@given(table=TEXT, key=TEXT, values=st.lists(TEXT, max_size=4))
def test_keys_and_strings_round_trip_in_tables_arrays_and_inline_tables(table, key, values):
    data = {table: {key: values, "inline": [{key: v} for v in values]}}
    assert tomllib.loads(toml_document(data)) == data


def test_a_character_outside_the_basic_plane_is_one_character():
    text = toml_document({"model": "llama 🦙 3.1"})
    assert "\\ud83e" not in text.lower()  # never a UTF-16 surrogate pair escape
    assert tomllib.loads(text) == {"model": "llama 🦙 3.1"}


def test_a_key_with_a_space_is_quoted():
    assert tomllib.loads(toml_document({"t": {"a key": 1, "a.b": 2}})) == {"t": {"a key": 1, "a.b": 2}}


def test_none_inside_an_array_is_refused_with_where_it_is():
    with pytest.raises(TomlValueError, match=r"tune\.devices\[1\] is None"):
        toml_document({"tune": {"devices": ["MI300X", None]}})


def test_none_in_a_table_or_inline_table_is_left_out():
    data = {"t": {"a": None, "b": 1, "c": [{"x": None, "y": 2}]}}
    assert tomllib.loads(toml_document(data)) == {"t": {"b": 1, "c": [{"y": 2}]}}


def test_other_objects_are_their_text_and_comments_come_first():
    text = toml_document({"data": {"path": Path("/data/bc")}}, comments=["written by a test"])
    assert text.startswith("# written by a test\n")
    assert tomllib.loads(text) == {"data": {"path": "/data/bc"}}


def test_the_default_config_round_trips_and_loads_as_the_same_config():
    config = load_config()
    text = dump_toml(config)
    assert tomllib.loads(text) == _without_none(config.to_dict())


def _without_none(value):
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_none(v) for v in value]
    return value
