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
    help="Where to extract (the bundle's directory must not exist there yet).",
)
@click.option(
    "--max-gib",
    type=click.FloatRange(min=0, max=2**20, min_open=True),
    default=64.0,
    show_default=True,
    help="Refuse a bundle whose files add up to more than this (it is also refused beyond the free space).",
)
def unbundle(bundle_file: Path, output: Path, max_gib: float) -> None:
    """Extract BUNDLE_FILE safely and verify every checksum.

    Every file is checked against SHA256SUMS before anything is written: a file
    not listed, a listed file missing, a changed file, a link or special file, a
    path outside the bundle, or a bundle beyond the limits (100,000 members,
    paths of 1,024 bytes and 32 names, --max-gib in all) is refused with exit
    code 2 and nothing extracted.
    """
    from tprimat.suite.bundle import GIB, BundleLimits
    from tprimat.suite.bundle import unbundle as extract

    if max_gib != max_gib:  # nan passes FloatRange
        raise click.BadParameter("not a number", param_hint="--max-gib")
    limits = BundleLimits(max_total_bytes=max(1, int(max_gib * GIB)))
    root, files = extract(bundle_file, output, limits=limits)
    click.echo(f"verified {files} files under {root}")
