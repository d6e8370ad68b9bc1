"""The benchmark config: one TOML format holding every setting that must match across platforms.

The shipped defaults (``defaults.toml``) are layered under the user's file and
``--set section.key=value`` overrides.  Unknown sections or keys are errors
that name the key, because a silently ignored typo is an unfair comparison.
The config fingerprint hashes the fields that must be equal for two runs to
be compared side by side.
"""

from __future__ import annotations

import functools
import json
import tomllib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from tprimat.errors import TprimatError
from tprimat.settings.fairness import config_fingerprint, fair_values

if TYPE_CHECKING:
    import cattrs


class ConfigError(TprimatError, ValueError):
    """A config file or override that cannot be used; the message names the key."""


@attrs.frozen(kw_only=True)
class BenchmarkSection:
    model: str
    methodology: Literal["iso", "tuned"]
    seed: int
    iterations: int = attrs.field(validator=attrs.validators.gt(0))
    warmup_iterations: int = attrs.field(validator=attrs.validators.ge(0))
    exclude_profiled: bool


@attrs.frozen(kw_only=True)
class DataSection:
    dataset: str
    tokenizer: str


@attrs.frozen(kw_only=True)
class TrainingSection:
    micro_batch_size: int = attrs.field(validator=attrs.validators.gt(0))
    global_batch_size: int = attrs.field(validator=attrs.validators.gt(0))
    seq_length: int = attrs.field(validator=attrs.validators.gt(0))
    lr: float
    min_lr: float
    lr_warmup_iterations: int
    lr_decay_style: Literal["cosine", "linear", "constant"]
    lr_decay_iterations: int
    weight_decay: float
    adam_beta1: float
    adam_beta2: float
    adam_eps: float
    init_method_std: float
    clip_grad: float
    recompute: Literal["none", "selective", "full"]


@attrs.frozen(kw_only=True)
class ParallelSection:
    tensor: int = attrs.field(validator=attrs.validators.gt(0))
    pipeline: int = attrs.field(validator=attrs.validators.gt(0))
    context: int = attrs.field(validator=attrs.validators.gt(0))
    sequence_parallel: bool
    distributed_optimizer: bool
    overlap_grad_reduce: bool
    overlap_param_gather: bool
    strategy: Literal["ddp", "fsdp2"]


@attrs.frozen(kw_only=True)
class LaunchSection:
    nnodes: int = attrs.field(validator=attrs.validators.gt(0))
    nproc_per_node: int = attrs.field(validator=attrs.validators.gt(0))
    master_addr: str
    master_port: int
    timeout_s: float = attrs.field(validator=attrs.validators.ge(0))


@attrs.frozen(kw_only=True)
class PrecisionSection:
    dtype: Literal["bf16", "fp8", "fp32"]
    fp8_recipe: Literal["hybrid", "e4m3"]


@attrs.frozen(kw_only=True)
class KernelsSection:
    attention_backend: Literal["flash", "fused", "unfused", "auto"]
    fused_rope: bool
    fused_swiglu: bool
    fused_cross_entropy: bool
    compile: bool


@attrs.frozen(kw_only=True)
class ProfileSection:
    enabled: bool
    wait: int
    warmup: int
    active: int
    repeat: int
    ranks: list[int]


@attrs.frozen(kw_only=True)
class MonitorSection:
    enabled: bool
    interval_s: float = attrs.field(validator=attrs.validators.gt(0))


@attrs.frozen(kw_only=True)
class ConvergenceSection:
    """Time-to-train runs: held-out evaluation, a target and budgets (docs/convergence.md)."""

    enabled: bool
    validation_fraction: float = attrs.field(validator=[attrs.validators.gt(0), attrs.validators.lt(1)])
    eval_interval_samples: int = attrs.field(validator=attrs.validators.gt(0))
    eval_sequences: int = attrs.field(validator=attrs.validators.gt(0))
    target_log_perplexity: float = attrs.field(validator=attrs.validators.gt(0))
    max_samples: int = attrs.field(validator=attrs.validators.ge(0))
    max_time_s: float = attrs.field(validator=attrs.validators.ge(0))
    mlperf_log: Literal["convergence", "always", "never"]
    mlperf_benchmark: str
    mlperf_division: Literal["open", "closed"]
    mlperf_org: str


