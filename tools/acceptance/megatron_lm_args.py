#!/usr/bin/env python3
"""Check rendered Megatron-LM ``pretrain_gpt.py`` argument lists against Megatron-LM's own code.

For every plan (the arguments that follow ``pretrain_gpt.py`` on a rendered command, its
environment and its world size) this runs Megatron-LM's ``parse_args`` and then
``validate_args`` from ``megatron/training/arguments.py`` of a given checkout, in a fresh
Python process per plan, and records whether Megatron-LM accepts the plan, the exact error
when it does not, and every attribute of the resulting argument namespace.

It imports nothing from tprimat: it needs only a Python environment with torch and
Megatron-LM's small pure-Python dependencies, and a Megatron-LM checkout, which it puts
first on ``sys.path`` (the checkout provides ``megatron/core``; megatron-core must not be
installed in that environment, or the installed copy could shadow the checkout's).

Setup (CPU only, no GPU, no transformer_engine, no apex)::

    python3 -m venv VENV
    . VENV/bin/activate
    pip install torch==2.13.0 "numpy<2.0.0" "packaging>=24.2" six regex einops pyyaml
    pip install triton pydantic   # Megatron-LM 0.16 and later import them with megatron.training
    git -C MEGATRON_REPO worktree add --detach MEGATRON_LM core_v0.15.0

Newer Megatron-LM (main) also imports ``triton`` at import time: use a second environment
with ``pip install triton`` added (on Python 3.11 it also needs the ``typing.override``
stub below; main declares Python >= 3.12).

Usage::

    python tools/acceptance/megatron_lm_args.py \\
        --megatron MEGATRON_LM \\
        --plans plans.json --out accepted.json

``plans.json`` is a list of plans::

    [{"id": "nvd_megatron-llama3.1-8b-iso",
      "argv": ["--num-layers", "32", ...],       # only what follows pretrain_gpt.py
      "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "PYTHONPATH": "${MEGATRON_PATH}"},
      "world_size": 8,
      "device": "H100",                          # optional, see "Stubs"
      "gpu_capability": [9, 0],                  # optional, overrides "device"
      "te_version": "2.9.0"}]                    # optional, see "Stubs"

``${MEGATRON_PATH}`` / ``$MEGATRON_PATH`` in env values is replaced by the checkout path.

What is run, per plan (a child process of this script):

1. The child's environment is PATH, HOME, LANG, LC_ALL and TMPDIR of this process (all of
   it with ``--inherit-env``), then the plan's env, then what torchrun would set for the
   first worker: ``WORLD_SIZE`` (the plan's), ``RANK=0``, ``LOCAL_RANK=0``; plus
   ``MEGATRON_PATH`` (the checkout). Its working directory is the checkout.
2. ``sys.argv = [CHECKOUT/pretrain_gpt.py, *argv]``.
3. ``extra_args_provider`` and ``args_defaults`` are what ``pretrain_gpt.py`` of the
   checkout passes: the script reads them from that file (the keyword arguments of the call
   in its ``if __name__ == "__main__":`` block that has ``args_defaults=``) and evaluates
   them after running that file's own guarded ``try: from megatron.post_training ...``
   imports. At core_v0.15.0 (and at main d98e8a64) ``pretrain_gpt.py`` passes
   ``args_defaults={'tokenizer_type': 'GPT2BPETokenizer'}`` and
   ``extra_args_provider=add_modelopt_args if has_nvidia_modelopt else None``, where
   ``has_nvidia_modelopt`` is True when ``megatron.post_training.arguments`` and
   ``megatron.post_training.loss_func`` import (at core_v0.15.0 they do without the
   modelopt package, so the modelopt options are added); main also imports
   ``.model_builder`` (which needs the modelopt package) and ``.utils``. The modelopt
   options only add to what is accepted. ``ignore_unknown_args`` is False, as in
   ``initialize_megatron``/``parse_and_validate_args``. The output records both.
4. ``args = parse_args(extra_args_provider)`` then ``validate_args(args, args_defaults)``.
   ``accepted`` is True when both return. Megatron-LM's own ``initialize_megatron`` does
   a few more checks around them (``--use-checkpoint-args``, ``--ckpt-convert-format``,
   ``--yaml-cfg``); none applies to a plan that uses none of those options.
5. Three later steps of Megatron-LM, reported under ``checks`` and not part of
   ``accepted``, each called as is on the validated args and the plan's environment:
   ``core_transformer_config_from_args(args)`` (building the TransformerConfig, whose
   ``__post_init__`` validates further; ``pretrain_gpt.py``'s model builder does this),
   the tokenizer that ``set_global_variables`` builds (``global_vars.build_tokenizer`` on a
   copy of the args; gives ``padded_vocab_size``), and
   ``LanguageModule._set_attention_backend`` (run when the GPT model is built; it asserts
   that NVTE_FLASH_ATTN / NVTE_FUSED_ATTN / NVTE_UNFUSED_ATTN agree with
   ``--attention-backend``), called with the TransformerConfig built by the first check.

Stubs (all installed by ``_install_stubs`` and ``_install_python_compat``, and described in
the output under ``stubs``; each plan's result lists under ``stubs_installed`` the ones put
in place for it and under ``stub_calls`` how often Megatron-LM actually called each one):

* ``torch.cuda.get_device_properties`` and ``torch.cuda.get_device_capability`` answer the
  planned GPU's compute capability (from the plan's ``gpu_capability``, else its ``device``
  by the table ``GPU_CAPABILITY``). On a CPU machine these raise. ``validate_args`` reads the
  capability only through Megatron-LM's ``get_device_arch_version()`` (to decide whether
  TP>1 or CP>1 requires CUDA_DEVICE_MAX_CONNECTIONS=1, and for FSDP stream priorities) and
  ``torch.cuda.get_device_capability()`` (for --moe-grouped-gemm); both then run unchanged
  on the value the real GPU would report, so every check that depends on it is still made.
  With no capability known, the stub raises, and the plan is reported as not checked.
* ``megatron.core.utils._te_version``: only when a TE version is given (``--te-version`` or
  the plan's ``te_version``) and transformer_engine is not importable, the version cache that
  ``get_te_version()``/``is_te_min_version()`` read is set to it, so version checks compare
  against the TE of the target image instead of failing on ``None``; each comparison is
  counted in ``stub_calls``. Without a TE version it is left alone.
* ``rope_utils.fused_apply_rotary_pos_emb`` / ``_thd``: under the same condition, the two
  TE fused-RoPE kernels (None without TE) become placeholders that raise if called, so that
  the ``transformer_config`` check (TransformerConfig refuses ``apply_rope_fusion`` when
  they are missing) answers as in the target image. ``validate_args`` never reads them.
* ``typing.override``: only on a Python without it (< 3.12), Python 3.12's run-time
  behaviour (mark the method, return it). Megatron-LM main needs it at import; it plays no
  part in parsing or validation.

Nothing else is replaced: ``validate_args`` and every check it makes run as written.

The output (``--out``) holds ``megatron_checkout``, ``megatron_commit`` (``git rev-parse
HEAD`` of the checkout, or ``--commit``), ``command`` (this run), ``args_defaults``,
``extra_args_provider``, ``stubs`` and ``results``, one per plan::

    {"id", "accepted": bool, "error": "stage: Type: message" | null (one line), "error_at",
     "checked": bool,                  # False: the harness could not decide (error says why)
     "values": {dest: value}           # every attribute after validate_args, JSON-safe
     "set_by_plan": {option: dest},    # the options the plan's argv names
     "changed_by_validate": {dest: {"parsed", "validated", "set_by_plan"}},
     "added_by_validate": [dest], "removed_by_validate": [dest],
     "messages": [line],               # what parse/validate printed or warned, minus the
                                       # full argument dump
     "checks": {"transformer_config": {...}, "tokenizer": {...},
                "attention_backend_env": {...}},
     "stubs_installed": [stub], "stub_calls": {stub: count}}
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import enum
import io
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import traceback
import types
import warnings
from pathlib import Path

# Compute capability that torch reports for each planned device: CUDA (major, minor); ROCm
# reports the gfx target's major/minor (gfx942 -> 9.4, gfx950 -> 9.5).
GPU_CAPABILITY = {
    "A100": (8, 0),
    "H100": (9, 0),
    "H200": (9, 0),
    "GH200": (9, 0),
    "B200": (10, 0),
    "GB200": (10, 0),
    "MI250X": (9, 0),
    "MI300X": (9, 4),
    "MI325X": (9, 4),
    "MI355X": (9, 5),
}

BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
PLAN_TIMEOUT_S = 600
ARGS_DUMP_START = "------------------------ arguments ------------------------"
ARGS_DUMP_END = "-------------------- end of arguments ---------------------"
ATTENTION_ENV = ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN")

STUBS = [
    {
        "name": "torch.cuda.get_device_properties",
        "replaces": "torch.cuda.get_device_properties(device) -> object with the planned GPU's major/minor",
        "why": "No GPU here. validate_args reads it only through Megatron-LM's "
        "get_device_arch_version() (TP>1 or CP>1 -> CUDA_DEVICE_MAX_CONNECTIONS check on "
        "arch < 10; FSDP stream groups on arch >= 10). That function and the checks run "
        "unchanged on the capability the planned GPU reports, so nothing is skipped.",
    },
    {
        "name": "torch.cuda.get_device_capability",
        "replaces": "torch.cuda.get_device_capability(device=None) -> (major, minor) of the planned GPU",
        "why": "No GPU here. validate_args calls it only for --moe-grouped-gemm "
        "(compute capability >= 8); the check runs unchanged on the planned GPU's value.",
    },
    {
        "name": "megatron.core.utils._te_version",
        "replaces": "the cached transformer_engine version, set only when a TE version is "
        "given and transformer_engine is not importable",
        "why": "transformer_engine does not install on a CPU machine; is_te_min_version() "
        "would compare None. Setting the cache makes those checks compare against the TE "
        "of the target image; the checks themselves are unchanged. Unused when no TE "
        "version is given.",
    },
    {
        "name": "typing.override",
        "replaces": "absent on Python < 3.12 -> the same run-time behaviour as Python 3.12's "
        "(sets __override__ and returns the method); only when typing lacks it",
        "why": "Megatron-LM main imports typing.override (a decorator for type checkers) and "
        "declares Python >= 3.12; it has no effect on what is parsed or validated. Unused "
        "at core_v0.15.0.",
    },
    {
        "name": "megatron.core.models.common.embeddings.rope_utils.fused_apply_rotary_pos_emb (and _thd)",
        "replaces": "None (TE absent) -> a placeholder that raises if called; only when a TE "
        "version is given and transformer_engine is not importable",
        "why": "Not read by parse_args/validate_args. TransformerConfig.__post_init__ (the "
        "'transformer_config' check) refuses apply_rope_fusion when these TE kernels are "
        "missing; with TE in the target image they exist. Nothing calls them here.",
    },
]


# ---------------------------------------------------------------------------------------
# Parent: one child process per plan.
# ---------------------------------------------------------------------------------------


def _git_commit(checkout: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def _git_describe(checkout: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(checkout), "describe", "--tags", "--always"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def _expand(value: str, checkout: Path) -> str:
    return value.replace("${MEGATRON_PATH}", str(checkout)).replace("$MEGATRON_PATH", str(checkout))


def _child_env(plan: dict, checkout: Path, inherit_env: bool) -> dict[str, str]:
    if inherit_env:
        env = dict(os.environ)
    else:
        env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
    for key, value in (plan.get("env") or {}).items():
        env[str(key)] = _expand(str(value), checkout)
    env.setdefault("PYTHONPATH", str(checkout))
    env["MEGATRON_PATH"] = str(checkout)
    env["WORLD_SIZE"] = str(int(plan.get("world_size", 1)))
    env["RANK"] = "0"
    env["LOCAL_RANK"] = "0"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _gpu_capability(plan: dict, default: tuple[int, int] | None) -> list[int] | None:
    if plan.get("gpu_capability") is not None:
        major, minor = plan["gpu_capability"]
        return [int(major), int(minor)]
    device = plan.get("device")
    if device:
        cap = GPU_CAPABILITY.get(str(device).upper())
        if cap is None:
            cap = GPU_CAPABILITY.get(str(device))
        if cap is not None:
            return list(cap)
    return list(default) if default else None


def _run_plan(plan: dict, checkout: Path, opts: argparse.Namespace) -> dict:
    request = {
        "checkout": str(checkout),
        "argv": [str(a) for a in plan["argv"]],
        "gpu_capability": _gpu_capability(plan, opts.gpu_capability),
        "te_version": plan.get("te_version", opts.te_version),
    }
    with tempfile.TemporaryDirectory(prefix="mlm-args-") as tmp:
        req_path = Path(tmp, "request.json")
        res_path = Path(tmp, "result.json")
        req_path.write_text(json.dumps(request))
        try:
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--_child", str(req_path), str(res_path)],
                env=_child_env(plan, checkout, opts.inherit_env),
                cwd=str(checkout),
                capture_output=True,
                text=True,
                timeout=PLAN_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return {
                "id": plan["id"],
                "accepted": False,
                "checked": False,
                "error": f"harness: the check did not finish within {PLAN_TIMEOUT_S} s",
            }
        if not res_path.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
            return {
                "id": plan["id"],
                "accepted": False,
                "checked": False,
                "error": f"harness: the child process exited {proc.returncode} without a result",
                "child_output_tail": tail,
            }
        result = json.loads(res_path.read_text())
    out = {"id": plan["id"]}
    out.update(result)
    out["world_size"] = int(plan.get("world_size", 1))
    out["env"] = plan.get("env") or {}
    out["argv"] = request["argv"]
    return out


def _parse_capability(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run Megatron-LM's parse_args + validate_args on rendered plans.")
    parser.add_argument(
        "--megatron", required=True, type=Path, help="Megatron-LM checkout (holds pretrain_gpt.py and megatron/)"
    )
    parser.add_argument("--plans", required=True, type=Path, help="plans.json")
    parser.add_argument("--out", required=True, type=Path, help="where to write the result")
    parser.add_argument("--commit", help="commit of the checkout, when it is no git worktree")
    parser.add_argument(
        "--te-version",
        help="transformer_engine version of the target image, for is_te_min_version() checks (default: leave unset)",
    )
    parser.add_argument(
        "--gpu-capability", type=_parse_capability, help="compute capability (e.g. 9.0) for plans that name no device"
    )
    parser.add_argument(
        "--inherit-env", action="store_true", help="start each plan from this whole environment, not a minimal one"
    )
    parser.add_argument(
        "--only", action="append", default=[], metavar="ID", help="check only this plan id (repeatable)"
    )
    opts = parser.parse_args(argv)

    checkout = opts.megatron.resolve()
    if not (checkout / "pretrain_gpt.py").is_file() or not (checkout / "megatron").is_dir():
        print(f"error: {checkout} is no Megatron-LM checkout (no pretrain_gpt.py or megatron/)", file=sys.stderr)
        return 2
    try:
        plans = json.loads(opts.plans.read_text())
    except (OSError, ValueError) as exc:
        print(f"error: cannot read plans from {opts.plans}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(plans, list) or not all(
        isinstance(p, dict) and "id" in p and isinstance(p.get("argv"), list) for p in plans
    ):
        print(f"error: {opts.plans} must hold a list of objects with 'id' and 'argv'", file=sys.stderr)
        return 2
    if opts.only:
        plans = [p for p in plans if p["id"] in opts.only]

    commit = opts.commit or _git_commit(checkout)
    results = []
    for plan in plans:
        print(f"checking {plan['id']} ...", file=sys.stderr, flush=True)
        result = _run_plan(plan, checkout, opts)
        verdict = "accepted" if result.get("accepted") else f"REJECTED: {result.get('error')}"
        print(f"  {verdict}", file=sys.stderr, flush=True)
        results.append(result)

    first = next((r for r in results if "args_defaults" in r), {})
    report = {
        "megatron_checkout": str(checkout),
        "megatron_commit": commit,
        "megatron_commit_source": "--commit" if opts.commit else "git rev-parse HEAD",
        "megatron_describe": _git_describe(checkout),
        "command": shlex.join([sys.executable, *sys.argv]),
        "python": sys.version.split()[0],
        "torch": first.get("torch"),
        "args_defaults": first.get("args_defaults"),
        "extra_args_provider": first.get("extra_args_provider"),
        "stubs": STUBS,
        "te_version": opts.te_version,
        "results": [
            {k: v for k, v in r.items() if k not in ("args_defaults", "extra_args_provider", "torch")} for r in results
        ],
    }
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    accepted = sum(1 for r in results if r.get("accepted"))
    print(f"{accepted} of {len(results)} plans accepted; wrote {opts.out}", file=sys.stderr)
    return 0 if accepted == len(results) else 1


# ---------------------------------------------------------------------------------------
# Child: one plan, in its own process.
# ---------------------------------------------------------------------------------------


class _StubCalls(dict):
    """How often each stub was called; ``installed`` names the stubs put in place."""

    def __init__(self):
        super().__init__()
        self.installed: list[str] = []

    def hit(self, name: str) -> None:
        self[name] = self.get(name, 0) + 1


def _install_python_compat(calls: _StubCalls) -> None:
    """Newer Megatron-LM (main) needs Python >= 3.12 only for ``typing.override``."""
    import typing

    if hasattr(typing, "override"):
        return

    def override(method):
        # What Python 3.12's typing.override does at run time: mark and return.
        try:
            method.__override__ = True
        except (AttributeError, TypeError):
            pass
        calls.hit("typing.override")
        return method

    typing.override = override
    calls.installed.append("typing.override")


def _install_stubs(capability: list[int] | None, te_version: str | None, calls: _StubCalls) -> None:
    """The only replacements this script makes; see the module docstring and STUBS."""
    import torch

    def get_device_properties(device=None):
        calls.hit("torch.cuda.get_device_properties")
        if capability is None:
            raise RuntimeError(
                "harness: Megatron-LM asked for the GPU's compute capability; give the plan "
                "a 'device' or 'gpu_capability' (or pass --gpu-capability)"
            )
        major, minor = capability
        return types.SimpleNamespace(
            major=major, minor=minor, name="planned GPU", multi_processor_count=0, total_memory=0
        )

    def get_device_capability(device=None):
        calls.hit("torch.cuda.get_device_capability")
        props = get_device_properties(device)
        return props.major, props.minor

    torch.cuda.get_device_properties = get_device_properties
    torch.cuda.get_device_capability = get_device_capability
    calls.installed += ["torch.cuda.get_device_properties", "torch.cuda.get_device_capability"]

    if not te_version:
        return
    try:
        import transformer_engine  # noqa: F401

        return
    except ImportError:
        pass
    import megatron.core.models.common.embeddings.rope_utils as rope_utils
    import megatron.core.utils as mcore_utils
    from packaging.version import Version

    class PlannedTEVersion(Version):
        """The target image's TE version; counts every comparison Megatron-LM makes."""

        def _hit(self):
            calls.hit("megatron.core.utils._te_version (compared)")

        def __lt__(self, other):
            self._hit()
            return super().__lt__(other)

        def __le__(self, other):
            self._hit()
            return super().__le__(other)

        def __gt__(self, other):
            self._hit()
            return super().__gt__(other)

        def __ge__(self, other):
            self._hit()
            return super().__ge__(other)

    mcore_utils._te_version = PlannedTEVersion(te_version)
    calls.installed.append(f"megatron.core.utils._te_version = {te_version}")

    def te_kernel_placeholder(*_args, **_kwargs):
        calls.hit("rope_utils TE kernel placeholder")
        raise RuntimeError("harness: a transformer_engine kernel was called; none runs here")

    for name in ("fused_apply_rotary_pos_emb", "fused_apply_rotary_pos_emb_thd"):
        if getattr(rope_utils, name, None) is None:
            setattr(rope_utils, name, te_kernel_placeholder)
            calls.installed.append(f"megatron.core.models.common.embeddings.rope_utils.{name}")


