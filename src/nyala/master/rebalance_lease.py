"""The rebalance lease: how a CLI rebalance keeps the leader master's auto rebalancer away.

A ``nyala cluster rebalance`` run takes a lease from the leader master (RebalanceLease RPC)
before its first move and renews it every :data:`CLI_RENEW_S` while it runs; it releases the
lease when it ends.  While any lease is held, the auto rebalancer starts no moves, so the two
never plan against each other.  Nothing is persisted: a CLI killed with -9 simply stops
renewing and its lease lapses after at most :data:`CLI_LEASE_S`; a new leader master, which
never saw the leases its predecessor granted, behaves as if one were held for
:data:`CLI_LEASE_S` after it becomes leader, long enough for a running CLI to renew with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nyala.errors import InvalidArgument

__all__ = ["CLI_LEASE_S", "CLI_RENEW_S", "MAX_LEASE_S", "NEW_LEADER_HOLDER", "RebalanceLease"]

#: How long the CLI asks for, and how often it renews (three renewals per term survive two losses).
CLI_LEASE_S = 10.0
CLI_RENEW_S = 3.0
#: The longest lease the master grants, so a stuck holder cannot pause the master for long.
MAX_LEASE_S = 120.0
#: The holder a new leader master assumes for its first :data:`CLI_LEASE_S`.
NEW_LEADER_HOLDER = "(a rebalance that may have held a lease from the previous leader master)"


class RebalanceLease:
    """Leases by holder, each with its expiry (monotonic seconds from ``clock``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._expiry: dict[str, float] = {}

    def grant(self, holder: str, duration_s: float) -> float:
        """Take or renew ``holder``'s lease for ``duration_s`` (capped); 0 releases it.  Returns
        the duration granted."""
        if not holder:
            raise InvalidArgument("a rebalance lease needs a holder name")
        if duration_s < 0:
            raise InvalidArgument(f"a rebalance lease duration must not be negative, got {duration_s:g} s")
        if duration_s == 0:
            self._expiry.pop(holder, None)
            return 0.0
        granted = min(duration_s, MAX_LEASE_S)
        self._expiry[holder] = self._clock() + granted
        return granted

    def new_leadership(self) -> None:
        """Forget every lease and assume one for :data:`CLI_LEASE_S` (see the module doc)."""
        self._expiry = {NEW_LEADER_HOLDER: self._clock() + CLI_LEASE_S}

    def holder(self) -> str:
        """A holder of a lease still running, or "" when there is none."""
        now = self._clock()
        self._expiry = {h: t for h, t in self._expiry.items() if t > now}
        return min(self._expiry, default="")
