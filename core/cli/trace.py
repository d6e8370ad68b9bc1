"""``tprimat trace``: analyse profiler traces and explain the difference between two platforms."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tprimat.cli.jobs import jobs_option
from tprimat.cli.output import echo_json, print_table

if TYPE_CHECKING:
    from tprimat.trace.compare import TraceComparison

_jobs = jobs_option("the traces: a file each, or ranges of one large file")
_hta_rounding = click.option(
    "--hta-rounding",
    is_flag=True,
    help="Round timestamps inward to whole µs first, as HolisticTraceAnalysis does (to reproduce its numbers).",
)
_nvtx_step = click.option(
    "--nvtx-step",
    "nvtx_step",
    default=None,
    metavar="REGEX",
    help="Nsight Systems exports: the NVTX ranges whose name REGEX finds are the profiler steps (only the "
    "outermost of nested matches); REGEX's first group is the step number, else the ranges are numbered "
    "0, 1, … in time order.  Default: ProfilerStep#N ranges.  Without a match the window is the whole "
    "profile and the output lists the most frequent NVTX ranges.",
)


@click.group("trace")
def trace() -> None:
    """Analyse profiler traces: where GPU time goes, what set a step's length, and why two runs differ.

    Kineto (PyTorch profiler) traces everywhere; `analyze` also reads Nsight Systems SQLite
    exports and rocprofv3 CSV traces, JSON outputs and Perfetto traces.
    """


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


def _source(r: dict) -> str:
    """``", nsys-sqlite"`` for a vendor profiler's file, nothing for a Kineto trace."""
    return f", {r['format']}" if r.get("format", "kineto") != "kineto" else ""


def _runtime_line(r: dict) -> None:
    """The host time in runtime calls that a vendor profiler's API trace records."""
    api = r.get("runtime_api")
    if api:
        click.echo(
            f"runtime API: {api['calls']} calls, {_ms(api['total_us'])} ms; launches {api['launch_calls']} calls, "
            f"{_ms(api['launch_us'])} ms (launch overhead); synchronisation {api['sync_calls']} calls, "
            f"{_ms(api['sync_us'])} ms"
        )


def _no_gpu(r: dict, who: str, scope: str) -> None:
    """A trace without GPU activity: say so, and show only what was measured (host step times)."""
    click.echo(f"{Path(r['file']).name} — {who}, {r['device'] or 'no GPU'}, {scope}{_source(r)}")
    click.echo(f"  {r['note']}")
    _runtime_line(r)
    if r.get("malformed_note"):
        click.echo(f"  note: {r['malformed_note']}")
    if r.get("steps_note"):
        click.echo(f"  note: {r['steps_note']}")
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
@_hta_rounding
@_nvtx_step
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON (one object per rank).")
@_jobs
def analyze(
    traces: tuple[str, ...],
    steps: str | None,
    top: int,
    hta_rounding: bool,
    nvtx_step: str | None,
    as_json: bool,
    jobs: int | None,
) -> None:
    """Break down GPU time per rank: idle/compute/communication/memory, categories, top kernels.

    TRACES are Kineto trace files (plain or gzip JSON, one per rank),
    Nsight Systems SQLite exports (nsys export --type sqlite), rocprofv3 databases
    (*_results.db), JSON outputs (*_results.json), Perfetto traces (*_results.pftrace) or CSV traces
    (*_kernel_trace.csv), or directories
    holding them: the format is
    told by the content.
    """
    from tprimat.trace.analyze import analyze_paths, parse_steps
    from tprimat.trace.nsys import nvtx_step_pattern

    nvtx_step_pattern(nvtx_step)  # a bad regex is bad input before any file is read
    results = analyze_paths(
        [str(f) for f in _files(traces)],
        steps=parse_steps(steps),
        top=top,
        hta_rounding=hta_rounding,
        workers=jobs,
        nvtx_step=nvtx_step,
    )
    if as_json:
        echo_json({"ranks": results})
        return
    gpu_results = [r for r in results if r["temporal"] is not None]
    if len(gpu_results) > 1:
        _ranks_table(gpu_results)
    for r in results:
        _rank_report(r)


def _ranks_table(results: list[dict]) -> None:
    """One row per rank with GPU activity: its temporal breakdown side by side with the others'."""
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
            for r in results
        ],
    )


