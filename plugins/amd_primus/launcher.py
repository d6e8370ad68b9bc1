"""``amd_primus`` launch: a Primus experiment YAML from the benchmark config, and Primus's launcher.

The experiment is Primus's own one for the model and precision
(``examples/megatron/configs/<GPU>/<model>-<BF16|FP8>-pretrain.yaml``) with
an ``overrides`` entry for every Megatron setting tprimat decides: the one
settings model (:mod:`tprimat.plugins.megatron.settings`), whose keys are
Megatron-LM's argument destinations, exactly what Primus's module configs
use.  So nothing that shapes the work is left to Primus's defaults: its Qwen
experiment reads the sequence length from ``$PRIMUS_SEQ_LENGTH`` (2048 unless
set), its Llama 3.1 model file leaves RoPE scaling off and its Qwen 2.5 file
leaves the QKV bias off; all of these are pinned.  Primus-only switches that
the config does not name (Primus Turbo kernels, its logging averages) stay as
Primus ships them; a ``tuned`` preset may change them and the core records
the change.

The file written into the run directory is self-contained: the base
experiment merged with the overrides, so a reader sees every key Primus gets.
Without a Primus checkout (a dry run on a laptop) the plan names the
placeholder ``${PRIMUS_PATH}``, writes the overrides it owns, and says which
base experiment of the checkout they go on top of.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tprimat.contract import BenchmarkConfig, FrameworkSettings, LaunchContext, LaunchPlan, ModelSpec
from tprimat.errors import TprimatError
from tprimat.plugins.amd_primus.configtree import experiment_values
from tprimat.plugins.megatron.framework import shared_values
from tprimat.plugins.megatron.pretrain import target_version
from tprimat.plugins.megatron.settings import ARGS, SNAPSHOT_FILE, build_settings, memory_snapshot, to_overrides

EXPERIMENT_FILE = "primus_experiment.yaml"
#: Primus experiment names for the registry's models.
PRIMUS_MODELS = {"llama3.1-8b": "llama3.1_8B", "qwen2.5-7b": "qwen2.5_7B"}
#: ROCm needs this on MI300X-class GPUs (Primus's own launcher sets it too); set and recorded.
PLATFORM_ENV = {"HSA_NO_SCRATCH_RECLAIM": "1"}
#: Primus's own keys (not Megatron-LM arguments): no checkpoint at the end, no resuming, and
#: attention as ``kernels.attention_backend`` says (Primus Turbo's attention replaces it, so
#: it is a tuned preset's choice, never kept from an experiment file).
PRIMUS_ONLY = {"disable_last_saving": True, "auto_continue_train": False, "use_turbo_attention": False}
#: The path a plan names when no Primus checkout is given.
PLACEHOLDER = "${PRIMUS_PATH}"
HINT = "use the ROCm Primus image (docker/amd.Dockerfile), which ships Primus at /workspace/Primus"


class PrimusError(TprimatError):
    """Primus is missing, or lacks what this run needs."""


def primus_path(context: LaunchContext) -> Path | None:
    """The Primus checkout (``--primus-path`` or ``$PRIMUS_PATH``); None when neither is set."""
    given = context.options.get("primus_path")
    if not given:
        return None
    path = Path(given)
    if not (path / "examples" / "megatron" / "configs").is_dir():
        raise PrimusError(
            f"Primus not found: {path}/examples/megatron/configs does not exist "
            f"(PRIMUS_PATH or --primus-path must name a Primus checkout); {HINT}"
        )
    return path


def gpu_config_dir(context: LaunchContext) -> str:
    """Which of Primus's per-GPU experiment folders to start from."""
    chosen = context.options.get("primus_gpu")
    if chosen:
        return str(chosen)
    name = (context.platform.device_name or "").upper()
    return "MI355X" if ("MI355" in name or "MI350" in name) else "MI300X"


