"""``tprimat models``: the registered architectures, their size and FLOPs per token."""

from __future__ import annotations

from typing import Any

import click

from tprimat.cli.output import echo_json, print_table
from tprimat.result.flops import flops_per_token, formula_name
from tprimat.settings.models import iter_models


@click.command()
@click.option(
    "--seq-length",
    type=click.IntRange(min=1),
    default=8192,
    show_default=True,
    help="Sequence length for the FLOPs per token.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def models(seq_length: int, as_json: bool) -> None:
    """List registered models with parameter count and training FLOPs per token."""
    rows: list[dict[str, Any]] = []
    for model in iter_models():
        rows.append(
            {
                "name": model.name,
                "family": model.family,
                "parameters": model.parameter_count,
                "layers": model.num_layers,
                "hidden_size": model.hidden_size,
                "ffn_hidden_size": model.ffn_hidden_size,
                "attention_heads": model.num_attention_heads,
                "query_groups": model.num_query_groups,
                "kv_channels": model.kv_channels,
                "vocab_size": model.vocab_size,
                "padded_vocab_size": model.padded_vocab_size(),
                "rope_theta": model.rope_theta,
                "qkv_bias": model.qkv_bias,
                "tie_embeddings": model.tie_embeddings,
                "seq_length": seq_length,
                "flops_per_token": flops_per_token(model, seq_length),
            }
        )
    if as_json:
        echo_json({"flops_formula": formula_name(), "models": rows})
        return
    print_table(
        f"Models (FLOPs per token at sequence length {seq_length})",
        ["name", "parameters", "layers", "hidden", "heads/groups", "vocab", "GFLOP/token"],
        [
            [
                r["name"],
                f"{r['parameters'] / 1e9:.3f} B",
                r["layers"],
                r["hidden_size"],
                f"{r['attention_heads']}/{r['query_groups']}",
                r["vocab_size"],
                f"{r['flops_per_token'] / 1e9:.2f}",
            ]
            for r in rows
        ],
    )
    click.echo(f"formula: {formula_name()}")
