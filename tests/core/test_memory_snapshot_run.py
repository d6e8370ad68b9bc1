"""``tprimat run --memory-snapshot``: each backend asks its framework for its own allocator snapshot,
the run lists what was written, and ``tprimat memory summarize`` reads it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tprimat import hookimpl
from tprimat.contract import BackendSpec, IterationRecord, LaunchPlan, Requirements
from tprimat.contract.registry import Registry
from tprimat.hardware.platform import PlatformInfo
from tprimat.running.dryrun import describe_plan
from tprimat.running.prepare import RunRequest, prepare
from tprimat.running.runner import run

SNAPSHOT = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "memory"
    / "JasperSolt-EoR_NN_2025-02-05_cnn-counterfactuals_adam_1gpu_snapshot.pickle"
)
#: A stand-in framework: it "dumps" its allocator snapshot (a real one, copied) where the
#: plan says, and logs three steps.
PROGRAM = """
import shutil, sys, os
if len(sys.argv) > 1:
    os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
    shutil.copyfile(sys.argv[1], sys.argv[2])
for step in (1, 2, 3):
    print(f"snap step {step} time_ms 10.0", flush=True)
"""
STEP = re.compile(r"^snap step (\d+) time_ms ([\d.]+)")


class Snapshotting:
    writes = True  # whether the stand-in framework really dumps its snapshot

    @hookimpl
    def register_backends(self):
        return [BackendSpec(name="snap", platform="any", framework="snap", description="d", requires=Requirements())]

    @hookimpl
    def detect_platform(self):
        return PlatformInfo(platform="cpu", source="test")

    @hookimpl
    def launch(self, backend, context):
        argv = [sys.executable, "-c", PROGRAM]
        globs: tuple[str, ...] = ()
        if context.memory_snapshot:
            if self.writes:
                argv += [str(SNAPSHOT), str(context.run_dir / "memory" / "snapshot-rank0.pickle")]
            globs = ("memory/snapshot-rank*.pickle",)
        return LaunchPlan(argv=tuple(argv), cwd=context.run_dir, snapshot_globs=globs)

    @hookimpl
    def parse_metrics(self, backend, lines, source):
        return (
            IterationRecord(iteration=int(m[1]), step_time_s=float(m[2]) / 1000, source=source)
            for line in lines
            if (m := STEP.match(line))
        )


def _registry(writes: bool = True) -> Registry:
    plugin = Snapshotting()
    plugin.writes = writes
    registry = Registry()
    registry.register(plugin, name="snap")
    return registry


def _request(tmp_path: Path, snapshot: bool) -> RunRequest:
    return RunRequest(
        backend="snap",
        output=tmp_path / "runs",
        run_id="r",
        memory_snapshot=snapshot,
        overrides=("monitor.enabled=false", "benchmark.warmup_iterations=0"),
        iterations=3,
    )


def test_the_framework_snapshot_is_listed_in_the_result_and_summarized(tmp_path):
    from tprimat.memory.snapshot import summarize_snapshot

    registry = _registry()
    outcome = run(prepare(_request(tmp_path, True), registry), registry)
    result = outcome.result
    assert result is not None and result.run.status == "completed", result.provenance.notes
    assert "memory/snapshot-rank0.pickle" in result.provenance.inputs
    assert any(n.startswith("allocator snapshots: memory/snapshot-rank0.pickle") for n in result.provenance.notes)
    summary = summarize_snapshot(outcome.run_dir / "memory" / "snapshot-rank0.pickle")
    assert summary.devices and summary.devices[0].peak_bytes > 0


def test_a_run_whose_framework_wrote_no_snapshot_says_so(tmp_path):
    registry = _registry(writes=False)
    prepared = prepare(_request(tmp_path, True), registry)
    assert "## memory snapshots\nallocator snapshots written to: memory/snapshot-rank*.pickle" in describe_plan(
        prepared
    )
    result = run(prepared, registry).result
    assert result.run.status == "completed"
    assert any(
        n.startswith("--memory-snapshot: the framework wrote no snapshot (memory/snapshot-rank*.pickle")
        for n in result.provenance.notes
    ), result.provenance.notes
    without = run(prepare(_request(tmp_path / "b", False), _registry()), _registry()).result
    assert not any("snapshot" in n for n in without.provenance.notes)


@pytest.mark.parametrize(
    ("backend", "flag"), [("nvd_megatron", "--record-memory-history"), ("torch", "--memory-snapshot")]
)
def test_built_in_backends_ask_their_framework_for_it(tmp_path, backend, flag):
    registry = Registry.from_environment({})
    prepared = prepare(
        RunRequest(backend=backend, model="llama3.1-tiny", output=tmp_path, memory_snapshot=True), registry
    )
    assert flag in prepared.plan.argv
    assert prepared.plan.snapshot_globs and all(g.startswith("memory/") for g in prepared.plan.snapshot_globs)
