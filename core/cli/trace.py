"""``tprimat trace``: analyse profiler traces and explain the difference between two platforms."""

from __future__ import annotations

from pathlib import Path

import click

from tprimat.cli.jobs import jobs_option
from tprimat.cli.output import echo_json, print_table

_jobs = jobs_option("the traces: a file each, or ranges of one large file")


@click.group("trace")
def trace() -> None:
    """Analyse PyTorch-profiler (Kineto) traces: where GPU time goes, and why two runs differ."""


def _files(paths: tuple[str, ...]) -> list[Path]:
    from tprimat.trace.compare import trace_files

    return [f for p in paths for f in trace_files(p)]


def _text(value: object) -> str:
    """Text from a trace (a kernel or device name) for a table: rich markup in it is shown, not applied."""
    from rich.markup import escape

    return escape(str(value))


def _pct(value: float, total: float) -> str:
    return f"{100.0 * value / total:.1f}%" if total else "-"


def _ms(us: float) -> str:
    return f"{us / 1000.0:.3f}"


def _no_gpu(r: dict, who: str, scope: str) -> None:
    """A trace without GPU activity: say so, and show only what was measured (host step times)."""
    click.echo(f"{Path(r['file']).name} — {who}, {r['device'] or 'no GPU'}, {scope}")
    click.echo(f"  {r['note']}")
    if r.get("malformed_note"):
        click.echo(f"  note: {r['malformed_note']}")
    if r["steps"]:
        print_table("host step times", ("step", "host ms"), [(s["step"], _ms(s["host_us"])) for s in r["steps"]])
    click.echo("")


@trace.command("analyze")
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True, path_type=str))
@click.option(
    "--steps",
    default=None,
    metavar="A:B",
    help="Only kernels launched in ProfilerStep#A..#B (inclusive; 'A:', ':B' or 'A' work too). "
    "Default: everything before the last step, as HolisticTraceAnalysis does.",
)
@click.option("--top", default=10, show_default=True, help="How many kernels to list by total time.")
@click.option(
    "--hta-rounding",
    is_flag=True,
    help="Round timestamps inward to whole µs first, as HolisticTraceAnalysis does (to reproduce its numbers).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON (one object per rank).")
@_jobs
def analyze(
    traces: tuple[str, ...], steps: str | None, top: int, hta_rounding: bool, as_json: bool, jobs: int | None
) -> None:
    """Break down GPU time per rank: idle/compute/communication/memory, categories, top kernels.

    TRACES are Kineto trace files (plain or gzip JSON, one per rank) or
    directories holding them.
    """
    from tprimat.trace.analyze import analyze_paths, parse_steps

    results = analyze_paths(
        [str(f) for f in _files(traces)], steps=parse_steps(steps), top=top, hta_rounding=hta_rounding, workers=jobs
    )
    if as_json:
        echo_json({"ranks": results})
        return
    from tprimat.trace.categories import LABELS

    gpu_results = [r for r in results if r["temporal"] is not None]
    if len(gpu_results) > 1:
        print_table(
            "ranks (ms; communication and memcpy/memset: exposed)",
            ("rank", "device", "total", "idle", "compute", "communication", "memcpy/memset", "kernels"),
            [
                (
                    "?" if r["rank"] is None else r["rank"],
                    _text(r["device"] or ""),
                    _ms(r["temporal"]["total_us"]),
                    _ms(r["temporal"]["idle_us"]),
                    _ms(r["temporal"]["compute_us"]),
                    _ms(r["temporal"]["communication_us"]),
                    _ms(r["temporal"]["memory_us"]),
                    r["launches"]["kernels"],
                )
                for r in gpu_results
            ],
        )

    for r in results:
        who = f"rank {r['rank']}" if r["rank"] is not None else "rank ?"
        window = r["window"]
        if window["mode"] == "all":
            scope = "whole trace"
        else:
            scope = f"steps {window['steps'][0]}..{window['steps'][-1]}" if window["steps"] else "no steps"
        t = r["temporal"]
        if t is None:
            _no_gpu(r, who, scope)
            continue
        total = t["total_us"]
        title = _text(f"{Path(r['file']).name} — {who}, {r['device'] or 'unknown device'}, {scope}")
        rows = [
            ("total", _ms(total), "100.0%"),
            ("idle", _ms(t["idle_us"]), _pct(t["idle_us"], total)),
            ("compute", _ms(t["compute_us"]), _pct(t["compute_us"], total)),
            ("communication (exposed)", _ms(t["communication_us"]), _pct(t["communication_us"], total)),
            ("memcpy/memset (exposed)", _ms(t["memory_us"]), _pct(t["memory_us"], total)),
            ("GPU sync (exposed)", _ms(t["other_us"]), _pct(t["other_us"], total)),
        ]
        comm = r["communication"]
        if comm["total_us"]:
            rows.append(("communication overlapped", _ms(comm["overlapped_us"]), _pct(comm["overlapped_us"], total)))
        print_table(title, ("temporal", "ms", "of total"), rows)
        print_table(
            "categories",
            ("category", "kernels", "kernel ms", "exclusive ms", "of total"),
            [
                (LABELS[c], v["count"], _ms(v["kernel_us"]), _ms(v["exclusive_us"]), _pct(v["exclusive_us"], total))
                for c, v in r["categories"].items()
            ],
        )
        print_table(
            f"top {len(r['top_kernels'])} kernels",
            ("kernel", "category", "count", "total ms", "mean µs", "share"),
            [
                (
                    _text(k["short_name"]),
                    LABELS[k["category"]],
                    k["count"],
                    _ms(k["total_us"]),
                    f"{k['mean_us']:.1f}",
                    f"{100 * k['share_of_kernel_time']:.1f}%",
                )
                for k in r["top_kernels"]
            ],
        )
        launches = r["launches"]
        if r["steps"]:
            print_table(
                "per profiler step",
                ("step", "host ms", "GPU ms", "idle", "compute", "comm exposed", "kernels"),
                [
                    (
                        s["step"],
                        _ms(s["host_us"]),
                        _ms(s["temporal"]["total_us"]),
                        _pct(s["temporal"]["idle_us"], s["temporal"]["total_us"]),
                        _pct(s["temporal"]["compute_us"], s["temporal"]["total_us"]),
                        _pct(s["temporal"]["communication_us"], s["temporal"]["total_us"]),
                        s["launches"]["kernels"],
                    )
                    for s in r["steps"]
                ],
            )
        if r.get("malformed_note"):
            click.echo(f"note: {r['malformed_note']}")
        click.echo(
            f"launches: {launches['kernels']} kernels, {launches['memcpy']} memcpy, "
            f"{launches['memset']} memset ({r['activities']} of {r['activities_in_file']} GPU activities "
            "in the window)\n"
        )


