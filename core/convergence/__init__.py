"""Time to train: held-out validation data (docs/convergence.md).

:mod:`tprimat.convergence.split` decides which documents of a prepared dataset are held
out for evaluation; :mod:`tprimat.result.convergence` turns a run's evaluation records
into time-to-target and samples-to-target.  Neither imports torch.
"""

from __future__ import annotations

import math
from typing import Any


def iteration_budget(config: Any) -> int:
    """Iterations a run may train: ``benchmark.iterations``, or for a convergence run with
    ``convergence.max_samples`` set, enough iterations to reach that many samples."""
    c, gbs = config.convergence, config.training.global_batch_size
    if c.enabled and c.max_samples:
        return math.ceil(c.max_samples / gbs)
    return config.benchmark.iterations
