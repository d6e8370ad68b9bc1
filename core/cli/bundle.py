"""``tprimat bundle`` / ``tprimat unbundle``: move results off a cluster with checksums."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The .tar.gz to write."
)
@click.option("--traces", is_flag=True, help="Include profiler traces (can be large).")
def bundle(directory: Path, output: Path, traces: bool) -> None:
    """Pack results, manifests, configs and logs under DIRECTORY with a SHA256SUMS list."""
    from tprimat.suite.bundle import make_bundle, select_files

    count = sum(1 for _ in select_files(directory, include_traces=traces))
    path = make_bundle(directory, output, include_traces=traces)
    click.echo(f"bundled {count} files into {path}")


@click.command()
@click.argument("bundle_file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where to extract.",
)
def unbundle(bundle_file: Path, output: Path) -> None:
    """Extract BUNDLE_FILE safely and verify every checksum."""
    from tprimat.suite.bundle import unbundle as extract

    root, files = extract(bundle_file, output)
    click.echo(f"verified {files} files under {root}")
