"""The benchmarks' one percentile (`bench/percentiles.py`): nearest rank."""

import pytest

from bench.percentiles import percentile


@pytest.mark.parametrize(("share", "expected"), [
    (0.0, 1), (0.1, 1), (0.11, 2), (0.5, 5), (0.9, 9), (0.95, 10), (0.99, 10), (1.0, 10)])
def test_nearest_rank_of_ten_values(share, expected):
    # the smallest value with at least `share` of the values at or below it; p50 of ten is
    # the fifth (not the sixth, as rounding half to even once gave)
    assert percentile(list(range(10, 0, -1)), share) == expected


def test_p99_of_two_hundred_is_the_198th():
    assert percentile(list(range(1, 201)), 0.99) == 198
