"""Exact arithmetic on columns of numbers, compiled (``_exact.c``; see ``tprimat.result.plausible``
and ``tprimat.result.metrics``)."""

def scaled_sums(batch: list[float]) -> tuple[int, int, int] | None: ...
def within(
    values: list[object] | tuple[object, ...], least: float, greatest: float, floats: bool, nones: bool
) -> bool | None: ...
