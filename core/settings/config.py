"""The benchmark config: one TOML format holding every setting that must match across platforms.

The shipped defaults (``defaults.toml``) are layered under the user's file and
``--set section.key=value`` overrides.  Unknown sections or keys are errors
that name the key, because a silently ignored typo is an unfair comparison.
Whole-number settings take whole numbers only (``2.5`` is an error, never 2),
numbers must be finite, and sizes and counts have upper bounds
(:data:`INT_LIMITS`, :data:`FLOAT_LIMITS`) far above any real run, so that a slip
(an extra zero, a unit mix-up) stops here with the key, where it was set and the
limit, before anything starts.  The config fingerprint hashes the fields that
must be equal for two runs to be compared side by side.
"""

from __future__ import annotations

import functools
import json
import math
import re
import tomllib
from collections.abc import Mapping
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


#: Iterations of a run, and any other count of iterations (10**9: some 30 years at one per second).
MAX_ITERATIONS = 10**9
#: Tokens per sequence: 2**24 = 16,777,216 (the longest-context runs train at about 1M).
MAX_SEQ_LENGTH = 2**24
#: Sequences per global or micro batch: 2**24 (the largest published LLM batches hold a few thousand).
MAX_BATCH_SIZE = 2**24
#: Tensor, pipeline or context parallel size, and nodes: 2**16.
MAX_PARALLEL = 2**16
#: Processes per node: 1024 (a node has 8 GPUs, or a few hundred CPU cores).
MAX_PROCS_PER_NODE = 1024
#: Training samples (a budget or an interval): 2**53, the largest count a float holds exactly.
MAX_SAMPLES = 2**53
#: A time limit or budget in seconds: one year.
MAX_SECONDS = 365 * 24 * 3600

#: ``section.key`` -> (least, greatest) of every whole-number setting; for a list, of each element.
INT_LIMITS: dict[str, tuple[int, int]] = {
    "benchmark.seed": (0, 2**32 - 1),  # NumPy's seeds, which frameworks seed from it, end there
    "benchmark.iterations": (1, MAX_ITERATIONS),
    "benchmark.warmup_iterations": (0, MAX_ITERATIONS - 1),
    "training.micro_batch_size": (1, MAX_BATCH_SIZE),
    "training.global_batch_size": (1, MAX_BATCH_SIZE),
    "training.seq_length": (1, MAX_SEQ_LENGTH),
    "training.lr_warmup_iterations": (0, MAX_ITERATIONS),
    "training.lr_decay_iterations": (0, MAX_ITERATIONS),
    "parallel.tensor": (1, MAX_PARALLEL),
    "parallel.pipeline": (1, MAX_PARALLEL),
    "parallel.context": (1, MAX_PARALLEL),
    "launch.nnodes": (1, MAX_PARALLEL),
    "launch.nproc_per_node": (1, MAX_PROCS_PER_NODE),
    "launch.master_port": (1, 65535),
    "profile.wait": (0, MAX_ITERATIONS),
    "profile.warmup": (0, MAX_ITERATIONS),
    "profile.active": (0, MAX_ITERATIONS),
    "profile.repeat": (0, MAX_ITERATIONS),
    "profile.ranks": (0, MAX_PARALLEL * MAX_PROCS_PER_NODE - 1),
    "convergence.eval_interval_samples": (1, MAX_SAMPLES),
    "convergence.eval_sequences": (1, MAX_BATCH_SIZE),
    "convergence.max_samples": (0, MAX_SAMPLES),
}

#: ``section.key`` -> (least, greatest) of the number settings that have limits; every number
#: setting must be finite (TOML can write ``inf`` and ``nan``).
FLOAT_LIMITS: dict[str, tuple[float, float]] = {
    "launch.timeout_s": (0.0, MAX_SECONDS),
    "monitor.interval_s": (0.001, 3600.0),
    "convergence.max_time_s": (0.0, MAX_SECONDS),
}


def _limit_text(value: int | float) -> str:
    """A limit as the messages show it: ``16777216 (2^24)``, ``1000000000 (10^9)``."""
    if isinstance(value, int) and value >= 1024:
        for base in (2, 10):
            power = round(math.log(value, base))
            for exponent in (power - 1, power, power + 1):
                if base**exponent == value:
                    return f"{value} ({base}^{exponent})"
                if base**exponent - 1 == value:
                    return f"{value} ({base}^{exponent} - 1)"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _in_limits(key: str) -> Any:
    """An attrs validator holding a field to its :data:`INT_LIMITS` (or :data:`FLOAT_LIMITS`)."""
    least, greatest = INT_LIMITS[key] if key in INT_LIMITS else FLOAT_LIMITS[key]

    def check(_: Any, attribute: Any, value: Any) -> None:
        values = value if isinstance(value, list) else [value]
        for item in values:
            if not least <= item <= greatest:
                raise ValueError(f"{key} must be from {_limit_text(least)} to {_limit_text(greatest)}, got {item!r}")

    return check