def _rank_report(r: dict) -> None:
    """The tables of one rank's analysis: temporal breakdown, categories, top kernels, profiler steps."""
    who = f"rank {r['rank']}" if r["rank"] is not None else "rank ?"
    window = r["window"]
    if window["mode"] == "all":
        scope = "whole trace"
    else:
        scope = f"steps {window['steps'][0]}..{window['steps'][-1]}" if window["steps"] else "no steps"
    if r["temporal"] is None:
        _no_gpu(r, who, scope)
        return
    _temporal_table(r, _text(f"{Path(r['file']).name} — {who}, {r['device'] or 'unknown device'}, {scope}{_source(r)}"))
    _kernel_tables(r)
    if r["steps"]:
        _steps_table(r["steps"])
    if r.get("malformed_note"):
        click.echo(f"note: {r['malformed_note']}")
    if r.get("steps_note"):
        click.echo(f"note: {r['steps_note']}")
    _runtime_line(r)
    launches = r["launches"]
    click.echo(
        f"launches: {launches['kernels']} kernels, {launches['memcpy']} memcpy, "
        f"{launches['memset']} memset ({r['activities']} of {r['activities_in_file']} GPU activities "
        "in the window)\n"
    )


def _temporal_table(r: dict, title: str) -> None:
    """Where the window's GPU time went: idle, compute and what no compute hides (and the overlap)."""
    t = r["temporal"]
    total = t["total_us"]
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


def _kernel_tables(r: dict) -> None:
    """The window's kernel categories (kernel and exclusive time) and its kernels with the most time."""
    from tprimat.trace.categories import LABELS

    total = r["temporal"]["total_us"]
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


def _steps_table(steps: list[dict]) -> None:
    """One row per profiler step of the window: host time, GPU time and its split, kernels."""
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
            for s in steps
        ],
    )


@trace.command("critical-path")
@click.argument("trace_file", metavar="TRACE", type=click.Path(exists=True, dir_okay=False, path_type=str))
@click.option(
    "--step",
    type=int,
    default=None,
    help="Analyse ProfilerStep#N.  Default: the last complete step (Kineto's last step is cut short).",
)
@click.option(
    "--annotation",
    default=None,
    metavar="TEXT",
    help="Analyse a host annotation whose name holds TEXT instead of a profiler step (as HolisticTraceAnalysis "
    "selects one).",
)
@click.option("--instance", default=0, show_default=True, help="Which match of --annotation, from 0 in time order.")
@click.option("--top", default=10, show_default=True, help="How many of the longest path segments to list.")
@_hta_rounding
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def critical_path_command(
    trace_file: str,
    step: int | None,
    annotation: str | None,
    instance: int,
    top: int,
    hta_rounding: bool,
    as_json: bool,
) -> None:
    """The critical path of one step of a Kineto trace: what set the step's length.

    Builds the step's dependency graph (host operator nesting, kernel launches,
    GPU stream order, stream and event synchronisation) and reports its longest
    path: how much of it is GPU compute, communication, memory copies, GPU idle
    gaps, launch delays, runtime-call (launch) time and other host work, with its
    longest segments in path order.
    """
    from tprimat.trace.critical_path import critical_path

    if step is not None and annotation is not None:
        raise click.UsageError("give --step or --annotation, not both")
    path = critical_path(trace_file, step=step, annotation=annotation, instance=instance, hta_rounding=hta_rounding)
    result = path.as_dict(top=top)
    if as_json:
        echo_json(result)
        return
    length = result["length_us"]
    click.echo(f"{Path(result['file']).name} — {result['window']['label']}")
    print_table(
        "critical path",
        ("on the path", "ms", "of path"),
        [
            ("length", _ms(length), "100.0%"),
            *((_CP_LABELS[k], _ms(v), _pct(v, length)) for k, v in result["breakdown_us"].items() if v),
        ],
    )
    print_table(
        f"longest {len(result['top_segments'])} segments, in path order",
        ("what", "name", "stream", "start ms", "ms"),
        [
            (
                _CP_LABELS[s["bucket"]],
                _text(_short(s["name"])),
                "" if s["stream"] is None else s["stream"],
                _ms(s["start_us"] - result["top_segments"][0]["start_us"]),
                _ms(s["dur_us"]),
            )
            for s in result["top_segments"]
        ],
    )
    click.echo(
        f"span {_ms(result['span_us'])} ms, of which {_ms(result['unattributed_us'])} ms on zero-weight edges "
        f"(gaps between top-level operators, waits in blocking calls); {result['segments_on_path']} segments, "
        f"{result['gpu_activities_on_path']} GPU activities on the path"
    )


_CP_LABELS = {
    "gpu_compute": "GPU compute",
    "gpu_communication": "GPU communication",
    "gpu_memory": "GPU memcpy/memset",
    "gpu_idle": "GPU idle (gap between kernels)",
    "launch_delay": "launch delay",
    "cpu_launch": "host: launch calls",
    "cpu_runtime": "host: other runtime calls",
    "cpu_host": "host: operators",
}


