"""rocprofv3's database (``--output-format rocpd``) read into the same trace as its CSV files.

No rocpd database of a real run is public with its data (tests/fixtures/traces/PROVENANCE.md
says where we looked), so each test builds one: the tables and views are created by
rocprofiler-sdk's own schema SQL (``rocpd-schema-3/``, verbatim), and the records are the
rows of the real rocprofv3 CSV fixtures, written where rocprofv3's database writer
(``generateRocpd.cpp``) puts them: a dispatch's correlation id in its ``rocpd_event``'s
``stack_id``, its kernel's name in ``rocpd_info_kernel_symbol.display_name``, an API call's
name and category in ``rocpd_string``.  The CSV reader of the same rows is the reference.
"""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.trace.reader import ACTIVITY_CODES, TraceFormatError, load_trace, sniff_format, traces_in
from tprimat.trace.rocpd import is_rocpd, read_rocpd
from tprimat.trace.rocprof import read_rocprof_csv

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
SCHEMA = FIXTURES / "rocprofv3" / "rocpd-schema-3"
KERNELS = FIXTURES / "rocprofv3" / "sdk-docs-stream-id" / "kernel_trace.csv"  # 8 dispatches, agent 2, 2 streams
OLD_KERNELS = FIXTURES / "rocprofv3" / "sdk-docs-2024-08" / "kernel_trace.csv"  # 7 dispatches, agent 1
COPIES = FIXTURES / "rocprofv3" / "sdk-docs-memory-copy" / "memory_copy_trace.csv"  # 4 copies, agents 0 and 4
CALLS = FIXTURES / "rocprofv3" / "sdk-docs-2024-07" / "hip_runtime_trace.csv"  # 8 HIP runtime calls
#: a guid as rocprofv3 writes it (rocprofiler-sdk's docs/data/rocpd-to-csv.csv)
GUID = "0000ddb5-8903-7903-b269-cd8d3745bb8a"
#: the product name rocprofv3 writes for an MI300X; the CSV fixtures give only an agent number
PRODUCT = "AMD Instinct MI300X"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return [row for row in csv.DictReader(fh) if row.get("Start_Timestamp")]


def _agent(value: str) -> int:
    """An agent number as rocprofv3's CSV writes it: ``2`` or ``Agent 4``."""
    return int(value.split()[-1])


