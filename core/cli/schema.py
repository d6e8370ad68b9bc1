"""``tprimat schema``: the JSON Schemas of the documents tprimat writes, for tools outside tprimat."""

from __future__ import annotations

import click


@click.group()
def schema() -> None:
    """Print the JSON Schemas of the documents tprimat writes."""


@schema.command("result")
def result() -> None:
    """The JSON Schema (draft 2020-12) of result.json, generated from the result classes.

    The same text ships in the package as tprimat/result/result.schema.json.
    Save it (`tprimat schema result > result.schema.json`) and validate results
    with any JSON Schema validator (the jsonschema package, check-jsonschema).
    """
    from tprimat.result.jsonschema import result_json_schema_text

    click.echo(result_json_schema_text(), nl=False)
