"""An environment in which benchmarked commands find their bytecode cached, as an installed package has it.

An environment that sets ``PYTHONDONTWRITEBYTECODE`` (some containers do) leaves an
editable checkout without ``__pycache__``: every run of ``tprimat`` then compiles its
sources again, about 0.1 s that no installed copy pays.  The benchmarks run ``tprimat``
with a ``PYTHONPYCACHEPREFIX`` of their own instead, which their untimed warm-up runs
fill, so that such a setting does not change what they measure.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def cached_bytecode_env() -> Iterator[dict[str, str]]:
    """This process's environment with a bytecode cache of its own (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="tprimat-bytecode-") as prefix:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": prefix}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up runs fill the cache
        yield env
