"""
The second stage of recall: from the first hits, the lines that add something.

A question about several things ("What does Mira do to unwind?") is answered by lines from
different days; the first stage ranks each line on its own, so the lines about one of them (the
same walk told four ways) fill the budget before the others are reached. The second stage
re-reads the best `DIVERSITY_POOL` hits against each other (maximal marginal relevance,
Carbonell & Goldstein 1998): each next line is the one whose score, less `weight` times its
cosine to the closest line already taken, is highest. A line that repeats one above it moves
down; what it repeats is already in the prompt.

Measured against the other ways of going beyond the first hits (`bench/README.md`, issue 30):
spreading activation over the A-MEM memory links, a second dense query from the first hits
(Rocchio), and favouring the first hits' sessions did not find more evidence than the first
stage; this did.
"""

import numpy

# How many of the best hits the second stage reorders (the rest keep their order after them).
DIVERSITY_POOL = 60


def diversify(recalled, vectors, weight, pool=DIVERSITY_POOL):
    """
    Reorder the best hits so that each next one adds the most (maximal marginal relevance).

    Args:
        recalled (list): Ranked hits, best first, each with a `score`.
        vectors (numpy.ndarray): One unit row per hit of `recalled[:pool]`, in that order.
        weight (float): How much resembling a line already taken costs (0: score alone).
        pool (int): How many of the best hits are reordered.

    Returns:
        list: The same hits, the first `pool` reordered.
    """
    head, tail = list(recalled[:pool]), list(recalled[pool:])
    if weight <= 0 or len(head) < 2:
        return head + tail
    best = head[0].score or 1.0
    relevance = numpy.array([found.score / best for found in head])
    similarity = vectors @ vectors.T
    closest = numpy.zeros(len(head))  # only resemblance costs: an unlike line costs nothing
    left = list(range(len(head)))
    order = []
    while left:
        value = relevance[left] - weight * closest[left]
        pick = left.pop(int(numpy.argmax(value)))
        order.append(pick)
        closest = numpy.maximum(closest, similarity[pick])
    return [head[i] for i in order] + tail
