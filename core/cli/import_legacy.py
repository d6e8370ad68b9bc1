"""``tprimat import-legacy``: convert results of the earlier tprimat scripts to tprimat results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tprimat.cli.output import echo_json, print_table


@click.command("import-legacy")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    "output_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory the converted results are written to (<run id>.json).",
)
@click.option(
    "--model",
    default=None,
    help="tprimat model name (default: from the file name: llama -> llama3.1-8b, qwen -> qwen2.5-7b).",
)
@click.option(
    "--precision", default=None, help="Precision the runs used (not recorded in legacy files; without it: no MFU)."
)
@click.option("--dataset", default=None, help="Dataset the runs used, 'mock' or a name (not recorded in legacy files).")
@click.option(
    "--methodology",
    type=click.Choice(["iso", "tuned"]),
    default="iso",
    show_default=True,
    help="Methodology to record.",
)
@click.option(
    "--warmup-iterations",
    type=click.IntRange(min=0),
    default=None,
    help="Iterations left out of the statistics (default: benchmark.warmup_iterations of the default config).",
)
@click.option(
    "--sequence-length",
    type=click.IntRange(min=1),
    default=None,
    help="The sequence length the runs really used, when the legacy file's own is in "
    "doubt (its throughput disagrees by an exact factor).",
)
@click.option(
    "--global-batch-size",
    type=click.IntRange(min=1),
    default=None,
    help="The global batch size the runs really used, when the legacy file's own is in doubt.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def import_legacy(
    files: tuple[Path, ...],
    output_dir: Path,
    model: str | None,
    precision: str | None,
    dataset: str | None,
    methodology: str,
    warmup_iterations: int | None,
    sequence_length: int | None,
    global_batch_size: int | None,
    as_json: bool,
) -> None:
    """Convert benchmark_*.json / train_*.json results of the earlier scripts.

    Throughput is recomputed from the recorded step times, global batch and
    sequence length; every legacy figure that disagrees is listed in the
    result's provenance notes.
    """
    from tprimat.parse.legacy import LegacyOptions, convert_legacy, write_name
    from tprimat.result.resultjson import write_result
    from tprimat.settings.config import default_config_dict

    if warmup_iterations is None:
        warmup_iterations = int(default_config_dict()["benchmark"]["warmup_iterations"])
    options = LegacyOptions(
        model=model,
        precision=precision,
        dataset=dataset,
        methodology=methodology,
        warmup_iterations=warmup_iterations,
        sequence_length=sequence_length,
        global_batch_size=global_batch_size,
    )
    from tprimat.errors import TprimatError

    rows: list[dict[str, Any]] = []
    targets: dict[Path, Path] = {}
    for path in files:
        result = convert_legacy(path, options)
        target = output_dir / write_name(result)
        if target in targets:
            raise TprimatError(f"{path} and {targets[target]} would both be written to {target}: rename one of them")
        targets[target] = path
        write_result(result, target)
        per_gpu = result.summary.tokens_per_s_per_gpu
        rows.append(
            {
                "input": str(path),
                "result": str(target),
                "status": result.run.status,
                "ambiguous": bool(result.caveats and result.caveats.ambiguous),
                "platform": result.run.platform,
                "device": result.hardware.device_name,
                "measured_iterations": result.summary.measured_iterations,
                "tokens_per_s_per_gpu_median": per_gpu.median if per_gpu else None,
                "notes": len(result.provenance.notes),
            }
        )
    if as_json:
        echo_json({"imported": rows})
        return
    print_table(
        "Imported legacy results",
        ["input", "result", "status", "device", "measured", "tokens/s/GPU (median)", "notes"],
        [
            [
                Path(r["input"]).name,
                r["result"],
                r["status"] + (" (AMBIGUOUS: not compared)" if r["ambiguous"] else ""),
                r["device"],
                r["measured_iterations"],
                "" if r["tokens_per_s_per_gpu_median"] is None else f"{r['tokens_per_s_per_gpu_median']:,.1f}",
                r["notes"],
            ]
            for r in rows
        ],
    )
    for path, row in zip(files, rows, strict=True):
        if row["ambiguous"]:
            click.echo(
                f"{path}: ambiguous: its stored throughput and the recomputation differ by "
                "an exact factor; see the AMBIGUOUS note in the result's provenance.notes "
                "and state the true value with --sequence-length or --global-batch-size",
                err=True,
            )
    click.echo(
        "Provenance notes (legacy figures that disagree, units, assumptions) are in each result's provenance.notes."
    )
