"""Reference figures of HolisticTraceAnalysis's critical-path analysis, for tprimat's agreement test.

Run with a Python that has HolisticTraceAnalysis installed (it is not a tprimat
dependency; 0.5.0 needs pandas < 2.2)::

    python -m venv /tmp/hta && /tmp/hta/bin/pip install HolisticTraceAnalysis==0.5.0 "pandas<2.2" "numpy<2"
    /tmp/hta/bin/python tools/hta_critical_path.py > tests/fixtures/traces/hta_critical_path.json

For each case (a trace fixture, the host annotation whose instance is analysed, and
that instance) it runs ``TraceAnalysis.critical_path_analysis`` on the trace alone in a
temporary directory and prints, as JSON: the path length (sum of its edge weights),
its span (first to last node), the number of nodes on it, and its time by HTA's
``bound_by`` class.  ``tests/core/trace/test_trace_critical_path.py`` compares
tprimat's critical path with these figures.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "traces"
ALEXNET_MEASURE = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
#: (fixture, annotation, instance): the cases HTA's own critical-path tests use, then one profiler
#: step of other fixtures, named so that one host annotation holds the text (HTA also matches the
#: GPU-side copy of a step's annotation, and counts instances in its table's order).
CASES: tuple[tuple[str, str, int | None], ...] = (
    ("hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz", ALEXNET_MEASURE, 1),
    ("hta/critical_path_simple_add_benchmark_result_493459_1694039959_trace.json.gz", ALEXNET_MEASURE, 1),
    ("hta/critical_path_cuda_event_sync_event_sync_trace.json.gz", "ProfilerStep", 0),
    ("hta/critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz", "", None),
    ("hta/nccl_parser_config_nccl_data.json.gz", "ProfilerStep#5", 0),
    ("hta/trace_diff_control_control.json.gz", "ProfilerStep#1010", 0),
    ("hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", "ProfilerStep#102", 0),
    ("hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz", "ProfilerStep#1", 0),
    ("tracelens/mi300_resnet_act_checkpoint.json.gz", "ProfilerStep#16", 0),
)


def _one(fixture: str, annotation: str, instance: int | None) -> dict:
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(FIXTURES / fixture, tmp)
        analysis = TraceAnalysis(trace_dir=tmp)
        rank = next(iter(analysis.t.traces))
        try:
            graph, ok = analysis.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
        except Exception as exc:  # noqa: BLE001 - recorded: where HTA fails is part of the comparison
            return {"fixture": fixture, "annotation": annotation, "instance": instance, "hta_error": repr(exc)[:300]}
        if not ok:
            return {"fixture": fixture, "annotation": annotation, "instance": instance, "hta_error": "no path"}
        df = graph.get_critical_path_breakdown()
        first = graph.node_list[graph.critical_path_nodes[0]]
        last = graph.node_list[graph.critical_path_nodes[-1]]
        bound = {k or "zero_weight": float(v) for k, v in df.groupby("bound_by").duration.sum().items()}
        return {
            "fixture": fixture,
            "annotation": annotation,
            "instance": instance,
            "length_us": float(df.duration.sum()),
            "span_us": float(last.ts - first.ts),
            "nodes_on_path": len(graph.critical_path_nodes),
            "bound_by_us": bound,
        }


def main() -> None:
    logging.disable(logging.WARNING)
    cases = [_one(*case) for case in CASES]
    out = {
        "producer": f"HolisticTraceAnalysis {version('HolisticTraceAnalysis')} (PyPI), "
        f"pandas {version('pandas')}, tools/hta_critical_path.py",
        "cases": cases,
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