@attrs.frozen(kw_only=True)
class BenchmarkSection:
    model: str
    methodology: Literal["iso", "tuned"]
    seed: int = attrs.field(validator=_in_limits("benchmark.seed"))
    iterations: int = attrs.field(validator=_in_limits("benchmark.iterations"))
    warmup_iterations: int = attrs.field(validator=_in_limits("benchmark.warmup_iterations"))
    exclude_profiled: bool


@attrs.frozen(kw_only=True)
class DataSection:
    dataset: str
    tokenizer: str


@attrs.frozen(kw_only=True)
class TrainingSection:
    micro_batch_size: int = attrs.field(validator=_in_limits("training.micro_batch_size"))
    global_batch_size: int = attrs.field(validator=_in_limits("training.global_batch_size"))
    seq_length: int = attrs.field(validator=_in_limits("training.seq_length"))
    lr: float
    min_lr: float
    lr_warmup_iterations: int = attrs.field(validator=_in_limits("training.lr_warmup_iterations"))
    lr_decay_style: Literal["cosine", "linear", "constant"]
    lr_decay_iterations: int = attrs.field(validator=_in_limits("training.lr_decay_iterations"))
    weight_decay: float
    adam_beta1: float
    adam_beta2: float
    adam_eps: float
    init_method_std: float
    clip_grad: float
    recompute: Literal["none", "selective", "full"]


@attrs.frozen(kw_only=True)
class ParallelSection:
    tensor: int = attrs.field(validator=_in_limits("parallel.tensor"))
    pipeline: int = attrs.field(validator=_in_limits("parallel.pipeline"))
    context: int = attrs.field(validator=_in_limits("parallel.context"))
    sequence_parallel: bool
    distributed_optimizer: bool
    overlap_grad_reduce: bool
    overlap_param_gather: bool
    strategy: Literal["ddp", "fsdp2"]


@attrs.frozen(kw_only=True)
class LaunchSection:
    nnodes: int = attrs.field(validator=_in_limits("launch.nnodes"))
    nproc_per_node: int = attrs.field(validator=_in_limits("launch.nproc_per_node"))
    master_addr: str
    master_port: int = attrs.field(validator=_in_limits("launch.master_port"))
    timeout_s: float = attrs.field(validator=_in_limits("launch.timeout_s"))


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
    wait: int = attrs.field(validator=_in_limits("profile.wait"))
    warmup: int = attrs.field(validator=_in_limits("profile.warmup"))
    active: int = attrs.field(validator=_in_limits("profile.active"))
    repeat: int = attrs.field(validator=_in_limits("profile.repeat"))
    ranks: list[int] = attrs.field(validator=_in_limits("profile.ranks"))


@attrs.frozen(kw_only=True)
class MonitorSection:
    enabled: bool
    interval_s: float = attrs.field(validator=_in_limits("monitor.interval_s"))


@attrs.frozen(kw_only=True)
class ConvergenceSection:
    """Time-to-train runs: held-out evaluation, a target and budgets (docs/convergence.md)."""

    enabled: bool
    validation_fraction: float = attrs.field(validator=[attrs.validators.gt(0), attrs.validators.lt(1)])
    eval_interval_samples: int = attrs.field(validator=_in_limits("convergence.eval_interval_samples"))
    eval_sequences: int = attrs.field(validator=_in_limits("convergence.eval_sequences"))
    target_log_perplexity: float = attrs.field(validator=attrs.validators.gt(0))
    max_samples: int = attrs.field(validator=_in_limits("convergence.max_samples"))
    max_time_s: float = attrs.field(validator=_in_limits("convergence.max_time_s"))
    mlperf_log: Literal["convergence", "always", "never"]
    mlperf_benchmark: str
    mlperf_division: Literal["open", "closed"]
    mlperf_org: str


