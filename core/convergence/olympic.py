"""The olympic rule that scores several time-to-train runs (MLPerf Training's).

Sort the runs' times, a run that did not converge counting as the slowest; drop
the fastest and the slowest; average the rest.  With more failed runs than are
dropped there is no score.  It lives here, below both the MLPerf reader and the
comparison report, because both score runs with it.
"""

from __future__ import annotations

import math


def olympic_mean(times: list[float | None], *, max_dropped: int = 1) -> tuple[float | None, list[int], str | None]:
    """MLPerf's olympic mean of run times (None: the run did not converge, counted as the slowest).

    Returns the score, the indices of the dropped runs, and why there is no score.
    """
    failed = sum(t is None for t in times)
    if failed > max_dropped:
        return None, [], f"{failed} runs did not converge; MLPerf allows {max_dropped}"

    def time_or_slowest(index: int) -> float:
        time = times[index]
        return math.inf if time is None else time

    order = sorted(range(len(times)), key=time_or_slowest)
    kept = order[max_dropped : len(order) - max_dropped]
    if not kept:
        return None, [], f"{len(times)} runs leave none after dropping the fastest and the slowest"
    dropped = order[:max_dropped] + order[len(order) - max_dropped :]
    # The runs that did not converge sort last and are all among the dropped ones.
    kept_times = [time for time in (times[i] for i in kept) if time is not None]
    return sum(kept_times) / len(kept), dropped, None