@trace.command("compare")
@click.argument("a", type=click.Path(exists=True, path_type=str))
@click.argument("b", type=click.Path(exists=True, path_type=str))
@click.option("--label-a", default=None, help="Name of side A (default: its GPU name).")
@click.option("--label-b", default=None, help="Name of side B (default: its GPU name).")
@click.option("--steps", default=None, metavar="A:B", help="Use these profiler steps on both sides.")
@click.option(
    "-o",
    "--output",
    "output",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Write trace_comparison.md, .json and .png into this directory.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@_jobs
def compare(
    a: str,
    b: str,
    label_a: str | None,
    label_b: str | None,
    steps: str | None,
    output: Path | None,
    as_json: bool,
    jobs: int | None,
) -> None:
    """Step time of A and B (host ProfilerStep) and the difference (B − A) by kernel category and GPU idle.

    A and B are trace files, directories of per-rank traces, or run directories
    (their traces/ folder).
    """
    import json

    from tprimat.trace.analyze import parse_steps
    from tprimat.trace.compare import compare_traces

    comparison = compare_traces([a], [b], labels=(label_a, label_b), steps=parse_steps(steps), workers=jobs)
    if output is not None:
        from tprimat.atomic import atomic_write_text

        output.mkdir(parents=True, exist_ok=True)
        png: Path | None = output / "trace_comparison.png"
        try:
            import matplotlib  # noqa: F401  (the plot extra)
        except ImportError:
            png = None
            click.echo("note: matplotlib is not installed (pip install 'tprimat[plot]'): no PNG written", err=True)
        if png is not None:
            comparison.plot(png)
        atomic_write_text(
            output / "trace_comparison.md",
            comparison.to_markdown(heading="##", plot=png.name if png is not None else None),
        )
        atomic_write_text(
            output / "trace_comparison.json",
            json.dumps(comparison.to_dict(), indent=2, allow_nan=False, default=str) + "\n",
        )
    if as_json:
        echo_json(comparison.to_dict())
        return
    la, lb = comparison.labels
    la, lb = _text(la), _text(lb)
    print_table(
        f"Time per step: {la} vs {lb} (ms; {comparison.step_label})",
        ("", la, lb, f"{lb} − {la}"),
        [(label, _ms(va), _ms(vb), f"{d / 1000.0:+.3f}") for label, va, vb, d in comparison.rows()],
    )
    click.echo(comparison.summary_line())
    from tprimat.trace.compare import BUCKET_LABELS

    for bucket, delta in comparison.largest_differences(limit=4):
        if bucket == "idle":
            continue
        click.echo(f"  {BUCKET_LABELS[bucket]} ({delta / 1000.0:+.2f} ms per step):")
        for side in (comparison.a, comparison.b):
            kernels = side.top_kernels.get(bucket, ())[:3]
            text = "; ".join(f"{k.short_name} {k.us_per_step / 1000.0:.2f} ms" for k in kernels) or "none"
            click.echo(f"    {side.label}: {text}")
    for side in (comparison.a, comparison.b):
        for note in side.notes:
            click.echo(f"note: {note}")
    if output is not None:
        written = ".json and .png" if png is not None else "and .json"
        click.echo(f"wrote {output / 'trace_comparison.md'} {written}")