def _non_negative_prices(_: Any, attribute: Any, value: dict[str, float]) -> None:
    for device, price in value.items():
        if price < 0:
            raise ValueError(f"cost.{attribute.name}.{device}: must not be negative, got {price}")


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

    def check_consistency(self, origins: Mapping[str, str] | None = None) -> None:
        """Raise :class:`ConfigError` if warm-up and iterations, parallelism and batch sizes do not fit
        together.  ``origins``: where each ``section.key`` was set, named in the message."""
        b = self.benchmark
        if b.warmup_iterations >= b.iterations:
            raise ConfigError(
                f"benchmark.warmup_iterations = {b.warmup_iterations}{_set_at(origins, 'benchmark.warmup_iterations')}"
                f" is not less than benchmark.iterations = {b.iterations}{_set_at(origins, 'benchmark.iterations')}:"
                " every iteration would be warm-up and nothing measured; lower the warm-up or raise the iterations"
            )
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
    # The hooks for numbers come first: a class hook made before them would convert with int()
    # itself, and truncate 3.9 to 3.  TOML has no int/float distinction for values like
    # `lr = 1`: ints are accepted as floats, never floats as ints.
    converter.register_structure_hook(float, lambda v, _: _strict_float(v))
    converter.register_structure_hook(int, lambda v, _: _strict_int(v))
    converter.register_structure_hook(bool, lambda v, _: _strict_bool(v))
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
    return converter


def _strict_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, int) and abs(value) > 2**1023:
        raise ValueError(f"expected a number a float can hold, got {value}")
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return float(value)


def _strict_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a whole number, got {value!r}")
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


def _merge(
    base: dict[str, Any],
    update: dict[str, Any],
    origin: str,
    origins: dict[str, str] | None = None,
    lines: Mapping[str, int] | None = None,
) -> None:
    """``update`` laid over ``base``; ``origins`` notes where each key was set (``origin``, with
    the key's line from ``lines`` when known)."""
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
            if origins is not None:
                line = (lines or {}).get(f"{section}.{key}")
                origins[f"{section}.{key}"] = f"{origin}:{line}" if line else origin


_TABLE_RE = re.compile(r"^\s*\[\s*([A-Za-z0-9_-]+)\s*\]\s*(?:#.*)?$")
_KEY_RE = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")


def _key_lines(text: str) -> dict[str, int]:
    """The line of each ``section.key`` a config file sets as ``key = ...`` under ``[section]``
    (the usual layout; keys written otherwise are named without a line)."""
    found: dict[str, int] = {}
    section = None
    for number, line in enumerate(text.splitlines(), 1):
        table = _TABLE_RE.match(line)
        if table is not None:
            section = table.group(1)
            continue
        key = _KEY_RE.match(line)
        if key is not None and section is not None:
            found.setdefault(f"{section}.{key.group(1)}", number)
    return found


def _read_text(path: str | Path) -> str:
    """A config file's text; one line naming the byte that is not UTF-8, if one is not."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset {exc.start} "
            "cannot be decoded (TOML files are UTF-8; save the file as UTF-8)"
        ) from None


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    base: dict[str, Any] | None = None,
) -> BenchmarkConfig:
    """Defaults (or ``base``), then the TOML file at ``path``, then ``section.key=value`` overrides."""
    merged = base if base is not None else default_config_dict()
    merged = json.loads(json.dumps(merged))  # deep copy of plain data
    origins: dict[str, str] = {}
    if path is not None:
        text = _read_text(path)
        try:
            user = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        except RecursionError:
            raise ConfigError(f"{path}: invalid TOML: values nested too deeply") from None
        _merge(merged, user, str(path), origins, _key_lines(text))
    for item in overrides:
        (section, key), value = parse_override(item)
        _merge(merged, {section: {key: value}}, f"--set {item}", origins)
    return config_from_dict(merged, origins=origins)


def _set_at(origins: Mapping[str, str] | None, key: str) -> str:
    """`` (set at ORIGIN)`` for a key whose origin is known, else nothing."""
    origin = (origins or {}).get(key)
    return f" ({origin})" if origin else ""


def _at(origins: Mapping[str, str], key: str, problem: str) -> str:
    """``problem`` after where ``key`` was set (``FILE:LINE: ...``, ``--set ITEM: ...``), if known."""
    origin = origins.get(key)
    return f"{origin}: {problem}" if origin else problem


def _value_problems(data: Mapping[str, Any], origins: Mapping[str, str]) -> list[str]:
    """What is wrong with the numbers of ``data``: a whole-number setting that is not a whole
    number, a number that is not finite, a value past its limit; each names the key, where it was
    set and the rule."""
    problems = []
    for key, (least, greatest) in [*INT_LIMITS.items(), *FLOAT_LIMITS.items()]:
        section, name = key.split(".")
        values = data.get(section)
        if not isinstance(values, Mapping) or name not in values:
            continue
        value = values[name]
        whole = key in INT_LIMITS
        items = value if isinstance(value, list) else [value]
        for item in items:
            problem = _number_problem(item, whole, least, greatest)
            if problem is not None:
                shown = json.dumps(item) if isinstance(item, str) else repr(item)
                problems.append(_at(origins, key, f"{key} = {shown} {problem}"))
                break
    for section, values in data.items():
        if not isinstance(values, Mapping):
            continue
        for name, value in values.items():
            key = f"{section}.{name}"
            if key in INT_LIMITS or key in FLOAT_LIMITS:
                continue
            for item in value.values() if isinstance(value, Mapping) else [value]:
                if isinstance(item, float) and not math.isfinite(item):
                    problems.append(_at(origins, key, f"{key} = {item!r} must be a finite number"))
                    break
    return problems


def _number_problem(value: Any, whole: bool, least: float, greatest: float) -> str | None:
    """What ``value`` breaks of its rule (a whole number or a finite number, from least to greatest)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        kind = "a whole number" if whole else "a number"
        return f"must be {kind}, not {'a string' if isinstance(value, str) else type(value).__name__}"
    if whole and not isinstance(value, int):
        return "must be a whole number, written without a point or an exponent (it is never rounded)"
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if value > greatest:
        return f"is above the limit of {_limit_text(greatest)}"
    if value < least:
        return f"must be at least {_limit_text(least)}"
    return None