def experiment_name(gpu: str, model: ModelSpec, config: BenchmarkConfig) -> Path:
    """Primus's experiment for the model and precision, relative to the checkout."""
    try:
        primus_model = PRIMUS_MODELS[model.name]
    except KeyError:
        raise PrimusError(
            f"Primus ships no experiment for model {model.name}; supported: {', '.join(PRIMUS_MODELS)}"
        ) from None
    precision = "FP8" if config.precision.dtype == "fp8" else "BF16"
    return Path("examples") / "megatron" / "configs" / gpu / f"{primus_model}-{precision}-pretrain.yaml"


def _load_yaml(file: Path) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(file.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise PrimusError(f"{file} is not a Primus experiment (not a mapping)")
    return data


def build_overrides(context: LaunchContext, version: tuple[int, int]) -> dict[str, Any]:
    """Every Megatron setting as a Primus override, then Primus's own keys and the tuned preset's.

    A preset's keys that are Megatron destinations go through the settings model (and
    its checks); the others are Primus's own switches (e.g. ``use_turbo_attention``).
    """
    tuned = dict(context.methodology.overrides)
    if context.methodology.args:
        raise PrimusError(
            f"a tuned preset gives amd_primus command-line arguments {list(context.methodology.args)}; "
            "Primus takes settings as experiment overrides: put them under [backends.amd_primus.overrides]"
        )
    megatron = {key: value for key, value in tuned.items() if key in ARGS}
    if context.memory_snapshot:
        megatron.update(memory_snapshot(context.run_dir))
    settings = build_settings(context.config, context.model, version=version, data=context.data, extra=megatron)
    own = {key: value for key, value in tuned.items() if key not in ARGS}
    return {**to_overrides(settings, version), **PRIMUS_ONLY, **own}


def experiment_with(base: dict[str, Any], overrides: dict[str, Any], context: LaunchContext) -> dict[str, Any]:
    """The base experiment with tprimat's names, workspace and overrides."""
    experiment = dict(base)
    experiment.update(
        work_group="tprimat",
        user_name="tprimat",
        exp_name=context.run_id,
        workspace=str(Path(context.run_dir) / "primus"),
    )
    modules = dict(experiment.get("modules") or {})
    trainer = dict(modules.get("pre_trainer") or {})
    merged = dict(trainer.get("overrides") or {})
    merged.update(overrides)
    trainer["overrides"] = merged
    modules["pre_trainer"] = trainer
    experiment["modules"] = modules
    return experiment


def yaml_text(experiment: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(experiment, sort_keys=False, default_flow_style=False)


def launcher_argv(path: Path, config_file: Path) -> tuple[list[str], dict[str, str], str]:
    """``primus-cli direct -- train pretrain --config`` when present, else ``run_pretrain.sh``."""
    cli = path / "runner" / "primus-cli"
    if cli.is_file():
        argv = ["bash", str(cli), "direct", "--", "train", "pretrain", "--config", str(config_file)]
        return argv, {}, "primus-cli direct"
    script = path / "examples" / "run_pretrain.sh"
    if script.is_file():
        return ["bash", str(script)], {"EXP": str(config_file)}, "examples/run_pretrain.sh"
    raise PrimusError(
        f"Primus launcher not found: neither {cli} nor {script} exists "
        f"(PRIMUS_PATH must be a full Primus checkout, not a config tree); {HINT}"
    )


def plan(context: LaunchContext) -> LaunchPlan:
    checkout = primus_path(context)
    path = checkout or Path(PLACEHOLDER)
    resolved = context.methodology  # decided by the core; applied here, never changed
    config = context.config
    base_name = experiment_name(gpu_config_dir(context), context.model, config)
    megatron = path / "third_party" / "Megatron-LM"
    version, version_notes = target_version(context, megatron if checkout else None, str(megatron))
    overrides = build_overrides(context, version)
    if context.profile is not None:
        overrides.update(context.profile.overrides)
    config_file = Path(context.run_dir) / EXPERIMENT_FILE
    if checkout is None:
        base: dict[str, Any] = {
            "modules": {
                "pre_trainer": {
                    "framework": "megatron",
                    "config": "pre_trainer.yaml",
                    "model": f"{PRIMUS_MODELS[context.model.name]}.yaml",
                }
            }
        }
        argv = [
            "bash",
            str(path / "runner" / "primus-cli"),
            "direct",
            "--",
            "train",
            "pretrain",
            "--config",
            str(config_file),
        ]
        launcher = "primus-cli direct"
        launcher_env: dict[str, str] = {}
        notes = [
            f"no Primus checkout (--primus-path or $PRIMUS_PATH): planned with the placeholder {PLACEHOLDER}; {HINT}",
            f"Primus experiment base: {base_name} (from the checkout; tprimat's overrides are merged over "
            "its modules.pre_trainer.overrides at launch)",
        ]
        kept: dict[str, Any] = {}
    else:
        base = _load_yaml(checkout / base_name)
        own = ((base.get("modules") or {}).get("pre_trainer") or {}).get("overrides", {})
        kept = {k: v for k, v in own.items() if k not in overrides}
        argv, launcher_env, launcher = launcher_argv(checkout, config_file)
        notes = [f"Primus experiment base: {base_name}"]
    experiment = experiment_with(base, overrides, context)
    text = (
        f"# Generated by tprimat for run {context.run_id} from\n# {path / base_name}\n"
        f"# with every benchmark-config field pinned under modules.pre_trainer.overrides.\n" + yaml_text(experiment)
    )
    launch = config.launch
    env = {
        # Primus's launchers read the rendezvous from these (they start torchrun themselves).
        "NNODES": str(launch.nnodes),
        "NODE_RANK": str(context.node_rank),
        "GPUS_PER_NODE": str(launch.nproc_per_node),
        "MASTER_ADDR": launch.master_addr,
        "MASTER_PORT": str(launch.master_port),
        **PLATFORM_ENV,
        **launcher_env,
        **(context.data.env if context.data else {}),
        **resolved.env,
        **(context.profile.env if context.profile else {}),
    }
    notes += [f"launcher: {launcher}", f"Megatron-core {version[0]}.{version[1]} rules for the mock tokenizer"]
    notes += version_notes
    if kept:
        notes.append(
            "kept from Primus's experiment (not benchmark-config fields): "
            + ", ".join(f"{k}={v}" for k, v in kept.items())
        )
    framework = framework_settings(checkout, base_name, experiment, overrides, env, version)
    return LaunchPlan(
        argv=tuple(argv),
        env=env,
        cwd=path,
        files={EXPERIMENT_FILE: text},
        description=f"Primus pretrain ({launcher}), {context.model.name}",
        notes=tuple(notes),
        snapshot_globs=(SNAPSHOT_FILE,) if context.memory_snapshot else (),
        framework=framework,
    )


def framework_settings(
    checkout: Path | None,
    base_name: Path,
    experiment: dict[str, Any],
    overrides: dict[str, Any],
    env: dict[str, str],
    version: tuple[int, int],
) -> FrameworkSettings:
    """tprimat's overrides, and every other setting Primus's config tree gives the experiment."""
    name = f"Primus (Megatron-LM core {version[0]}.{version[1]})"
    if checkout is None:
        return FrameworkSettings(
            framework=name,
            rendered=dict(overrides),
            shared=shared_values(overrides),
            notes=("what Primus keeps is unknown without a checkout (--primus-path names one)",),
        )
    found = experiment_values(checkout, experiment, env)
    kept = {key: value for key, value in found.values.items() if key not in overrides}
    notes = tuple(f"{file} is named by the config chain but not in the checkout" for file in found.missing)
    return FrameworkSettings(
        framework=name,
        rendered=dict(overrides),
        kept=kept,
        kept_from=f"{checkout}: {base_name} over " + ", ".join(found.files),
        shared=shared_values({**kept, **overrides}),
        notes=notes,
    )