class _Rocpd:
    """A database made by rocprofiler-sdk's schema SQL, filled as rocprofv3's writer fills it."""

    def __init__(self, path: Path, gpus: dict[int, str]) -> None:
        self.con = sqlite3.connect(path)
        uuid = "_" + GUID.replace("-", "_")
        for part in ("rocpd_tables", "rocpd_views", "data_views"):
            sql = (SCHEMA / f"{part}.sql").read_text().replace("{{uuid}}", uuid).replace("{{guid}}", GUID)
            self.con.executescript(sql)
        self.t = {name: f"{name}{uuid}" for name in ("rocpd_string", "rocpd_event")}
        self.uuid = uuid
        self._insert("rocpd_info_node", id=1, hash=1, machine_id="node", hostname="node")
        self._insert("rocpd_info_process", id=1, nid=1, pid=21228)
        self._insert("rocpd_info_agent", id=0, nid=1, pid=1, type="CPU", name="CPU", product_name="CPU")
        for agent, product in gpus.items():
            self._insert("rocpd_info_agent", id=agent, nid=1, pid=1, type="GPU", name="gfx942", product_name=product)
        self._insert("rocpd_info_code_object", id=1, nid=1, pid=1, agent_id=next(iter(gpus)))
        self._insert("rocpd_info_stream", id=0, nid=1, pid=1, name="Default Stream")

    def _insert(self, table: str, ignore: bool = False, **values: object) -> int:
        columns = ", ".join(f'"{c}"' for c in values)
        marks = ", ".join("?" for _ in values)
        verb = "INSERT OR IGNORE" if ignore else "INSERT"
        cur = self.con.execute(f"{verb} INTO {table}{self.uuid} ({columns}) VALUES ({marks})", tuple(values.values()))
        return int(cur.lastrowid or 0)

    def _string(self, text: str) -> int:
        row = self.con.execute(f"SELECT id FROM {self.t['rocpd_string']} WHERE string = ?", (text,)).fetchone()
        return row[0] if row else self._insert("rocpd_string", string=text)

    def _event(self, category: str, correlation: int) -> int:
        return self._insert(
            "rocpd_event", category_id=self._string(category), stack_id=correlation, parent_stack_id=correlation
        )

    def _thread(self, tid: str) -> int:
        self._insert("rocpd_info_thread", ignore=True, id=int(tid), nid=1, pid=1, tid=int(tid))
        return int(tid)

    def kernels(self, path: Path) -> _Rocpd:
        for row in _rows(path):
            stream = int(row.get("Stream_Id") or 0)
            queue = int(row["Queue_Id"])
            self._insert("rocpd_info_stream", ignore=True, id=stream, nid=1, pid=1, name=f"Stream {stream}")
            self._insert("rocpd_info_queue", ignore=True, id=queue, nid=1, pid=1, name=f"Queue {queue}")
            kernel = int(row["Kernel_Id"])
            self._insert(
                "rocpd_info_kernel_symbol", ignore=True, id=kernel, nid=1, pid=1, code_object_id=1,
                kernel_name=row["Kernel_Name"], display_name=row["Kernel_Name"],
            )  # fmt: skip
            self._insert(
                "rocpd_kernel_dispatch",
                nid=1, pid=1, tid=self._thread(row["Thread_Id"]), agent_id=_agent(row["Agent_Id"]), kernel_id=kernel,
                dispatch_id=int(row["Dispatch_Id"]), queue_id=queue, stream_id=stream,
                start=int(row["Start_Timestamp"]), end=int(row["End_Timestamp"]),
                workgroup_size_x=int(row["Workgroup_Size_X"]), workgroup_size_y=int(row["Workgroup_Size_Y"]),
                workgroup_size_z=int(row["Workgroup_Size_Z"]), grid_size_x=int(row["Grid_Size_X"]),
                grid_size_y=int(row["Grid_Size_Y"]), grid_size_z=int(row["Grid_Size_Z"]),
                region_name_id=self._string(""), event_id=self._event("KERNEL_DISPATCH", int(row["Correlation_Id"])),
            )  # fmt: skip
        return self

    def copies(self, path: Path) -> _Rocpd:
        for row in _rows(path):
            self._insert(
                "rocpd_memory_copy",
                nid=1, pid=1, start=int(row["Start_Timestamp"]), end=int(row["End_Timestamp"]),
                name_id=self._string(row["Direction"]), src_agent_id=_agent(row["Source_Agent_Id"]),
                dst_agent_id=_agent(row["Destination_Agent_Id"]), size=0,  # the CSV has no size; not read
                stream_id=int(row["Stream_Id"]), event_id=self._event("MEMORY_COPY", int(row["Correlation_Id"])),
            )  # fmt: skip
        return self

    def calls(self, path: Path) -> _Rocpd:
        for row in _rows(path):
            correlation = int(row["Correlation_Id"])
            self._insert(
                "rocpd_region",
                id=correlation, nid=1, pid=1, tid=self._thread(row["Thread_Id"]),
                start=int(row["Start_Timestamp"]), end=int(row["End_Timestamp"]),
                name_id=self._string(row["Function"]), event_id=self._event(row["Domain"], correlation),
            )  # fmt: skip
        return self

    def close(self) -> None:
        self.con.commit()
        self.con.close()


def _database(path: Path, *parts: Path, gpus: dict[int, str] | None = None) -> Path:
    db = _Rocpd(path, gpus or {2: PRODUCT, 4: PRODUCT})
    for part in parts:
        {KERNELS: db.kernels, OLD_KERNELS: db.kernels, COPIES: db.copies, CALLS: db.calls}[part](part)
    db.close()
    return path


def _events(trace) -> list[tuple]:
    return [
        (ts, dur, trace.names[n], ACTIVITY_CODES[c], corr)
        for ts, dur, n, c, corr in zip(trace.ts, trace.dur, trace.name_id, trace.code, trace.correlation, strict=True)
    ]