def config_from_dict(data: dict[str, Any], *, origins: Mapping[str, str] | None = None) -> BenchmarkConfig:
    """Structure and validate a config dict; errors name the offending key (and where it was set,
    from ``origins``: ``section.key`` -> file and line, or the ``--set`` item)."""
    import cattrs

    problems = _value_problems(data, origins or {})
    if problems:
        raise ConfigError(("" if origins else "invalid config: ") + "; ".join(problems))
    try:
        config = _get_converter().structure(data, BenchmarkConfig)
    except cattrs.BaseValidationError as exc:
        problems = _structure_problems(exc, origins or {})
        raise ConfigError(("" if origins else "invalid config: ") + "; ".join(problems)) from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"invalid config: {exc}") from None
    config.check_consistency(origins)
    return config


def _structure_problems(exc: BaseException, origins: Mapping[str, str]) -> list[str]:
    """Each problem cattrs found, as ``section.key: rule, got value`` after where it was set.

    cattrs places a validator's error at the section (``$.cost``), not at the key; the key
    is in the error itself (:func:`_structure_problem`).
    """
    import cattrs

    problems = []
    for line in cattrs.transform_error(exc, path="$", format_exception=_structure_problem):
        message, _, where = line.rpartition(" @ $")
        path = where.lstrip(".")
        name, colon, rest = message.partition(": ")
        if colon and name.isidentifier() and path and "." not in path:  # a key of the section at path
            key, text = f"{path}.{name}", f"{path}.{name}: {rest}"
        elif path and message.startswith(path + "."):  # the message names its key
            key, text = message.split()[0], message
        else:
            key, text = path, (f"{path}: {message}" if path else message)
        problems.append(_at(origins, key, text))
    return problems


def _structure_problem(exc: BaseException, type_: Any) -> str:
    """One structuring error as ``rule, got value`` (with ``key:`` first when the error knows it)."""
    from typing import get_args, get_origin

    from cattrs.v import format_exception

    if get_origin(type_) is Literal:
        choices = ", ".join(repr(choice) for choice in get_args(type_))
        got = re.match(r"(.*) not in literal ", str(exc))
        return f"must be one of {choices}" + (f", got {got.group(1)!r}" if got else "")
    if isinstance(exc, ValueError | TypeError):
        found = re.match(r"'(\w+)' (must [^:]*): (.*)$", str(exc))  # attrs.validators: "'x' must be > 0: -1"
        if found:
            return f"{found.group(1)}: {found.group(2)}, got {found.group(3)}"
    if isinstance(exc, ValueError) and exc.args:
        return str(exc)
    return format_exception(exc, type_)


def dump_toml(config: BenchmarkConfig) -> str:
    """The config as TOML text (what ``tprimat config show`` prints and runs store)."""
    from tprimat.settings.tomltext import toml_document

    return toml_document(config.to_dict())
