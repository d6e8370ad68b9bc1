"""``tprimat plugins``: which plugins loaded, which hooks each implements, and load errors."""

from __future__ import annotations

import click

from tprimat.cli.output import echo_json, print_table, registry_from


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def plugins(ctx: click.Context, as_json: bool) -> None:
    """List loaded plugins, their hooks, and plugins that failed to load."""
    registry = registry_from(ctx)
    backends_by_plugin: dict[str, list[str]] = {}
    for name, entry in registry.backends().items():
        backends_by_plugin.setdefault(entry.plugin_name, []).append(name)
    loaded = [
        {
            "name": p.name,
            "distribution": p.distribution,
            "version": p.version,
            "hooks": list(p.hooks),
            "backends": backends_by_plugin.get(p.name, []),
        }
        for p in registry.plugins()
    ]
    errors = [{"name": e.name, "distribution": e.distribution, "error": e.error} for e in registry.load_errors]
    if as_json:
        echo_json({"plugins": loaded, "errors": errors})
        return
    print_table(
        "Plugins",
        ["name", "distribution", "backends", "hooks"],
        [
            [
                p["name"],
                f"{p['distribution'] or '?'} {p['version'] or ''}".strip(),
                ", ".join(p["backends"]),
                ", ".join(p["hooks"]),
            ]
            for p in loaded
        ],
    )
    if errors:
        print_table(
            "Plugins that failed to load",
            ["name", "distribution", "error"],
            [[e["name"], e["distribution"] or "?", e["error"]] for e in errors],
        )