def _short(name: str) -> str:
    from tprimat.trace.analyze import shorten_kernel_name

    return shorten_kernel_name(name)


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
@click.option(
    "--no-operators",
    is_flag=True,
    help="Do not split the step by operator (faster: the CPU operators are not read).",
)
@click.option(
    "--critical-path",
    "with_critical_path",
    is_flag=True,
    help="Also give each operator group's share of GPU time on the critical path of one step "
    "(the last complete one; reads every trace again).",
)
@_nvtx_step
@_jobs
def compare(
    a: str,
    b: str,
    label_a: str | None,
    label_b: str | None,
    steps: str | None,
    output: Path | None,
    as_json: bool,
    no_operators: bool,
    with_critical_path: bool,
    nvtx_step: str | None,
    jobs: int | None,
) -> None:
    """Step time of A and B (host ProfilerStep) and the difference (B − A) by kernel category and GPU idle,
    then by operator (name and recorded shapes) with each side's roofline efficiency.

    A and B are trace files, directories of per-rank traces, or run directories
    (their traces/ folder).  Nsight Systems SQLite exports and rocprofv3
    databases, JSON outputs, Perfetto traces and CSV traces compare by category too: they have no
    operators (no operator split or critical path), and no profiler steps (the whole profile window is one
    span) unless NVTX ranges of an Nsight Systems export mark them
    (--nvtx-step); the output says so.
    """
    import json

    from tprimat.trace.analyze import parse_steps
    from tprimat.trace.compare import compare_traces
    from tprimat.trace.nsys import nvtx_step_pattern

    nvtx_step_pattern(nvtx_step)  # a bad regex is bad input before any file is read
    comparison = compare_traces(
        [a],
        [b],
        labels=(label_a, label_b),
        steps=parse_steps(steps),
        workers=jobs,
        operators=not no_operators,
        critical_path=with_critical_path,
        nvtx_step=nvtx_step,
    )
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
    _operator_gap(comparison, la, lb)
    for side in (comparison.a, comparison.b):
        for note in side.notes:
            click.echo(f"note: {note}")
    if output is not None:
        written = ".json and .png" if png is not None else "and .json"
        click.echo(f"wrote {output / 'trace_comparison.md'} {written}")


def _operator_gap(comparison: TraceComparison, la: str, lb: str, limit: int = 12) -> None:
    """The step difference by operator group: the decomposition, the largest groups, the roofline sentences."""
    gap = comparison.operator_gap()
    if gap is None:
        return
    parts = gap.components()
    paths = gap.has_critical_path
    blank = ("", "") if paths else ()
    rows = [
        (
            _text(r["name"]),
            _text(r["shapes"]),
            _ms(r["a_us"]),
            _ms(r["b_us"]),
            f"{r['delta_us'] / 1000.0:+.3f}",
            _fraction(r["a_roofline_fraction"]),
            _fraction(r["b_roofline_fraction"]),
            *((_fraction(r["a_on_path"]), _fraction(r["b_on_path"])) if paths else ()),
        )
        for r in gap.matched()[:limit]
    ]
    # the rest of the difference: unmatched operators (no time per side), GPU time of no operator, idle
    rows.append(("unmatched operators", "", "", "", f"{parts['unmatched_us'] / 1000.0:+.3f}", "", "", *blank))
    for label, a_us, b_us, delta in (
        ("GPU time of no operator", gap.a.no_operator_us, gap.b.no_operator_us, parts["no_operator_us"]),
        ("idle (no GPU activity)", gap.a.idle_us, gap.b.idle_us, parts["idle_us"]),
    ):
        rows.append((label, "", _ms(a_us), _ms(b_us), f"{delta / 1000.0:+.3f}", "", "", *blank))
    columns = ["operator", "shapes", la, lb, f"{lb} − {la}", f"roofline {la}", f"roofline {lb}"]
    if paths:
        columns += [f"on critical path {la}", f"on critical path {lb}"]
    print_table(
        f"Operators behind the difference (ms per step; {len(gap.matched())} groups matched by name and shapes)",
        columns,
        rows,
    )
    click.echo(
        f"step {gap.delta_us / 1000.0:+.3f} ms = matched {parts['matched_us'] / 1000.0:+.3f} + unmatched "
        f"{parts['unmatched_us'] / 1000.0:+.3f} + no operator {parts['no_operator_us'] / 1000.0:+.3f} + idle "
        f"{parts['idle_us'] / 1000.0:+.3f}"
    )
    for line in comparison.operator_lines():
        click.echo(f"  {_text(line)}")
    for note in (*gap.a.notes, *gap.b.notes):
        click.echo(f"note: {note}")


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{100.0 * value:.0f}%"


