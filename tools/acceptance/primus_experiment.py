#!/usr/bin/env python3
"""Check rendered Primus experiment files against Primus's own loader and argument builder.

For every plan (the text of a ``primus_experiment.yaml``, the environment the launch adds,
and the world size) this runs, in a fresh process per plan, what
``primus-cli direct -- train pretrain --config FILE`` runs for the first worker, up to the
point where Megatron-LM would start ``torch.distributed`` (so before any process group,
model, optimizer or data set exists). It records whether Primus accepts the experiment,
the exact error when it does not, and every attribute of the Megatron-LM argument
namespace that Primus built (Megatron-LM's own arguments and Primus's own keys such as
``enable_primus_turbo`` or ``use_turbo_attention``, which Primus merges into the same
namespace).

It imports nothing from tprimat. It needs a Primus checkout with its Megatron-LM submodule
checked out, and a Python environment with what Primus's loader and Megatron-LM's
argument code import.

Setup (CPU only; no GPU, no ROCm, no transformer_engine, no Primus-Turbo, no apex)::

    git clone https://github.com/AMD-AGI/Primus PRIMUS
    git -C PRIMUS checkout v26.5.0      # the release in rocm/primus:v26.5 (b511d1b6)
    git -C PRIMUS submodule update --init third_party/Megatron-LM
    python3 -m venv VENV
    . VENV/bin/activate
    pip install torch==2.13.0 pyyaml loguru numpy packaging triton pydantic   # CPU torch

(``loguru``: Primus's logger; ``numpy``, ``packaging``: Megatron-LM's declared
dependencies; ``triton``: imported by ``megatron.training.initialize``; ``pydantic``:
imported by ``megatron.training.training`` through ``megatron.rl``.)

Usage::

    python tools/acceptance/primus_experiment.py --primus PRIMUS \\
        --plans plans.json --out accepted.json [--python VENV/bin/python] [--gpu MI300X]

``--python`` is the interpreter of the environment above (default: the one running this
script); ``--gpu`` the GPU the plans are for. The exit status is 0 when every plan is
accepted, 1 when one is not, 2 for bad input. ``plans.json`` is a list of plans::

    [{"id": "amd_primus-llama3.1-8b-iso",
      "experiment": "<the full YAML text>",
      "env": {"NNODES": "1", "GPUS_PER_NODE": "8", "MASTER_ADDR": "127.0.0.1", ...},
      "world_size": 8}]

What is run, per plan (a child process of this script, working directory PRIMUS):

1. The experiment text is written to a temporary ``primus_experiment.yaml``.
2. The environment is this process's (less torchrun's variables, ``PYTHONPATH`` and
   ``VIRTUAL_ENV``), then the plan's ``env``, with ``--python``'s folder first on ``PATH``.
   ``bash`` then sources Primus's ``runner/helpers/envs/primus-env.sh`` under
   ``set -euo pipefail``, as ``runner/primus-cli-direct.sh`` does (its step 5): Primus's
   base environment (``PRIMUS_PATH``, ``DATA_PATH``, ``HF_HOME``, ``PYTHONPATH``, NCCL/RCCL,
   ``CUDA_DEVICE_MAX_CONNECTIONS``, ``NVTE_*`` ...), the GPU file for the detected GPU, and
   its check of the distributed variables.
3. What torchrun sets for the first worker is added: ``RANK``, ``LOCAL_RANK``,
   ``GROUP_RANK``, ``ROLE_RANK`` (node rank x GPUs per node), ``WORLD_SIZE`` (the plan's),
   ``LOCAL_WORLD_SIZE`` (``GPUS_PER_NODE``), ``MASTER_ADDR``, ``MASTER_PORT``.
4. Primus's ``primus/cli/main.py`` runs as ``__main__`` with the arguments the launcher
   gives it: ``train pretrain --config FILE --backend_path PRIMUS/third_party/Megatron-LM``
   (the launcher's Megatron pre-train hook adds ``--backend_path``; with no
   ``BACKEND_PATH``/``MEGATRON_PATH`` set it names that folder). So Primus's own code does
   everything that follows: ``load_primus_config`` (the experiment, its module config and
   model config with their ``extends`` chains, ``${VAR:default}`` substitution,
   ``overrides``), the runtime's CLI overrides, ``MegatronAdapter.convert_config``
   (``MegatronArgBuilder``: Megatron-LM's argparse defaults, then the experiment's values,
   enum arguments converted by Megatron's own converters, the torchrun world size and
   rank), the ``build_args`` patches, the merge of Primus's own keys, the trainer's
   ``setup`` (``parse_args`` made to return that namespace) and the ``setup`` and
   ``before_train`` patches, then ``MegatronPretrainTrainer.train`` -> Megatron-LM's
   ``pretrain`` -> ``initialize_megatron``: ``parse_args`` (Primus's namespace),
   ``validate_args`` (Megatron-LM's, wrapped by Primus's patch so that Primus's
   ``validate_args_on_rocm`` runs after it), ``set_global_variables`` (the tokenizer, which
   sets ``padded_vocab_size``, the micro-batch calculator, writers, timers),
   ``setup_logging`` and the rerun state machine.
5. The run stops where ``initialize_megatron`` calls ``_initialize_distributed``: the
   namespace returned by ``megatron.training.global_vars.get_args()`` at that moment is the
   result. ``accepted`` is True when the run gets there.

As on a real launch, Primus creates the experiment's ``workspace`` folders and ``data/`` and
``logs/`` in the checkout; nothing else is written outside a temporary folder and the logs.

Stubs (listed in the output under ``stubs``):

* ``_initialize_distributed`` (``megatron.training.initialize``): replaced by the stop
  point above; nothing after it runs (process groups, seeds, autoresume, kernel builds,
  model, optimizer, data). Every argument check happens before it.
* ``initialize_megatron(...)`` is called with ``allow_no_cuda=True``: that only skips its
  first line, ``assert torch.cuda.is_available()``; everything else in it runs.
* ``torch.cuda.get_device_capability`` / ``get_device_properties`` answer what ROCm torch
  reports for the planned GPU (``--gpu``; MI300X -> (9, 4), gfx942). ``validate_args`` asks
  for the capability when ``moe_grouped_gemm`` is set (Primus's Qwen 2.5 model file sets
  it) and, through ``get_device_arch_version()``, for TP>1/CP>1 and FSDP; the checks run
  unchanged on that value. Each plan's ``stub_calls`` counts the calls.
* torchrun: one process with the first worker's torchrun variables (step 3) instead of
  ``GPUS_PER_NODE`` processes; arguments differ between workers only in ``rank`` and
  ``local_rank``.
* ``rocm-smi``: a shim that reports the planned GPU (``--gpu``, default MI300X), so
  ``primus-env.sh`` sources that GPU's ``runner/helpers/envs/<GPU>.sh`` as on the real machine;
  ``ROCM_HOME`` points at an empty folder when ``/opt/rocm`` is missing, because
  ``primus-env.sh`` (``ensure_rocm_ld_library_path`` under ``set -e``) stops without one.
  Both only shape shell variables (GPU model, ``LD_LIBRARY_PATH``).
* Launcher hooks are not run (``runner/helpers/hooks``): they rebuild or pip-install
  packages (Primus-Turbo, UCCL, ``flash-linear-attention``...), detect NICs, build
  Megatron-LM's C++ data set helper and prepare data. For these plans their only
  outputs are environment variables that neither the loader nor the argument code read
  (``AITER_LOG_LEVEL``, ``PRIMUS_TURBO_MOE_DISPATCH_COMBINE_BACKEND``,
  ``TE_HIPBLASLT_TUNING_*``, NCCL network variables) and ``--backend_path``, which step 4
  passes.

Nothing else is replaced: Primus's loader, its patches (each runs or is skipped by its own
condition) and Megatron-LM's ``validate_args`` run as written. Some Primus patches are
conditioned on the platform (``torch.version.hip``, an importable ``primus_turbo`` or
``transformer_engine``, the GPU architecture) and so are skipped here while they would
apply on the image; see ``PLATFORM_PATCHES``. None of them changes an argument: they swap
layer implementations, kernels or environment variables used when the model is built.
A patch whose condition holds but which needs a package missing here (e.g.
``megatron.moe.permute_fusion`` imports ``transformer_engine_torch``) is set aside by
Primus's own patch runner, which logs it and goes on; each plan lists those under
``patches_failed``.

The output (``--out``) holds ``primus_checkout``, ``primus_commit``, ``megatron_commit``
(``git rev-parse HEAD`` of each checkout), ``megatron_submodule_commit`` (the commit
Primus's tree pins), ``megatron_core_version`` (``megatron/core/package_info.py``),
``command`` (this run), ``launcher_equivalent``, ``stubs``, ``platform_patches`` and
``results``, one per plan::

    {"id", "accepted": bool, "error": "Type: message (file:line)" | null (one line),
     "command": [argv of the child], "primus_argv": [what primus/cli/main.py received],
     "values": {key: value},             # every attribute of the namespace, JSON-safe
                                         # (enums as "AttnBackend.flash", dtypes as "torch.bfloat16")
     "overrides_changed": {key: {"written": value, "final": value}},
     "overrides_absent": [key],          # written, but not an attribute of the namespace
     "stub_calls": {stub: count},
     "patches_applied": {phase: [patch id]},   # Primus's own summary lines
     "patches_failed": {patch id: reason},     # set aside by Primus's patch runner
     "log": path of the child's output}
"""