def _non_negative_prices(_: Any, attribute: Any, value: dict[str, float]) -> None:
    for device, price in value.items():
        if price < 0:
            raise ValueError(f"{attribute.name}[{device!r}] must not be negative, got {price}")


@attrs.frozen(kw_only=True)
class CostSection:
    """Price table for cost figures in comparison reports (not part of the fair fields)."""

    currency: str
    gpu_hour_prices: dict[str, float] = attrs.field(validator=_non_negative_prices)
    prices_source: str
    prices_date: str
    train_tokens: float = attrs.field(validator=attrs.validators.gt(0))


def _default_cost() -> CostSection:
    return _get_converter().structure(default_config_dict()["cost"], CostSection)


def _default_convergence() -> ConvergenceSection:
    return _get_converter().structure(default_config_dict()["convergence"], ConvergenceSection)


@attrs.frozen(kw_only=True)
class BenchmarkConfig:
    """The effective benchmark config of one run."""

    benchmark: BenchmarkSection
    data: DataSection
    training: TrainingSection
    parallel: ParallelSection
    launch: LaunchSection
    precision: PrecisionSection
    kernels: KernelsSection
    profile: ProfileSection
    monitor: MonitorSection
    cost: CostSection = attrs.Factory(_default_cost)
    convergence: ConvergenceSection = attrs.Factory(_default_convergence)

    @property
    def world_size(self) -> int:
        return self.launch.nnodes * self.launch.nproc_per_node

    @property
    def data_parallel(self) -> int:
        p = self.parallel
        return self.world_size // (p.tensor * p.pipeline * p.context)

    def check_consistency(self) -> None:
        """Raise :class:`ConfigError` if parallelism and batch sizes do not fit together."""
        p, t = self.parallel, self.training
        model_parallel = p.tensor * p.pipeline * p.context
        if self.world_size % model_parallel:
            raise ConfigError(
                f"world size {self.world_size} (launch.nnodes × launch.nproc_per_node) is not "
                f"divisible by tensor × pipeline × context = {model_parallel}"
            )
        per_step = t.micro_batch_size * self.data_parallel
        if t.global_batch_size % per_step:
            raise ConfigError(
                f"training.global_batch_size {t.global_batch_size} is not divisible by "
                f"micro_batch_size × data-parallel size = {per_step}"
            )

    def to_dict(self) -> dict[str, Any]:
        return _get_converter().unstructure(self)

    def fingerprint(self, dataset_fingerprint: str | None = None) -> str:
        """Stable hash of the fields that must match for a fair comparison."""
        return config_fingerprint(fair_fields(self, dataset_fingerprint))


def fair_fields(config: BenchmarkConfig, dataset_fingerprint: str | None = None) -> dict[str, Any]:
    """The fields two runs must share to be compared side by side (:mod:`tprimat.settings.fairness`).

    The dataset is identified by content (its fingerprint), not by path, so
    the same tokens on two clusters match.
    """
    dataset = "mock" if config.data.dataset == "mock" else (dataset_fingerprint or config.data.dataset)
    fields = fair_values(
        model=config.benchmark.model,
        methodology=config.benchmark.methodology,
        dataset=dataset,
        seq_length=config.training.seq_length,
        global_batch_size=config.training.global_batch_size,
        precision=config.precision.dtype,
    )
    v = config.convergence
    if v.enabled:  # time to target compares only on the same held-out set and target
        fields["convergence"] = {
            "validation_fraction": v.validation_fraction,
            "eval_sequences": v.eval_sequences,
            "eval_interval_samples": v.eval_interval_samples,
            "target_log_perplexity": v.target_log_perplexity,
        }
    return fields


