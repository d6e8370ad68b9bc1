"""Which iterations a run profiles, derived once from the ``[profile]`` config for every backend.

The config speaks ``torch.profiler.schedule``: skip ``wait`` iterations, warm
the profiler up for ``warmup``, record ``active``.  Backends express that
window in their own terms:

* Megatron-LM and Primus (``--profile-step-start S --profile-step-end E``):
  iterations are numbered from 1 as the log prints them; Megatron warms the
  profiler up during iteration ``S-1`` and records ``S`` … ``E-1``.  tprimat
  sets ``S = wait + warmup + 1`` and ``E = S + active``.
* NeMo's ``PytorchProfilerCallback(start_step, end_step, warmup_steps,
  active_steps)``: steps are the 0-based global step; the profiler starts at
  ``start_step = wait`` and stops at ``end_step = wait + warmup + active``.

The iterations left out of the statistics are the warm-up and recorded ones
plus the one during which the trace is written (exporting a trace takes
seconds and lands in that iteration's time).
"""

from __future__ import annotations

import attrs

from tprimat.settings.config import BenchmarkConfig, ConfigError


@attrs.frozen(kw_only=True)
class ProfileWindow:
    first_recorded: int  # first iteration recorded, in the framework's own numbering
    last_recorded: int  # last iteration recorded (inclusive)
    warmup: int  # profiler warm-up iterations just before first_recorded
    ranks: tuple[int, ...]

    @property
    def excluded(self) -> tuple[int, ...]:
        """Iterations whose timing the profiler disturbs: warm-up, recorded, and the export iteration."""
        return tuple(range(self.first_recorded - self.warmup, self.last_recorded + 2))


def _check(config: BenchmarkConfig) -> None:
    profile = config.profile
    if profile.repeat != 1:
        raise ConfigError(f"profile.repeat = {profile.repeat}: tprimat profiles one window per run (repeat = 1)")
    if profile.active < 1:
        raise ConfigError("profile.active must be at least 1 iteration")
    if profile.wait < 0 or profile.warmup < 0:
        raise ConfigError("profile.wait and profile.warmup cannot be negative")
    if not profile.ranks:
        raise ConfigError("profile.ranks is empty: name at least one rank to profile")
    bad = [r for r in profile.ranks if r < 0 or r >= config.world_size]
    if bad:
        raise ConfigError(f"profile.ranks {bad} are outside the world of {config.world_size} ranks")


def megatron_window(config: BenchmarkConfig) -> tuple[int, int, ProfileWindow]:
    """(profile_step_start, profile_step_end, window) for Megatron-LM/Primus (1-based iterations)."""
    _check(config)
    profile = config.profile
    start = profile.wait + max(profile.warmup, 1) + 1
    end = start + profile.active
    if end > config.benchmark.iterations:
        raise ConfigError(
            f"the profile window ends at iteration {end} but the run has {config.benchmark.iterations} "
            "iterations: lower profile.wait/warmup/active or raise benchmark.iterations"
        )
    window = ProfileWindow(first_recorded=start, last_recorded=end - 1, warmup=1, ranks=tuple(profile.ranks))
    return start, end, window


def nemo_window(config: BenchmarkConfig) -> tuple[int, int, ProfileWindow]:
    """(start_step, end_step, window) for NeMo's profiler callback (0-based global steps)."""
    _check(config)
    profile = config.profile
    start = profile.wait
    end = start + profile.warmup + profile.active
    if end >= config.benchmark.iterations:
        raise ConfigError(
            f"the profile window ends at step {end} but the run has {config.benchmark.iterations} steps "
            "(0-based): lower profile.wait/warmup/active or raise benchmark.iterations"
        )
    window = ProfileWindow(
        first_recorded=start + profile.warmup, last_recorded=end - 1, warmup=profile.warmup,
        ranks=tuple(profile.ranks),
    )
    return start, end, window


def megatron_profile_args(
    config: BenchmarkConfig, tensorboard_dir: str, pytorch_profiler: bool = True
) -> tuple[tuple[str, ...], ProfileWindow]:
    """Megatron-LM's profiling flags for the config's window (shared by the Megatron-LM backends).

    With ``pytorch_profiler=False`` Megatron opens and closes a CUDA profiler
    range (``cudaProfilerStart``/``Stop``) around the same iterations instead:
    that is what ``nsys --capture-range=cudaProfilerApi`` records.
    """
    start, end, window = megatron_window(config)
    args = ["--profile"]
    if pytorch_profiler:
        args.append("--use-pytorch-profiler")
    args += ["--profile-step-start", str(start), "--profile-step-end", str(end), "--profile-ranks"]
    args += [str(rank) for rank in window.ranks]
    if pytorch_profiler:
        # older Megatron writes traces into --tensorboard-dir, newer into <tensorboard-dir>/../torch_profile
        args += ["--tensorboard-dir", tensorboard_dir]
    return tuple(args), window


#: Where Megatron-LM's torch profiler writes, relative to the run directory (tensorboard dir = run_dir/tensorboard).
MEGATRON_TRACE_GLOBS = ("tensorboard/*.pt.trace.json", "tensorboard/*.pt.trace.json.gz", "torch_profile/rank-*.json.gz")
