"""A profile window: which iterations a backend's profiler disturbs, whatever its own numbering.

The config speaks ``torch.profiler.schedule`` (``[profile]``: skip ``wait``
iterations, warm the profiler up for ``warmup``, record ``active``).  Each
backend's ``profile`` hook turns that into its framework's own terms and
answers with a :class:`ProfileWindow`; the iterations it disturbs (warm-up,
recorded, and the one during which the trace is written: exporting a trace
takes seconds and lands in that iteration's time) are left out of the
statistics.  :func:`check_profile_config` holds the rules every backend shares.
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


def check_profile_config(config: BenchmarkConfig) -> None:
    """Raise :class:`ConfigError` for a ``[profile]`` section no backend can honour."""
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