@trace.command("roofline")
@click.argument("trace_file", metavar="TRACE", type=click.Path(exists=True, dir_okay=False, path_type=str))
@click.option(
    "--step", type=int, default=None, help="Only ProfilerStep#N (default: as trace analyze, or the only step)."
)
@click.option("--top", default=25, show_default=True, help="How many operator groups to list by GPU time.")
@click.option(
    "-o",
    "--output",
    "plot_path",
    default=None,
    metavar="PLOT.png",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the roofline plot (PNG; needs matplotlib).",
)
@click.option(
    "--microbench",
    "microbench_dir",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where microbenchmark results are kept (default: $TPRIMAT_MICROBENCH_DIR or ~/.cache/tprimat/microbench); "
    "the device's latest one adds its measured MAMF as a second compute roof.",
)
@click.option("--json", "as_json", is_flag=True, help="Print every group as JSON.")
@_jobs
def roofline_command(
    trace_file: str,
    step: int | None,
    top: int,
    plot_path: Path | None,
    microbench_dir: Path | None,
    as_json: bool,
    jobs: int | None,
) -> None:
    """Per-operator roofline of one Kineto trace recorded with record_shapes=True.

    For every operator that launched GPU work (grouped by name, input shapes and
    dtypes): GPU time, FLOPs and bytes per call from the recorded shapes, achieved
    TFLOP/s and TB/s, arithmetic intensity, and the fraction of the roofline
    (datasheet peak of its dtype and memory bandwidth of the device) it reaches.
    """
    from tprimat.trace.roofline import plot_roofline, roofline_file

    result = roofline_file(trace_file, step=step, microbench_dir=microbench_dir, workers=jobs)
    if plot_path is not None:
        try:
            import matplotlib  # noqa: F401  (the plot extra)
        except ImportError:
            raise click.ClickException("matplotlib is not installed (pip install 'tprimat[plot]'): no plot") from None
        plot_roofline(result, plot_path)
    if as_json:
        echo_json(result)
        return
    ceilings = result["ceilings"]
    window = result["window"]
    scope = f"steps {window['steps'][0]}..{window['steps'][-1]}" if window.get("steps") else "whole trace"
    if window["mode"] == "all":
        scope = "whole trace"
    peaks = ", ".join(f"{k} {v:g}" for k, v in ceilings["peaks_tflops"].items()) or "none"
    bandwidth = f"{ceilings['memory_tbs']:g} TB/s" if ceilings["memory_tbs"] else "none"
    click.echo(
        _text(
            f"{Path(result['file']).name} — {result['device'] or 'unknown device'}, {scope}; peaks (TFLOP/s) {peaks}; "
            f"memory {bandwidth}"
            + (
                f"; MAMF {', '.join(f'{k} {v:.0f}' for k, v in ceilings['mamf_tflops'].items())}"
                if ceilings["mamf_tflops"]
                else ""
            )
        )
    )
    mamf = bool(ceilings["mamf_tflops"])
    columns = [
        "operator",
        "shapes",
        "calls",
        "GPU ms",
        "share",
        "GFLOP/call",
        "MB/call",
        "FLOP/B",
        "TFLOP/s",
        "TB/s",
        "roofline",
    ]
    if mamf:
        columns.append("MAMF roofline")
    columns.append("note")
    rows = []
    for r in result["groups"][:top]:
        row = [
            _text(r["name"]),
            _text(r["shapes"]),
            r["calls"],
            _ms(r["gpu_us"]),
            f"{100 * r['share']:.1f}%",
            _num(r["flops_per_call"], 1e9),
            _num(r["bytes_per_call"], 1e6),
            _num(r["intensity"], 1.0),
            _num(r["tflops"], 1.0),
            _num(r["tbs"], 1.0, digits=2),
            _fraction(r["roofline_fraction"]) + (f" {r['bound'][0]}" if r["bound"] else ""),
        ]
        if mamf:
            row.append(_fraction(r["mamf_fraction"]))
        row.append(_text(r["reason"] or r["note"] or ""))
        rows.append(row)
    print_table(f"top {len(rows)} of {len(result['groups'])} operator groups by GPU time", columns, rows)
    totals = result["totals"]
    click.echo(
        f"GPU time {_ms(totals['gpu_us'])} ms: operators {_ms(totals['operator_us'])} ms "
        f"(costed {_ms(totals['costed_us'])}, with a roofline {_ms(totals['roofline_us'])}, "
        f"known but not costed {_ms(totals['uncosted_us'])}, unknown {_ms(totals['unknown_us'])}), "
        f"no operator {_ms(totals['no_operator_us'])} ms; roofline: c = compute-bound, m = memory-bound"
    )
    for note in result["notes"]:
        click.echo(f"note: {_text(note)}")
    if plot_path is not None:
        click.echo(f"wrote {plot_path}")


def _num(value: float | None, unit: float, digits: int = 1) -> str:
    return "-" if value is None else f"{value / unit:.{digits}f}"
