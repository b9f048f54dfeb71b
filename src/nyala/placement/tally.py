"""A server's count in one context (a table or a range in a location), packed in one int.

Reported replicas sit above bit ``REPORTED_SHIFT`` and the scaled pending sum
(:mod:`nyala.placement.decay`) below it.  Ints are not tracked by the garbage collector and a
dict of them updates with one store, which matters with a hundred thousand members.
"""

from __future__ import annotations

__all__ = ["ONE_REPORTED", "PENDING_MASK", "REPORTED_SHIFT", "pending_of", "reported_of", "scaled_load"]

REPORTED_SHIFT = 128  # pending sums stay far below 2**128: weights < 2**73, counts < 2**55
ONE_REPORTED = 1 << REPORTED_SHIFT
PENDING_MASK = ONE_REPORTED - 1


def scaled_load(tally: int, weight: int) -> int:
    """Reported replicas times the current weight, plus the pending sum: the decayed load, scaled."""
    return (tally >> REPORTED_SHIFT) * weight + (tally & PENDING_MASK)


def reported_of(tally: int) -> int:
    return tally >> REPORTED_SHIFT


def pending_of(tally: int) -> int:
    return tally & PENDING_MASK