def _make_converter() -> cattrs.Converter:
    import cattrs  # here, not at the top: listing backends or printing help needs no converter
    from cattrs.gen import make_dict_structure_fn

    converter = cattrs.Converter(forbid_extra_keys=True)
    for cls in (
        BenchmarkConfig,
        BenchmarkSection,
        DataSection,
        TrainingSection,
        ParallelSection,
        LaunchSection,
        PrecisionSection,
        KernelsSection,
        ProfileSection,
        MonitorSection,
        CostSection,
        ConvergenceSection,
    ):
        converter.register_structure_hook(cls, make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True))
    # TOML has no int/float distinction for values like `lr = 1`: accept ints as floats.
    converter.register_structure_hook(float, lambda v, _: _strict_float(v))
    converter.register_structure_hook(int, lambda v, _: _strict_int(v))
    converter.register_structure_hook(bool, lambda v, _: _strict_bool(v))
    return converter


def _strict_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def _strict_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _strict_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


@functools.cache
def _get_converter() -> cattrs.Converter:
    """The converter, built on first use (building it costs more than the rest of the import)."""
    return _make_converter()


def default_config_dict(*, cpu: bool = False) -> dict[str, Any]:
    """The shipped defaults as a plain dict; ``cpu``: with the CPU preset (``cpu.toml``) over them,
    as ``tprimat run`` and ``tprimat microbench`` use them on a machine without a GPU."""
    settings = resources.files("tprimat.settings")
    base = tomllib.loads(settings.joinpath("defaults.toml").read_text(encoding="utf-8"))
    if cpu:
        for section, values in tomllib.loads(settings.joinpath("cpu.toml").read_text(encoding="utf-8")).items():
            base[section].update(values)
    return base


def parse_override(item: str) -> tuple[list[str], Any]:
    """Split ``section.key=value``; the value is read as a TOML literal, else as a string."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} is not of the form section.key=value")
    dotted, raw = item.split("=", 1)
    path = [part.strip() for part in dotted.strip().split(".")]
    if len(path) != 2 or not all(path):
        raise ConfigError(f"override {item!r}: the key must be section.key, e.g. training.seq_length")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return path, value


def _merge(base: dict[str, Any], update: dict[str, Any], origin: str) -> None:
    for section, values in update.items():
        if section not in base:
            raise ConfigError(f"{origin}: unknown section [{section}]; known: {', '.join(base)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{origin}: [{section}] must be a table")
        for key, value in values.items():
            if key not in base[section]:
                raise ConfigError(
                    f"{origin}: unknown key {section}.{key}; known in [{section}]: {', '.join(base[section])}"
                )
            base[section][key] = value


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    base: dict[str, Any] | None = None,
) -> BenchmarkConfig:
    """Defaults (or ``base``), then the TOML file at ``path``, then ``section.key=value`` overrides."""
    merged = base if base is not None else default_config_dict()
    merged = json.loads(json.dumps(merged))  # deep copy of plain data
    if path is not None:
        try:
            user = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        _merge(merged, user, str(path))
    for item in overrides:
        (section, key), value = parse_override(item)
        _merge(merged, {section: {key: value}}, f"--set {item}")
    return config_from_dict(merged)


def config_from_dict(data: dict[str, Any]) -> BenchmarkConfig:
    """Structure and validate a config dict; errors name the offending key."""
    import cattrs

    try:
        config = _get_converter().structure(data, BenchmarkConfig)
    except cattrs.BaseValidationError as exc:
        raise ConfigError("invalid config: " + "; ".join(cattrs.transform_error(exc))) from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"invalid config: {exc}") from None
    config.check_consistency()
    return config


def dump_toml(config: BenchmarkConfig) -> str:
    """The config as TOML text (what ``tprimat config show`` prints and runs store)."""
    from tprimat.settings.tomltext import toml_table

    return "\n".join(line for section, values in config.to_dict().items() for line in toml_table(section, values))
