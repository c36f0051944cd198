"""
The percentile the benchmarks quote: nearest rank, as `bench.reactor` and `bench.game_recall`
(and `bench.recall_replay`, which gives the latter's figures again) report it.
"""

import math


def percentile(values, share):
    """
    The nearest-rank percentile of a non-empty list: the smallest value with at least `share`
    of the values at or below it.

    Args:
        values (list[float]): The values, in any order.
        share (float): 0..1 (0.99 for p99).
    """
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(share * len(ordered)))) - 1]