def test_a_rocpd_database_reads_as_the_csv_files_of_the_same_records(tmp_path: Path) -> None:
    db = _database(tmp_path / "21228_results.db", KERNELS, COPIES)
    shutil.copy(KERNELS, tmp_path / "run_kernel_trace.csv")
    shutil.copy(COPIES, tmp_path / "run_memory_copy_trace.csv")
    ours, theirs = read_rocpd(db), read_rocprof_csv(tmp_path / "run_kernel_trace.csv")
    assert _events(ours) == _events(theirs)
    assert ours.metadata["time_origin_ns"] == theirs.metadata["time_origin_ns"] == 1057963336487172
    kernels = [i for i, c in enumerate(ours.code) if ACTIVITY_CODES[c] == "kernel"]
    assert len(kernels) == 8 and [ours.stream[i] for i in kernels] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert [ours.stream[i] for i in kernels] == [theirs.stream[i] for i in kernels]
    copies = [i for i, c in enumerate(ours.code) if ACTIVITY_CODES[c] == "gpu_memcpy"]
    assert [ours.names[ours.name_id[i]] for i in copies] == ["Memcpy HOST_TO_DEVICE"] * 2 + [
        "Memcpy DEVICE_TO_HOST"
    ] * 2
    assert [ours.stream[i] for i in copies] == [0] * 4  # the database keeps a copy's stream, the CSV does not
    first = _rows(KERNELS)[0]
    index = kernels[0]
    assert ours.ts[index] * 1000 + ours.metadata["time_origin_ns"] == int(first["Start_Timestamp"])
    assert ours.dur[index] * 1000 == int(first["End_Timestamp"]) - int(first["Start_Timestamp"])
    assert (ours.format, ours.vendor, ours.device) == ("rocprofv3-rocpd", "amd", PRODUCT)
    assert ours.metadata["agent"] == 2 and ours.metadata["schema_version"] == "3"
    assert ours.runtime_api is None  # no API trace recorded


def test_the_kernels_read_are_those_of_the_sdks_own_kernels_view(tmp_path: Path) -> None:
    """rocprofiler-sdk's ``kernels`` view joins the same tables its own way (data_views.sql)."""
    db = _database(tmp_path / "21228_results.db", KERNELS)
    view = sqlite3.connect(db).execute("SELECT start, name, stream_id, stack_id FROM kernels ORDER BY start").fetchall()
    trace = read_rocpd(db)
    origin = trace.metadata["time_origin_ns"]
    ours = [
        (round(ts * 1000) + origin, trace.names[n], stream, corr)
        for ts, n, stream, corr in zip(trace.ts, trace.name_id, trace.stream, trace.correlation, strict=True)
    ]
    assert ours == view and len(view) == 8


