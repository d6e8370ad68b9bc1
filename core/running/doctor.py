"""Pre-flight checks: conditions that make benchmark numbers untrustworthy when ignored.

``tprimat doctor`` prints the findings; ``tprimat run`` and ``tprimat suite
run`` run the same checks first (warnings, or a refusal with ``--strict``)
and record the findings in the run manifest so a report can show them.  Each
check reads the machine through a :class:`Probe`, so tests can give it any
machine state.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

if TYPE_CHECKING:
    from tprimat.settings.config import BenchmarkConfig

GIB = 2**30
#: Below this much free space in the output directory, traces and logs may be cut short.
MIN_FREE_DISK_GIB = 20.0


@attrs.frozen(kw_only=True)
class Finding:
    """One reason to distrust a measurement, and what to do about it."""

    check: str  # stable identifier, e.g. "numa-balancing"
    severity: Literal["warning", "info"]
    message: str
    fix: str


def _read_file(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _run_tool(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


@attrs.frozen(kw_only=True)
class Probe:
    """How the checks see the machine: environment, files, tools, disk."""

    env: Mapping[str, str] = attrs.Factory(lambda: dict(os.environ))
    read_file: Callable[[str], str | None] = _read_file
    run_tool: Callable[[list[str]], str | None] = _run_tool
    free_disk_bytes: Callable[[Path], int] = lambda path: shutil.disk_usage(path).free
    load_average: Callable[[], tuple[float, float, float] | None] = lambda: _load_average()
    cpu_count: Callable[[], int | None] = lambda: os.cpu_count()


def _load_average() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:  # not available on this system
        return None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in {"", "0", "false", "no", "off"}


def check_launch_blocking(probe: Probe) -> list[Finding]:
    findings = []
    for name in ("CUDA_LAUNCH_BLOCKING", "HIP_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL", "TORCH_USE_CUDA_DSA"):
        if _truthy(probe.env.get(name)):
            findings.append(
                Finding(
                    check="launch-blocking",
                    severity="warning",
                    message=f"{name}={probe.env[name]} serialises or instruments every kernel launch",
                    fix=f"unset {name} for timed runs (it is a debugging switch)",
                )
            )
    return findings


def check_tunableop(probe: Probe) -> list[Finding]:
    if _truthy(probe.env.get("PYTORCH_TUNABLEOP_TUNING")) and _truthy(probe.env.get("PYTORCH_TUNABLEOP_ENABLED")):
        return [
            Finding(
                check="tunableop-tuning",
                severity="warning",
                message="PyTorch TunableOp is tuning GEMMs during the timed run",
                fix="tune once in a separate run, then time with PYTORCH_TUNABLEOP_TUNING=0",
            )
        ]
    return []


_DEBUG_LOGGING = {
    "NCCL_DEBUG": {"INFO", "TRACE"},
    "RCCL_DEBUG": {"INFO", "TRACE"},
    "TORCH_DISTRIBUTED_DEBUG": {"INFO", "DETAIL"},
    "TORCH_CPP_LOG_LEVEL": {"INFO"},
    "NCCL_DEBUG_SUBSYS": None,  # any value: only meaningful with debug output on
}


def check_debug_logging(probe: Probe) -> list[Finding]:
    findings = []
    for name, noisy in _DEBUG_LOGGING.items():
        value = probe.env.get(name)
        if value and (noisy is None or value.strip().upper() in noisy):
            findings.append(
                Finding(
                    check="debug-logging",
                    severity="warning",
                    message=f"{name}={value} turns on debug logging, which slows collectives and start-up",
                    fix=f"unset {name} (or set it to WARN) for timed runs",
                )
            )
    level = probe.env.get("AMD_LOG_LEVEL", "").strip()
    if level.isdigit() and int(level) > 0:
        findings.append(
            Finding(
                check="debug-logging",
                severity="warning",
                message=f"AMD_LOG_LEVEL={level} makes the HIP runtime log every call",
                fix="unset AMD_LOG_LEVEL for timed runs",
            )
        )
    return findings


def check_numa_balancing(probe: Probe) -> list[Finding]:
    value = probe.read_file("/proc/sys/kernel/numa_balancing")
    if value is not None and value.strip() not in {"", "0"}:
        return [
            Finding(
                check="numa-balancing",
                severity="warning",
                message="automatic NUMA balancing is on (/proc/sys/kernel/numa_balancing = "
                f"{value.strip()}); AMD's tuning guides for Instinct GPUs require it off",
                fix="sudo sysctl kernel.numa_balancing=0",
            )
        ]
    return []


def check_gpu_processes(probe: Probe) -> list[Finding]:
    findings = []
    nvidia = probe.run_tool(
        ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits"]
    )
    if nvidia and nvidia.strip():
        lines = [line.strip() for line in nvidia.strip().splitlines() if line.strip()]
        findings.append(
            Finding(
                check="gpu-busy",
                severity="warning",
                message=f"{len(lines)} other process(es) hold the GPUs: " + "; ".join(lines[:4]),
                fix="stop them before timing (nvidia-smi shows them)",
            )
        )
    amd = probe.run_tool(["rocm-smi", "--showpids"])
    if amd:
        pids = [line for line in amd.splitlines() if line.strip()[:1].isdigit()]
        if pids:
            findings.append(
                Finding(
                    check="gpu-busy",
                    severity="warning",
                    message=f"{len(pids)} other process(es) use the GPUs: " + "; ".join(p.strip() for p in pids[:4]),
                    fix="stop them before timing (rocm-smi --showpids shows them)",
                )
            )
    return findings


def check_power_cap(probe: Probe) -> list[Finding]:
    text = probe.run_tool(
        ["nvidia-smi", "--query-gpu=index,power.limit,power.default_limit", "--format=csv,noheader,nounits"]
    )
    findings = []
    for line in (text or "").splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 3:
            continue
        try:
            index, limit, default = cells[0], float(cells[1]), float(cells[2])
        except ValueError:
            continue
        if limit < default - 1.0:
            findings.append(
                Finding(
                    check="power-cap",
                    severity="warning",
                    message=f"GPU {index} power limit {limit:.0f} W is below its default {default:.0f} W",
                    fix=f"sudo nvidia-smi -i {index} -pl {default:.0f}",
                )
            )
    return findings


def check_free_disk(probe: Probe, output_dir: Path) -> list[Finding]:
    existing = output_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        free = probe.free_disk_bytes(existing)
    except OSError:
        return []
    if free < MIN_FREE_DISK_GIB * GIB:
        return [
            Finding(
                check="low-disk",
                severity="warning",
                message=f"only {free / GIB:.1f} GiB free under {existing}; logs and traces may be cut short",
                fix=f"free space or choose another --output (at least {MIN_FREE_DISK_GIB:.0f} GiB advised)",
            )
        ]
    return []


#: Load average per CPU core above which other work competes with the run's data loading and launches.
MAX_LOAD_PER_CORE = 1.0


def check_cpu_load(probe: Probe) -> list[Finding]:
    """Other work on the CPUs: the one-minute load average above the core count."""
    load, cores = probe.load_average(), probe.cpu_count()
    if load is None or not cores:
        return []
    one, five, _ = load
    if one <= MAX_LOAD_PER_CORE * cores:
        return []
    return [
        Finding(
            check="cpu-load",
            severity="warning",
            message=f"the CPUs are heavily loaded: load average {one:.2f} (1 min), {five:.2f} (5 min) on {cores} "
            "core(s); other processes compete with data loading, kernel launches and collectives",
            fix="wait for the other work to finish (top/htop shows it) or run on an idle machine",
        )
    ]


#: Hugging Face repositories that need an accepted licence and a token to download.
GATED_PREFIXES = ("meta-llama/",)


def check_hf_token(probe: Probe, tokenizer: str | None) -> list[Finding]:
    if not tokenizer or not tokenizer.startswith(GATED_PREFIXES) or Path(tokenizer).exists():
        return []
    if probe.env.get("HF_TOKEN") or probe.env.get("HUGGING_FACE_HUB_TOKEN"):
        return []
    if _truthy(probe.env.get("HF_HUB_OFFLINE")):
        return []  # offline: the tokenizer must already be in the local cache
    return [
        Finding(
            check="hf-token",
            severity="warning",
            message=f"the tokenizer {tokenizer} is gated on Hugging Face and HF_TOKEN is not set",
            fix="export HF_TOKEN=... (or put HF_TOKEN=... in a git-ignored .tprimat.env), "
            "or pass a local tokenizer directory",
        )
    ]


def run_checks(
    probe: Probe | None = None, *, output_dir: Path | None = None, tokenizer: str | None = None
) -> list[Finding]:
    """Every check, in a stable order."""
    probe = probe or Probe()
    findings: list[Finding] = []
    findings += check_gpu_processes(probe)
    findings += check_power_cap(probe)
    findings += check_numa_balancing(probe)
    findings += check_launch_blocking(probe)
    findings += check_tunableop(probe)
    findings += check_debug_logging(probe)
    findings += check_cpu_load(probe)
    if output_dir is not None:
        findings += check_free_disk(probe, output_dir)
    findings += check_hf_token(probe, tokenizer)
    return findings


def tokenizer_needed(config: BenchmarkConfig) -> str | None:
    """The tokenizer a run of ``config`` loads (None for mock data without one, or when unknown).

    As the backends choose it: ``data.tokenizer``, else the prepared dataset's own tokenizer
    (the local copy next to its data, or the hub id it was made with).  The model's default
    hub tokenizer is never assumed: a dataset made with a local tokenizer does not need it.
    """
    from tprimat.data.prepared import PreparedDatasetError, dataset_json_path, read_dataset_json

    if config.data.tokenizer:
        return config.data.tokenizer
    if config.data.dataset == "mock":
        return None
    try:
        json_path, data = read_dataset_json(config.data.dataset)
    except PreparedDatasetError:
        return None  # the run refuses the dataset itself, naming what is wrong
    local = dataset_json_path(json_path).parent / data["tokenizer"]
    return str(local) if local.is_dir() else data["tokenizer"]


def findings_to_dicts(findings: list[Finding]) -> list[dict[str, str]]:
    """Plain dicts, as recorded in a run manifest under ``extra["doctor"]``."""
    return [attrs.asdict(f) for f in findings]
