"""``tprimat config``: inspect the effective benchmark config."""

from __future__ import annotations

from typing import Any

import click

from tprimat.cli.options import config_options
from tprimat.cli.output import echo_json, registry_from


@click.group()
def config() -> None:
    """Inspect benchmark configs (TOML)."""


@config.command("show")
@config_options()
@click.option("--backend", help="The backend of the run (default: the one `tprimat run` picks on this machine).")
@click.option("--device", help="Plan for this device instead of this machine's, as `tprimat run --device`.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of TOML.")
@click.pass_context
def show(
    ctx: click.Context,
    config_file: str | None,
    overrides: tuple[str, ...],
    backend: str | None,
    device: str | None,
    as_json: bool,
) -> None:
    """Print the config a run would use here, its layers and its fairness fingerprint.

    The config is resolved as `tprimat run` resolves it on this machine: the
    shipped defaults, the CPU preset when the backend trains on a CPU (no GPU),
    the --config file, the --set items, and a tuned preset when
    benchmark.methodology is "tuned".  Each layer that applies is named.
    """
    from tprimat.settings.config import dump_toml

    cfg, backend_line, layers = _resolve(ctx, config_file, overrides, backend, device)
    if as_json:
        echo_json(
            {
                "config": cfg.to_dict(),
                "config_fingerprint": cfg.fingerprint(),
                "backend": backend_line,
                "layers": layers,
            }
        )
        return
    click.echo(f"# config_fingerprint = {cfg.fingerprint()}")
    click.echo(f"# backend: {backend_line}")
    for number, layer in enumerate(layers, 1):
        click.echo(f"# layer {number}: {layer}")
    click.echo(dump_toml(cfg), nl=False)


def _resolve(
    ctx: click.Context, config_file: str | None, overrides: tuple[str, ...], backend: str | None, device: str | None
) -> tuple[Any, str, list[str]]:
    """(config, the backend and why, the layers): what `tprimat run` would decide here, nothing started."""
    from tprimat.hardware.platform import trains_on_cpu
    from tprimat.running.prepare import (
        RunError,
        RunRequest,
        layered_config,
        preset_origin,
        resolve_backend,
        target_platform,
    )
    from tprimat.settings.methodology import PresetError, resolve

    registry = registry_from(ctx)
    machine = registry.detect_platform()
    request = RunRequest(backend=backend, config_file=config_file, overrides=overrides, device=device)
    try:
        name, why = resolve_backend(registry, backend, machine)
    except RunError as exc:
        if backend is not None:
            raise
        # no backend runs here: the layers of this machine alone (the CPU preset without a GPU)
        cfg, layers = layered_config(request, machine)
        return cfg, f"none usable on this machine ({exc})", layers
    spec = registry.backend(name).spec
    target, _ = target_platform(machine, spec, device)
    cfg, layers = layered_config(request, target)
    try:
        methodology = resolve(
            cfg, backend=name, device_name=target.device_name, platform=spec.platform, owned=spec.config_owned
        )
    except PresetError as exc:
        raise RunError(f"{exc} (name the target with --device)") from None
    if methodology.preset:
        layers.append(f"tuned preset {methodology.preset} ({methodology.source}){preset_origin(methodology)}")
    where = f"this machine's CPU ({target.device_name})" if trains_on_cpu(target) else target.device_name
    where = where or f"an unnamed {target.platform} device"
    return methodology.config, f"{name} ({why}), planned for {where}", layers