def test_activities_of_equal_times_are_ordered_alike_in_the_database_and_the_csv(tmp_path: Path) -> None:
    """Records of equal start and end, stored in reverse, come out ordered by name, kind, stream and
    correlation: the database's rows sorted by SQLite and the CSV's sorted in memory agree."""
    files = {}
    for source in (KERNELS, COPIES):
        rows = _rows(source)[::-1]
        for i, row in enumerate(rows):  # two runs of equal times, each mixing dispatches and copies
            row["Start_Timestamp"], row["End_Timestamp"] = str(5_000 + i % 2), str(9_000 + i % 2)
        files[source] = tmp_path / f"run_{source.name}"
        with open(files[source], "w", newline="") as fh:
            writer = csv.DictWriter(fh, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    db = _Rocpd(tmp_path / "21228_results.db", {2: PRODUCT, 4: PRODUCT})
    db.kernels(files[KERNELS]).copies(files[COPIES])
    db.close()
    ours, theirs = read_rocpd(tmp_path / "21228_results.db"), read_rocprof_csv(files[KERNELS])
    assert _events(ours) == _events(theirs) and len(ours.ts) == 12
    keys = [
        (ts, dur, theirs.names[n], ACTIVITY_CODES[c], stream, corr)
        for ts, dur, n, c, stream, corr in zip(
            theirs.ts, theirs.dur, theirs.name_id, theirs.code, theirs.stream, theirs.correlation, strict=True
        )
    ]
    assert keys == sorted(keys) and len({key[:2] for key in keys}) == 2


def test_hip_calls_give_the_runtime_summary_of_the_csv(tmp_path: Path) -> None:
    trace = read_rocpd(_database(tmp_path / "238_results.db", CALLS))
    assert trace.runtime_api == read_rocprof_csv(CALLS).runtime_api
    calls = _rows(CALLS)
    launches = [r for r in calls if r["Function"] == "hipLaunchKernel"]
    assert trace.runtime_api["calls"] == len(calls) == 8 and trace.runtime_api["launch_calls"] == len(launches) == 1
    launch_ns = int(launches[0]["End_Timestamp"]) - int(launches[0]["Start_Timestamp"])
    assert trace.runtime_api["launch_us"] == pytest.approx(launch_ns / 1000)
    assert trace.device is None and not len(trace.ts)  # a database without kernels: no agent analysed


def test_the_agent_with_most_kernels_is_analysed(tmp_path: Path) -> None:
    db = _database(tmp_path / "x_results.db", KERNELS, OLD_KERNELS, gpus={1: "AMD Instinct MI210", 2: PRODUCT})
    trace = read_rocpd(db)
    assert len(trace.ts) == len(_rows(KERNELS)) == 8
    assert trace.device == PRODUCT and trace.metadata["other_agents_kernels"] == {f"{GUID}/1": len(_rows(OLD_KERNELS))}


def test_gzip_databases_and_the_directory_search(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    plain = _database(tmp_path / "run" / "21228_results.db", KERNELS)
    packed = tmp_path / "run" / "sub" / "4242_results.db.gz"
    packed.parent.mkdir()
    with open(plain, "rb") as src, gzip.open(packed, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    other = tmp_path / "run" / "results.db"  # another tool's SQLite database: not a profile
    sqlite3.connect(other).execute("CREATE TABLE results (x)").connection.commit()
    assert traces_in(tmp_path / "run") == [plain, packed]
    assert sniff_format(packed) == sniff_format(plain) == "rocprofv3-rocpd" and is_rocpd(packed)
    assert sniff_format(other) == "nsys-sqlite" and not is_rocpd(other)
    assert _events(load_trace(packed)) == _events(load_trace(plain))
    with pytest.raises(TraceFormatError, match="nsys export --type sqlite"):
        load_trace(other)  # any other SQLite database is still taken for an Nsight Systems export
    nsys = FIXTURES / "nsys" / "saxpy-mpi-cuda_nsys_perlmutter0.sqlite.gz"
    assert sniff_format(nsys) == "nsys-sqlite" and load_trace(nsys).format == "nsys-sqlite"


def test_a_rocpd_database_without_the_dispatch_view_is_one_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "1234_results.db"
    sqlite3.connect(db).execute("CREATE TABLE rocpd_string_0000 (id, string)").connection.commit()
    with pytest.raises(TraceFormatError, match="without rocprofv3's kernel dispatch view"):
        load_trace(db)


def test_cli_analyzes_and_compares_rocpd_databases(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    db = _database(tmp_path / "a" / "21228_results.db", KERNELS, COPIES)
    done = CliRunner().invoke(cli, ["trace", "analyze", "--json", "-j", "1", str(db.parent)])
    assert done.exit_code == 0, done.output
    (rank,) = json.loads(done.output)["ranks"]
    assert (rank["format"], rank["device"]) == ("rocprofv3-rocpd", PRODUCT)
    text = CliRunner().invoke(cli, ["trace", "analyze", "-j", "1", str(db)]).output
    assert "rocprofv3-rocpd" in text and PRODUCT in text
    (tmp_path / "b").mkdir()
    shutil.copy(KERNELS, tmp_path / "b" / "run_kernel_trace.csv")
    shutil.copy(COPIES, tmp_path / "b" / "run_memory_copy_trace.csv")
    done = CliRunner().invoke(cli, ["trace", "compare", str(db), str(tmp_path / "b"), "--json", "--jobs", "1"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["a"]["step_basis"] == data["b"]["step_basis"] == "gpu span"
    assert data["a"]["vendor"] == data["b"]["vendor"] == "amd"
