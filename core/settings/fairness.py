"""The one definition of what two runs must share to be compared side by side.

A fair comparison holds the work fixed: the model, the data (by content), the
sequence length, the global batch, the precision, and the methodology under
which each platform was set up.  Everything else — parallel layout, kernels,
launch shape — is what a platform may tune.  The config fingerprint
(:func:`tprimat.settings.config.BenchmarkConfig.fingerprint`), the tuned
presets' forbidden keys (:mod:`tprimat.settings.methodology`), the comparison
groups (:mod:`tprimat.compare.group`) and the legacy importer all use these
names.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Fair field -> the config key that sets it.
FAIR_CONFIG_KEYS: dict[str, str] = {
    "model": "benchmark.model",
    "methodology": "benchmark.methodology",
    "dataset": "data.dataset",
    "seq_length": "training.seq_length",
    "global_batch_size": "training.global_batch_size",
    "precision": "precision.dtype",
}
#: The fields, in the order reports list them.
FAIR_FIELDS: tuple[str, ...] = tuple(FAIR_CONFIG_KEYS)


def fair_values(
    *,
    model: str | None,
    methodology: str | None,
    dataset: str | None,
    seq_length: int | None,
    global_batch_size: int | None,
    precision: str | None,
) -> dict[str, Any]:
    """The fair fields of one run.  ``dataset`` is "mock" or the data's content fingerprint."""
    return {
        "model": model,
        "methodology": methodology,
        "dataset": dataset,
        "seq_length": seq_length,
        "global_batch_size": global_batch_size,
        "precision": precision,
    }


def config_fingerprint(fields: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of ``fields`` (sorted keys), first 16 hex digits."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:16]