def _json_safe(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return str(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_json_safe(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    try:
        import torch

        if isinstance(value, torch.dtype):
            return str(value)
    except ImportError:
        pass
    if callable(value):
        module = getattr(value, "__module__", None)
        name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        if name:
            return f"{module}.{name}" if module else name
    return repr(value)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _error_text(exc: BaseException, stderr_text: str) -> tuple[str, str | None]:
    """One line for the error, and where in Megatron-LM it was raised."""
    where = None
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if "/megatron/" in frame.filename or frame.filename.endswith("pretrain_gpt.py"):
            rel = frame.filename.split("/megatron/", 1)
            path = f"megatron/{rel[1]}" if len(rel) == 2 else frame.filename
            where = f"{path}:{frame.lineno}: {_one_line(frame.line or '')}"
            break
    if isinstance(exc, SystemExit):
        lines = [ln for ln in stderr_text.splitlines() if "error:" in ln]
        message = lines[-1].strip() if lines else f"exit({exc.code})"
        return f"SystemExit({exc.code}): {_one_line(message)}", where
    message = _one_line(str(exc))
    if not message:
        message = "(no message)"
    return f"{type(exc).__name__}: {message}", where


def _pretrain_gpt_call(checkout: Path) -> tuple[dict, dict]:
    """What pretrain_gpt.py passes for extra_args_provider and args_defaults.

    Runs pretrain_gpt.py's own guarded post-training imports (the ``try`` block that sets
    ``has_nvidia_modelopt``) and evaluates the keyword expressions of its main call.
    """
    source = (checkout / "pretrain_gpt.py").read_text()
    tree = ast.parse(source)
    namespace: dict = {}
    provider_info: dict = {"source": None, "has_nvidia_modelopt": None}

    for node in tree.body:
        if isinstance(node, ast.Try) and "has_nvidia_modelopt" in ast.get_source_segment(source, node):
            module = ast.Module(body=[node], type_ignores=[])
            exec(compile(module, str(checkout / "pretrain_gpt.py"), "exec"), namespace)
            provider_info["has_nvidia_modelopt"] = namespace.get("has_nvidia_modelopt")

    main_block = next(
        (n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.dump(n.test)),
        None,
    )
    call = None
    if main_block is not None:
        for node in ast.walk(main_block):
            if isinstance(node, ast.Call) and any(k.arg == "args_defaults" for k in node.keywords):
                call = node
                break
    if call is None:
        raise RuntimeError("harness: no call with args_defaults= in pretrain_gpt.py's main block")
    kwargs = {k.arg: k.value for k in call.keywords}
    defaults_src = ast.get_source_segment(source, kwargs["args_defaults"])
    args_defaults = eval(defaults_src, dict(namespace))  # the checkout's own expression
    extra = {"source": None, "value": None}
    provider = None
    if "extra_args_provider" in kwargs:
        extra["source"] = ast.get_source_segment(source, kwargs["extra_args_provider"])
        provider = eval(extra["source"], dict(namespace))  # the checkout's own expression
        extra["value"] = _json_safe(provider)
    provider_info.update(extra)
    provider_info["call"] = _one_line(
        f"{ast.get_source_segment(source, call.func)}(... at pretrain_gpt.py:{call.lineno})"
    )
    return {"value": args_defaults, "source": defaults_src}, dict(provider_info, callable=provider)


def _plan_options(arguments_module, provider, argv: list[str]) -> dict[str, str]:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser = arguments_module.add_megatron_arguments(parser)
    if provider is not None:
        parser = provider(parser)
    by_option = parser._option_string_actions
    named = {}
    for token in argv:
        if token.startswith("--"):
            option = token.split("=", 1)[0]
            action = by_option.get(option)
            named[option] = action.dest if action is not None else None
    return named


def _messages(stdout_text: str, stderr_text: str, caught) -> list[str]:
    lines, in_dump = [], False
    for line in stdout_text.splitlines():
        if line.startswith(ARGS_DUMP_START):
            in_dump = True
            continue
        if line.startswith(ARGS_DUMP_END):
            in_dump = False
            continue
        if not in_dump and line.strip():
            lines.append(line.rstrip())
    lines += [ln.rstrip() for ln in stderr_text.splitlines() if ln.strip()]
    lines += [f"warning ({w.category.__name__}): {_one_line(w.message)}" for w in caught]
    return lines


def _check_transformer_config(arguments_module, args) -> tuple[dict, object]:
    """Build the TransformerConfig as the GPT model builder does; the report and the config."""
    try:
        config = arguments_module.core_transformer_config_from_args(args)
    except BaseException as exc:  # reported, not raised
        error, where = _error_text(exc, "")
        return {"ok": False, "error": error, "error_at": where}, None
    import dataclasses

    differs = {}
    for field in dataclasses.fields(config):
        if hasattr(args, field.name):
            in_args = _json_safe(getattr(args, field.name))
            in_config = _json_safe(getattr(config, field.name))
            if in_args != in_config:
                differs[field.name] = {"args": in_args, "config": in_config}
    return {"ok": True, "error": None, "class": type(config).__name__, "differs_from_args": differs}, config


def _check_tokenizer(args) -> dict:
    """Build the tokenizer as set_global_variables does, on a copy of the args."""
    try:
        from megatron.training import global_vars

        copy = argparse.Namespace(**vars(args))
        tokenizer = global_vars.build_tokenizer(copy)
    except BaseException as exc:  # reported, not raised
        error, where = _error_text(exc, "")
        return {"ok": False, "error": error, "error_at": where}
    return {
        "ok": True,
        "error": None,
        "tokenizer": type(tokenizer).__name__,
        "vocab_size": _json_safe(getattr(tokenizer, "vocab_size", None)),
        "padded_vocab_size": _json_safe(getattr(copy, "padded_vocab_size", None)),
    }


def _check_attention_backend_env(args, config) -> dict:
    """LanguageModule._set_attention_backend on the model's config (else on the args' backend)."""
    try:
        from megatron.core.models.common.language_module.language_module import LanguageModule
    except ImportError as exc:
        return {"ok": None, "error": f"harness: cannot import LanguageModule: {exc}"}
    rule = getattr(LanguageModule, "_set_attention_backend", None)
    if rule is None:
        return {"ok": None, "error": "harness: no LanguageModule._set_attention_backend here"}
    before = {k: os.environ.get(k) for k in ATTENTION_ENV}
    if config is None:
        config = types.SimpleNamespace(attention_backend=args.attention_backend)
    holder = types.SimpleNamespace(config=config)
    try:
        rule(holder)
    except BaseException as exc:  # reported, not raised
        error, where = _error_text(exc, "")
        return {"ok": False, "error": error, "error_at": where, "env_before": before}
    after = {k: os.environ.get(k) for k in ATTENTION_ENV}
    return {"ok": True, "error": None, "env_before": before, "env_after": after}


def _child(request_path: str, result_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    checkout = Path(request["checkout"])
    sys.path.insert(0, str(checkout))
    os.chdir(checkout)
    calls = _StubCalls()
    result: dict = {"accepted": False, "checked": True, "error": None, "error_at": None}

    stdout_buf, stderr_buf = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch

        result["torch"] = torch.__version__
        _install_python_compat(calls)
        import megatron.training.arguments as arguments_module

        _install_stubs(request.get("gpu_capability"), request.get("te_version"), calls)
        defaults, provider_info = _pretrain_gpt_call(checkout)
        provider = provider_info.pop("callable")
        result["args_defaults"] = defaults
        result["extra_args_provider"] = provider_info
        result["gpu_capability"] = request.get("gpu_capability")
        result["set_by_plan"] = _plan_options(arguments_module, provider, request["argv"])
        caught.clear()

        sys.argv = [str(checkout / "pretrain_gpt.py"), *request["argv"]]
        args = None
        parsed: dict = {}
        stage = "parse_args"
        try:
            with contextlib.redirect_stdout(stdout_buf), contextlib.redirect_stderr(stderr_buf):
                args = arguments_module.parse_args(provider, False)
                parsed = {k: _json_safe(v) for k, v in vars(args).items()}
                stage = "validate_args"
                arguments_module.validate_args(args, defaults["value"])
            result["accepted"] = True
        except BaseException as exc:  # every failure is the answer
            error, where = _error_text(exc, stderr_buf.getvalue())
            result["error"] = f"{stage}: {error}"
            result["error_at"] = where
            if error.startswith("RuntimeError: harness:"):
                result["checked"] = False
        messages = _messages(stdout_buf.getvalue(), stderr_buf.getvalue(), list(caught))

    result["messages"] = messages
    if args is not None:
        values = {k: _json_safe(v) for k, v in vars(args).items()}
        result["values"] = values
        plan_dests = {d for d in result["set_by_plan"].values() if d}
        result["changed_by_validate"] = {
            k: {"parsed": parsed[k], "validated": values[k], "set_by_plan": k in plan_dests}
            for k in parsed
            if k in values and parsed[k] != values[k]
        }
        result["added_by_validate"] = sorted(set(values) - set(parsed)) if parsed else []
        result["removed_by_validate"] = sorted(set(parsed) - set(values))
    else:
        result["values"] = None

    if result["accepted"]:
        out_buf = io.StringIO()
        with (
            warnings.catch_warnings(record=True) as caught2,
            contextlib.redirect_stdout(out_buf),
            contextlib.redirect_stderr(out_buf),
        ):
            warnings.simplefilter("always")
            config_report, config = _check_transformer_config(arguments_module, args)
            checks = {
                "transformer_config": config_report,
                "tokenizer": _check_tokenizer(args),
                "attention_backend_env": _check_attention_backend_env(args, config),
            }
        checks["messages"] = _messages(out_buf.getvalue(), "", list(caught2))
        result["checks"] = checks
    result["stubs_installed"] = calls.installed
    result["stub_calls"] = dict(calls)
    Path(result_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--_child":
        sys.exit(_child(sys.argv[2], sys.argv[3]))
    sys.exit(main())