from __future__ import annotations

import argparse
import ast
import enum
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

PLAN_TIMEOUT_S = 600
MEGATRON_SUBDIR = Path("third_party") / "Megatron-LM"
TORCHRUN_ENV = (
    "RANK",
    "LOCAL_RANK",
    "GROUP_RANK",
    "ROLE_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE",
    "ROLE_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
)
DROPPED_ENV = (*TORCHRUN_ENV, "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
RESULT_ENV = "PRIMUS_ACCEPTANCE_RESULT"
#: What ROCm torch reports as (major, minor) for each GPU's gfx target.
GPU_CAPABILITY = {"MI250X": (9, 0), "MI300X": (9, 4), "MI325X": (9, 4), "MI350X": (9, 5), "MI355X": (9, 5)}

STUBS = [
    {
        "name": "megatron.training.initialize._initialize_distributed",
        "replaces": "the stop point: records get_args() and ends the run",
        "why": "Starting torch.distributed needs the GPUs and the other workers. Every argument "
        "check (validate_args, Primus's validate_args_on_rocm, the tokenizer's padded vocab, the "
        "micro-batch calculator) has run before it; what follows builds process groups, seeds, "
        "the model, optimizer and data.",
    },
    {
        "name": "megatron.training.initialize.initialize_megatron(allow_no_cuda=True)",
        "replaces": "the call's allow_no_cuda argument (False -> True)",
        "why": "Skips only its first statement, assert torch.cuda.is_available(); the rest of "
        "initialize_megatron (parse_args, validate_args, set_global_variables...) runs unchanged.",
    },
    {
        "name": "torch.cuda.get_device_capability, torch.cuda.get_device_properties",
        "replaces": "the planned GPU's (major, minor) (--gpu: MI300X/MI325X -> (9, 4), i.e. gfx942; "
        "MI350X/MI355X -> (9, 5)), only when Megatron-LM or Primus asks for it",
        "why": "No GPU here. validate_args reads the capability for --moe-grouped-gemm (>= 8; "
        "Primus's Qwen 2.5 model file sets moe_grouped_gemm) and, through get_device_arch_version(), "
        "for TP>1/CP>1 and FSDP; those checks then run unchanged on what the GPU reports. Each "
        "plan's stub_calls counts the calls.",
    },
    {
        "name": "torchrun",
        "replaces": "one process with the first worker's torchrun variables "
        "(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT)",
        "why": "The argument namespace differs between workers only in rank and local_rank.",
    },
    {
        "name": "rocm-smi, ROCM_HOME",
        "replaces": "a rocm-smi shim reporting the planned GPU (--gpu), and ROCM_HOME -> an empty "
        "folder when /opt/rocm is missing",
        "why": "primus-env.sh picks runner/helpers/envs/<GPU>.sh from rocm-smi and stops under "
        "set -e without a ROCm lib folder; both only shape shell variables (GPU file, "
        "LD_LIBRARY_PATH), which neither the loader nor the argument code read.",
    },
    {
        "name": "runner/helpers/hooks (not run)",
        "replaces": "their only relevant output, --backend_path <Primus>/third_party/Megatron-LM, is passed directly",
        "why": "They install or rebuild packages (pip install -r requirements-megatron.txt, "
        "Primus-Turbo, UCCL), detect NICs, build Megatron's C++ data set helper and prepare data. "
        "The environment variables they export for these plans (AITER_LOG_LEVEL, "
        "PRIMUS_TURBO_MOE_DISPATCH_COMBINE_BACKEND, TE_HIPBLASLT_TUNING_*, NCCL_*) are not read "
        "by the loader or the argument code.",
    },
]

#: Primus patches whose condition depends on the platform rather than on the arguments, and
#: so is evaluated differently here than on the ROCm image. None of them sets an argument.
PLATFORM_PATCHES = [
    {
        "patch": "megatron.attention_backend.rocm_safe",
        "condition": "torch.version.hip is set (ROCm torch)",
        "effect": "LanguageModule._set_attention_backend lets attention_backend set NVTE_*_ATTN "
        "instead of asserting (when the model is built)",
    },
    {
        "patch": "megatron.mamba.rocm_chunk_state_bwd_db",
        "condition": "torch.version.hip is set",
        "effect": "Mamba Triton kernel option (Mamba models only)",
    },
    {
        "patch": "megatron.turbo.te_spec_provider",
        "condition": "enable_primus_turbo and primus_turbo importable and TP == 1",
        "effect": "layer spec provider TESpecProvider -> PrimusTurboSpecProvider (model build)",
    },
    {
        "patch": "megatron.turbo.aiter_deepbind",
        "condition": "use_turbo_attention, primus_turbo importable, GPU arch gfx942/gfx950",
        "effect": "RTLD_DEEPBIND when importing aiter's attention extensions",
    },
    {
        "patch": "megatron.te.general_gemm_workspace_helper",
        "condition": "transformer_engine importable (Megatron's te_general_gemm present)",
        "effect": "TE GEMM workspace binding (kernels)",
    },
]


# ---------------------------------------------------------------------------------------
# Parent: one child process per plan.
# ---------------------------------------------------------------------------------------


def _git(checkout: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def _submodule_commit(primus: Path) -> str | None:
    """The Megatron-LM commit that Primus's tree pins (its gitlink), or None."""
    line = _git(primus, "ls-tree", "HEAD", str(MEGATRON_SUBDIR))
    if not line:
        return None
    fields = line.split()
    return fields[2] if len(fields) >= 3 and fields[1] == "commit" else None


def _megatron_core_version(megatron: Path) -> str | None:
    """``megatron/core/package_info.py``'s version, read without importing it."""
    file = megatron / "megatron" / "core" / "package_info.py"
    if not file.is_file():
        return None
    values: dict[str, object] = {}
    for node in ast.parse(file.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in {"MAJOR", "MINOR", "PATCH", "PRE_RELEASE"}:
                values[node.targets[0].id] = ast.literal_eval(node.value)
    if not {"MAJOR", "MINOR", "PATCH"} <= values.keys():
        return None
    return f"{values['MAJOR']}.{values['MINOR']}.{values['PATCH']}{values.get('PRE_RELEASE') or ''}"


def _shims(workdir: Path, gpu: str) -> dict[str, str]:
    """A ``rocm-smi`` that names the planned GPU, and a ROCm lib folder when there is none."""
    bin_dir = workdir / "shim-bin"
    bin_dir.mkdir()
    smi = bin_dir / "rocm-smi"
    smi.write_text(f'#!/bin/sh\necho "GPU[0]          : Card series:          AMD Instinct {gpu}"\n')
    smi.chmod(0o755)
    extra = {"PATH_PREFIX": str(bin_dir)}
    if not Path("/opt/rocm/lib").is_dir() and not os.environ.get("ROCM_HOME"):
        (workdir / "rocm" / "lib").mkdir(parents=True)
        extra["ROCM_HOME"] = str(workdir / "rocm")
    return extra


def _child_env(plan: dict, python: Path, shims: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env.update({str(k): str(v) for k, v in (plan.get("env") or {}).items()})
    env["PATH"] = os.pathsep.join([shims["PATH_PREFIX"], str(python.parent), env.get("PATH", "")])
    if "ROCM_HOME" in shims:
        env["ROCM_HOME"] = shims["ROCM_HOME"]
    return env


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _launcher_error(log: str) -> str | None:
    """The last error line the shell part printed, if any."""
    errors = [line for line in log.splitlines() if "[ERROR]" in line or line.startswith("Error:")]
    return _one_line(errors[-1]) if errors else None


def run_plan(plan: dict, primus: Path, python: Path, gpu: str, logs: Path) -> dict:
    """Run one plan in a child process; return its result record."""
    plan_id = str(plan["id"])
    megatron = primus / MEGATRON_SUBDIR
    log_file = logs / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', plan_id)}.log"
    with tempfile.TemporaryDirectory(prefix="primus-accept-") as tmp:
        workdir = Path(tmp)
        config = workdir / "primus_experiment.yaml"
        config.write_text(plan["experiment"], encoding="utf-8")
        result_file = workdir / "result.json"
        env = _child_env(plan, python, _shims(workdir, gpu))
        env[RESULT_ENV] = str(result_file)
        env["PRIMUS_ACCEPTANCE_WORLD_SIZE"] = str(int(plan.get("world_size") or 1))
        env["PRIMUS_ACCEPTANCE_EXPERIMENT"] = str(config)
        env["PRIMUS_ACCEPTANCE_GPU"] = gpu
        primus_argv = ["train", "pretrain", "--config", str(config), "--backend_path", str(megatron)]
        worker = [str(python), str(Path(__file__).resolve()), "--worker", "--", *primus_argv]
        script = (
            "set -euo pipefail\n"
            f"cd {shlex.quote(str(primus))}\n"
            "source runner/helpers/envs/primus-env.sh\n"
            f"exec {shlex.join(worker)}\n"
        )
        command = ["bash", "-c", script]
        try:
            proc = subprocess.run(command, cwd=primus, env=env, capture_output=True, text=True, timeout=PLAN_TIMEOUT_S)
            output, timed_out = proc.stdout + proc.stderr, False
        except subprocess.TimeoutExpired as exc:
            output = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
            timed_out = True
        log_file.write_text(output, encoding="utf-8")
        record = json.loads(result_file.read_text(encoding="utf-8")) if result_file.is_file() else {}
    error = record.get("error")
    if not record:
        error = f"TimeoutExpired: no result after {PLAN_TIMEOUT_S} s" if timed_out else None
        error = error or _launcher_error(output) or "no result: the child printed no error (see the log)"
    return {
        "id": plan_id,
        "accepted": bool(record.get("accepted")),
        "error": error,
        "command": command,
        "primus_argv": primus_argv,
        "values": record.get("values", {}),
        "overrides_changed": record.get("overrides_changed", {}),
        "overrides_absent": record.get("overrides_absent", []),
        "stub_calls": record.get("stub_calls", {}),
        "patches_applied": _patches_applied(output),
        "patches_failed": _patches_failed(output),
        "log": str(log_file),
    }


def _patches_applied(log: str) -> dict[str, list[str]]:
    """Primus's own summary lines: ``Applied n/m patches for megatron/<phase>: [...]``."""
    applied: dict[str, list[str]] = {}
    for match in re.finditer(r"Applied \d+/\d+ patches for megatron/(\w+): (\[[^\]]*\])", log):
        try:
            applied[match.group(1)] = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError):
            applied[match.group(1)] = [match.group(2)]
    return applied


def _patches_failed(log: str) -> dict[str, str]:
    """Patches Primus's runner tried and set aside (it logs them and goes on)."""
    return {
        match.group(1): _one_line(match.group(2))
        for match in re.finditer(r"Patch '([^']+)' failed(?: due to)? ?(.*)", log)
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--primus", required=True, type=Path, help="Primus checkout (with third_party/Megatron-LM)")
    parser.add_argument("--plans", required=True, type=Path, help="plans.json")
    parser.add_argument("--out", required=True, type=Path, help="where to write the results (JSON)")
    parser.add_argument("--python", type=Path, default=Path(sys.executable), help="interpreter for the children")
    parser.add_argument(
        "--gpu", default="MI300X", choices=sorted(GPU_CAPABILITY), help="the planned GPU (default MI300X)"
    )
    parser.add_argument("--logs", type=Path, help="folder for each child's output (default: OUT's folder/logs)")
    args = parser.parse_args(argv)
    primus = args.primus.resolve()
    if not (primus / "primus" / "cli" / "main.py").is_file() or not (primus / MEGATRON_SUBDIR / "megatron").is_dir():
        print(f"error: {primus} is not a Primus checkout with {MEGATRON_SUBDIR} checked out", file=sys.stderr)
        return 2
    try:
        plans = json.loads(args.plans.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"error: cannot read plans from {args.plans}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(plans, list) or not all(isinstance(p, dict) and "id" in p and "experiment" in p for p in plans):
        print(f"error: {args.plans} must hold a list of {{'id', 'experiment', 'env', 'world_size'}}", file=sys.stderr)
        return 2
    logs = args.logs or args.out.resolve().parent / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    megatron = primus / MEGATRON_SUBDIR
    results = []
    for plan in plans:
        result = run_plan(plan, primus, args.python, args.gpu, logs)
        print(f"{result['id']}: {'accepted' if result['accepted'] else 'REJECTED: ' + str(result['error'])}")
        results.append(result)
    output = {
        "primus_checkout": str(primus),
        "primus_commit": _git(primus, "rev-parse", "HEAD"),
        "megatron_checkout": str(megatron),
        "megatron_commit": _git(megatron, "rev-parse", "HEAD"),
        "megatron_submodule_commit": _submodule_commit(primus),
        "megatron_core_version": _megatron_core_version(megatron),
        "command": [sys.executable, *sys.argv],
        "launcher_equivalent": "bash PRIMUS/runner/primus-cli direct -- train pretrain --config FILE",
        "stubs": STUBS,
        "platform_patches": PLATFORM_PATCHES,
        "results": results,
    }
    args.out.write_text(json.dumps(output, indent=2) + "\n", encoding="utf-8")
    return 0 if all(r["accepted"] for r in results) else 1


# ---------------------------------------------------------------------------------------
# Child: Primus's own entry point, stopped before torch.distributed starts.
# ---------------------------------------------------------------------------------------


class _StopBeforeDistributedInit(BaseException):
    """Raised where Megatron-LM would start torch.distributed: the arguments are complete."""


def _json_safe(value: object, depth: int = 0) -> object:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if depth > 8:
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_json_safe(v, depth + 1) for v in value), key=repr)
    if hasattr(value, "__dict__") and type(value).__name__ in {"SimpleNamespace", "Namespace"}:
        return {k: _json_safe(v, depth + 1) for k, v in vars(value).items()}
    return str(value)


def _same(written: object, final: object) -> bool:
    if isinstance(final, str) and "." in final and isinstance(written, str) and final.split(".", 1)[1] == written:
        return True  # an enum argument written by name
    if isinstance(written, bool) or isinstance(final, bool):
        return written is final
    if isinstance(written, int | float) and isinstance(final, int | float):
        return math.isclose(written, final, rel_tol=1e-12, abs_tol=0.0)
    return written == final


def _compare_overrides(values: dict) -> tuple[dict, list]:
    """Each key of the experiment's ``modules.pre_trainer.overrides`` against its final value."""
    import yaml

    experiment = yaml.safe_load(Path(os.environ["PRIMUS_ACCEPTANCE_EXPERIMENT"]).read_text(encoding="utf-8"))
    overrides = ((experiment.get("modules") or {}).get("pre_trainer") or {}).get("overrides") or {}
    changed, absent = {}, []
    for key, written in overrides.items():
        if key not in values:
            absent.append(key)
        elif not _same(_json_safe(written), values[key]):
            changed[key] = {"written": _json_safe(written), "final": values[key]}
    return changed, absent


_STUB_CALLS: dict[str, int] = {}


def _write_result(record: dict) -> None:
    record["stub_calls"] = dict(_STUB_CALLS)
    Path(os.environ[RESULT_ENV]).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _counted(name: str, function):
    def stub(*args, **kwargs):
        _STUB_CALLS[name] = _STUB_CALLS.get(name, 0) + 1
        return function(*args, **kwargs)

    return stub


def _install_gpu_stubs() -> None:
    """torch.cuda's capability queries answer for the planned GPU (there is none here)."""
    import types

    import torch

    gpu = os.environ.get("PRIMUS_ACCEPTANCE_GPU", "MI300X")
    major, minor = GPU_CAPABILITY[gpu]
    arch = {(9, 0): "gfx90a", (9, 4): "gfx942", (9, 5): "gfx950"}[(major, minor)]
    properties = types.SimpleNamespace(
        name=f"AMD Instinct {gpu}", major=major, minor=minor, gcnArchName=f"{arch}:sramecc+:xnack-"
    )
    torch.cuda.get_device_capability = _counted("torch.cuda.get_device_capability", lambda device=None: (major, minor))
    torch.cuda.get_device_properties = _counted("torch.cuda.get_device_properties", lambda device=None: properties)


def _after_import(module_name: str, callback) -> None:
    """Run ``callback(module)`` right after ``module_name`` is first imported."""
    import importlib.abc
    import importlib.util

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != module_name:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                return spec
            real = spec.loader

            class Loader(importlib.abc.Loader):
                def create_module(self, spec):
                    return real.create_module(spec)

                def exec_module(self, module):
                    real.exec_module(module)
                    callback(module)

            spec.loader = Loader()
            return spec

    sys.meta_path.insert(0, Finder())


def _install_stubs() -> None:
    def on_initialize(module) -> None:
        original = module.initialize_megatron

        def initialize_megatron(*args, **kwargs):
            kwargs["allow_no_cuda"] = True
            return original(*args, **kwargs)

        def stop_before_distributed_init(*args, **kwargs):
            from megatron.training.global_vars import get_args

            values = {k: _json_safe(v) for k, v in sorted(vars(get_args()).items())}
            changed, absent = _compare_overrides(values)
            _write_result(
                {
                    "accepted": True,
                    "error": None,
                    "values": values,
                    "overrides_changed": changed,
                    "overrides_absent": absent,
                }
            )
            print(
                "[acceptance] stopped where Megatron-LM starts torch.distributed; arguments recorded "
                "(the traceback that follows is this stop, not a failure)",
                file=sys.stderr,
                flush=True,
            )
            raise _StopBeforeDistributedInit()

        module.initialize_megatron = initialize_megatron
        module._initialize_distributed = stop_before_distributed_init

    def on_training(module) -> None:
        # training.py binds initialize_megatron at import; give it the same wrapper.
        import megatron.training.initialize as initialize

        module.initialize_megatron = initialize.initialize_megatron

    _after_import("megatron.training.initialize", on_initialize)
    _after_import("megatron.training.training", on_training)


def _torchrun_env() -> None:
    node_rank = int(os.environ.get("NODE_RANK", "0"))
    local_world = int(os.environ.get("GPUS_PER_NODE", "8"))
    world = os.environ["PRIMUS_ACCEPTANCE_WORLD_SIZE"]
    os.environ.update(
        {
            "RANK": str(node_rank * local_world),
            "LOCAL_RANK": "0",
            "GROUP_RANK": str(node_rank),
            "ROLE_RANK": str(node_rank * local_world),
            "WORLD_SIZE": world,
            "ROLE_WORLD_SIZE": world,
            "LOCAL_WORLD_SIZE": str(local_world),
            "GROUP_WORLD_SIZE": os.environ.get("NNODES", "1"),
            "TORCHELASTIC_RUN_ID": "none",
        }
    )


def _error_line(exc: BaseException) -> str:
    """The root cause of a failure, one line: ``Type: message (file:line)``."""
    cause = exc
    while cause.__cause__ is not None or (cause.__context__ is not None and not cause.__suppress_context__):
        cause = cause.__cause__ or cause.__context__
    where = ""
    tb = cause.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        where = f" ({tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
    message = str(cause).strip().splitlines()
    return _one_line(f"{type(cause).__name__}: {message[0] if message else ''}{where}")


def worker(primus_argv: list[str]) -> int:
    import runpy

    _torchrun_env()
    _install_gpu_stubs()
    _install_stubs()
    sys.argv = ["primus/cli/main.py", *primus_argv]
    try:
        runpy.run_path("primus/cli/main.py", run_name="__main__")
    except _StopBeforeDistributedInit:
        return 0
    except SystemExit as exc:
        if Path(os.environ[RESULT_ENV]).is_file():
            return 0  # Primus wrapped the stop in its own error path after the result was written
        context = exc.__context__
        error = _error_line(context) if context is not None else f"SystemExit: {exc.code} (see the log)"
        _write_result({"accepted": False, "error": error})
        return 1
    except Exception as exc:  # noqa: BLE001 - reported as the plan's error
        _write_result({"accepted": False, "error": _error_line(exc)})
        return 1
    if not Path(os.environ[RESULT_ENV]).is_file():
        _write_result({"accepted": False, "error": "Primus returned before initialize_megatron"})
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        rest = sys.argv[2:]
        sys.exit(worker(rest[1:] if rest[:1] == ["--"] else rest))
    sys.exit(main())
