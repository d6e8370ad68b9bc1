"""The dry run: what ``tprimat run --dry-run`` prints, from the prepared run and nothing else.

Everything shown comes from :class:`~tprimat.running.prepare.PreparedRun`:
the command, environment and files are the backend's launch plan, and the
config is the final one the run records, so the dry run cannot drift from
what a real run launches.
"""

from __future__ import annotations

import json
import shlex

from tprimat.running.prepare import PreparedRun
from tprimat.secrets import redact_env, redact_text
from tprimat.settings.config import dump_toml
from tprimat.settings.shared import SHARED_SETTINGS


def framework_section(prepared: PreparedRun) -> list[str]:
    """The shared settings and what the framework keeps, as ``result.json`` records them."""
    framework = prepared.plan.framework
    if framework is None:
        return []
    lines = ["", f"## framework settings ({framework.framework}; recorded in result.json config.framework)"]
    lines.append("shared (math: must match across compared runs; speed: may differ):")
    for name, setting in SHARED_SETTINGS.items():
        if name in framework.shared:
            lines.append(f"  {name} = {json.dumps(framework.shared[name])}  [{setting.kind}]")
    lines.append(f"rendered by tprimat: {len(framework.rendered)} settings (command line and files above)")
    if framework.kept:
        lines.append(f"kept from {framework.kept_from}:")
        lines += [f"  {key} = {json.dumps(value, default=str)}" for key, value in framework.kept.items()]
    elif framework.kept_from:
        lines.append(f"kept: {framework.kept_from}")
    lines += [f"note: {note}" for note in framework.notes]
    return lines


def describe_plan(prepared: PreparedRun) -> str:
    """What ``--dry-run`` prints: the exact command, environment, files and effective config."""
    plan = prepared.plan
    lines = [
        f"# backend: {prepared.backend} ({prepared.backend_reason})",
        f"# platform: {prepared.platform.platform} ({prepared.platform.device_name or 'unknown'})",
        f"# run directory: {prepared.run_dir}",
    ]
    if plan.description:
        lines.append(f"# plan: {plan.description}")
    if prepared.unavailable:
        lines.append(f"# NOT RUNNABLE HERE: {prepared.unavailable}")
    for note in prepared.notes:
        lines.append(f"# note: {note}")
    lines.append(f"# methodology: {prepared.methodology.methodology}")
    for deviation in prepared.methodology.deviations:
        lines.append(f"# tuned deviation: {deviation}")
    for layer in prepared.layers:
        lines.append(f"# config layer: {layer}")
    for note in plan.notes:
        lines.append(f"# plan note: {note}")
    lines.append(f"# plan digest: {prepared.plan_digest} (its framework acceptance record: docs/backends.md)")
    lines += ["", "## command", redact_text(shlex.join(plan.argv))]
    if plan.cwd is not None:
        lines.append(f"(in {plan.cwd})")
    lines += ["", "## environment (added to the inherited one)"]
    env = sorted(redact_env(plan.env).items())
    lines += [f"{k}={shlex.quote(v)}" for k, v in env] or ["(none)"]
    lines += ["", "## files written into the run directory"]
    files = {"config.toml": "(the effective config below)", "manifest.json": "(captured at launch)"}
    files.update(plan.files)
    for name, text in files.items():
        lines.append(f"--- {name}")
        lines.append(redact_text(text).rstrip("\n"))
    if prepared.profile is not None:
        traces = ", ".join(prepared.profile.trace_globs) or "(backend default)"
        if prepared.profile.trace_globs:
            traces += ", moved after the run into traces/rank-<N>.pt.trace.json[.gz]"
        if prepared.profile.capture_range:
            traces = "none (a CUDA profiler range over the window, for the system profiler)"
        lines += [
            "",
            "## profiling",
            f"traces: {traces}",
            "profiled iterations (left out of statistics): "
            + (", ".join(map(str, prepared.profile.profiled_iterations)) or "none"),
        ]
    lines += framework_section(prepared)
    if prepared.request.memory_snapshot:
        where = ", ".join(prepared.plan.snapshot_globs) or f"none: backend {prepared.backend} has no snapshot mechanism"
        lines += ["", "## memory snapshots", f"allocator snapshots written to: {where}"]
    lines += [
        "",
        "## effective config (recorded in config.toml and result.json exactly as below)",
        f"# config_fingerprint = {prepared.config.fingerprint()}",
        dump_toml(prepared.config).rstrip("\n"),
    ]
    return "\n".join(lines) + "\n"
