"""``tprimat backends``: the installed backends and whether this machine can run them."""

from __future__ import annotations

import click

from tprimat.cli.output import echo_json, print_table, registry_from


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def backends(ctx: click.Context, as_json: bool) -> None:
    """List installed backends with their platform, framework and status.

    Status is decided without importing any framework: available, missing
    (what is missing, and how to get it) or error (why the backend is unusable).
    """
    registry = registry_from(ctx)
    rows = []
    for name, entry in registry.backends().items():
        availability = entry.availability()
        rows.append(
            {
                "name": name,
                "platform": entry.spec.platform,
                "framework": entry.spec.framework,
                "distribution": entry.distribution,
                "version": entry.version,
                "status": str(availability),
                "hint": availability.hint or None,
                "description": entry.spec.description,
            }
        )
    errors = [
        {"plugin": e.name, "distribution": e.distribution, "status": f"error: {e.error}"} for e in registry.load_errors
    ]
    if as_json:
        echo_json({"backends": rows, "plugin_errors": errors})
        return
    print_table(
        "Backends",
        ["name", "platform", "framework", "distribution", "status"],
        [
            [
                r["name"],
                r["platform"],
                r["framework"],
                f"{r['distribution'] or '?'} {r['version'] or ''}".strip(),
                r["status"],
            ]
            for r in rows
        ]
        + [[e["plugin"], "?", "?", e["distribution"] or "?", e["status"]] for e in errors],
    )
    hints = [f"{r['name']}: {r['hint']}" for r in rows if r["hint"]]
    for hint in hints:
        click.echo(f"  hint  {hint}")
