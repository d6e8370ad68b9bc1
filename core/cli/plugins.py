"""``tprimat plugins``: which plugins loaded, what each serves, which hooks it implements, and what failed.

Each plugin's backends and experiment-tracker exporters are listed by name;
the exporters' table says whether each is usable here (its tracker's library
installed), decided as ``tprimat backends`` decides it, without importing it.

Besides plugins that failed to load, it lists the detection and recognition
hooks that fail when asked (``detect_platform``, ``BackendSpec.sniff`` and
``explain``): commands skip them, and this is where their errors are shown.
"""

from __future__ import annotations

from typing import Any

import click

from tprimat.cli.output import echo_json, print_table, registry_from
from tprimat.contract.version import CONTRACT_VERSION


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def plugins(ctx: click.Context, as_json: bool) -> None:
    """List loaded plugins, their backends, exporters and hooks, and plugins that failed to load."""
    registry = registry_from(ctx)
    registry.check_hooks()
    backends_by_plugin: dict[str, list[str]] = {}
    for name, entry in registry.backends().items():
        backends_by_plugin.setdefault(entry.plugin_name, []).append(name)
    exporters_by_plugin: dict[str, list[str]] = {}
    exporters: list[dict[str, Any]] = []
    for name, exporter in registry.exporters().items():
        exporters_by_plugin.setdefault(exporter.plugin_name, []).append(name)
        availability = exporter.availability()
        exporters.append(
            {
                "name": name,
                "plugin": exporter.plugin_name,
                "distribution": exporter.distribution,
                "status": str(availability),
                "hint": availability.hint or None,
                "description": exporter.spec.description,
            }
        )
    loaded: list[dict[str, Any]] = [
        {
            "name": p.name,
            "distribution": p.distribution,
            "version": p.version,
            "hooks": list(p.hooks),
            "backends": backends_by_plugin.get(p.name, []),
            "exporters": exporters_by_plugin.get(p.name, []),
            "contract": p.contract,
        }
        for p in registry.plugins()
    ]
    errors = [{"name": e.name, "distribution": e.distribution, "error": e.error} for e in registry.load_errors]
    skipped = [
        {"name": e.name, "distribution": e.distribution, "hook": e.hook, "backend": e.backend, "error": e.error}
        for e in registry.hook_errors
    ]
    if as_json:
        echo_json(
            {
                "contract": CONTRACT_VERSION,
                "plugins": loaded,
                "exporters": exporters,
                "plugin_errors": errors,
                "skipped_hooks": skipped,
            }
        )
        return
    print_table(
        f"Plugins (plugin contract {CONTRACT_VERSION})",
        ["name", "distribution", "contract", "backends", "exporters", "hooks"],
        [
            [
                p["name"],
                f"{p['distribution'] or '?'} {p['version'] or ''}".strip(),
                p["contract"] or "-",
                ", ".join(p["backends"]),
                ", ".join(p["exporters"]),
                ", ".join(p["hooks"]),
            ]
            for p in loaded
        ],
    )
    if exporters:
        print_table(
            "Exporters",
            ["name", "plugin", "status"],
            [[e["name"], e["plugin"], e["status"]] for e in exporters],
        )
        for row in exporters:
            if row["hint"]:
                click.echo(f"  hint  {row['name']}: {row['hint']}")
    if errors:
        print_table(
            "Plugins that failed to load",
            ["name", "distribution", "error"],
            [[e["name"], e["distribution"] or "?", e["error"]] for e in errors],
        )
    if skipped:
        print_table(
            "Hooks that fail (skipped by every command)",
            ["name", "distribution", "hook", "backend", "error"],
            [[e["name"], e["distribution"] or "?", e["hook"], e["backend"] or "", e["error"]] for e in skipped],
        )
