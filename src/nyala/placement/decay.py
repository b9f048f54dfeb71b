"""Exponential decay of pending replicas without ever rewriting stored weights.

A replica placed at time ``t`` weighs ``2 ** (-(now - t) / half_life)`` at ``now``.  Instead of
decaying every stored value, each placement adds the *growing* weight
``W(t) = 2 ** (SCALE_BITS + (t - epoch) / half_life)`` (an integer) to a sum ``S``, and every
load is compared in units of the current weight: a server with ``c`` reported replicas and
pending sum ``S`` has the scaled load ``c * W(now) + S``, which is ``W(now)`` times its decayed
load.  All servers are scaled by the same ``W(now)``, so comparisons are exact integer
comparisons, a fresh pending replica weighs exactly as much as a reported one, and two servers
with the same history tie exactly.

As ``now`` advances, ``W`` grows, so a scaled load never decreases with time: a value stored in an
index stays a lower bound of the current one, which is what lets the indexes refresh lazily.

Time is quantized (``placement_decay_quantum_ms``, 1 s by default, 1/60 of the half-life) so that
``W`` changes once per quantum rather than on every call.  To keep the integers small, the epoch
moves forward by whole half-lives once ``REBASE_HALF_LIVES`` have passed: every stored sum is
shifted right by that many bits, which also forgets contributions that have decayed below
``2 ** -SCALE_BITS`` (about 1e-12, the cutoff Kudu applies).
"""

from __future__ import annotations

import math

from nyala.errors import InvalidArgument
from nyala.placement.options import PlacementOptions

__all__ = ["SCALE_BITS", "DecayClock"]

SCALE_BITS = 40
REBASE_HALF_LIVES = 32


class DecayClock:
    """The injected clock, quantized, and the weight of a pending replica placed now."""

    __slots__ = ("_epoch_ms", "_half_life_ms", "_quantum_ms", "last_now_s", "quantum", "weight")

    def __init__(self, options: PlacementOptions) -> None:
        self._half_life_ms = options.tserver_last_replica_creations_halflife_ms
        self._quantum_ms = options.placement_decay_quantum_ms
        self._epoch_ms: int | None = None
        self.last_now_s = -math.inf
        self.quantum = 0
        self.weight = 1 << SCALE_BITS

    def advance(self, now_s: float) -> int:
        """Move to ``now_s``; return how many bits stored sums must be shifted right (0 usually)."""
        if not isinstance(now_s, int | float) or not math.isfinite(now_s):
            raise InvalidArgument(f"now must be a finite number of seconds, got {now_s!r}")
        if now_s < self.last_now_s:
            raise InvalidArgument(f"time went backwards: now={now_s} after {self.last_now_s}; pass a monotonic clock")
        self.last_now_s = now_s
        quantum = math.floor(now_s * 1000 / self._quantum_ms)
        if self._epoch_ms is not None and quantum == self.quantum:
            return 0
        self.quantum = quantum
        now_ms = quantum * self._quantum_ms
        if self._epoch_ms is None:
            self._epoch_ms = now_ms
        half_lives = (now_ms - self._epoch_ms) / self._half_life_ms
        shift = 0
        if half_lives >= REBASE_HALF_LIVES:
            shift = math.floor(half_lives)
            self._epoch_ms += shift * self._half_life_ms
            half_lives -= shift
        self.weight = round(2.0 ** (SCALE_BITS + half_lives))
        return shift

    def decayed(self, scaled: int) -> float:
        """A scaled pending sum as a number of replicas at the current time (for display)."""
        return scaled / self.weight
