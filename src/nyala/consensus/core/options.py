"""Consensus settings (Kudu's flag names where Kudu has them) and their conversion to ticks.

The core counts time in ticks: the driver calls ``tick()`` every ``raft_tick_interval_ms``
(100 ms by default).  With Kudu's defaults a heartbeat goes out every 5 ticks and a follower
presumes the leader failed after 3 missed heartbeats, i.e. 15 ticks (1.5 s) after it last
heard from it.  After granting a vote or starting an election it waits a random 15 to 22
ticks instead (more after failed elections), so that candidates rarely collide twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nyala.common.config import setting
from nyala.errors import InvalidArgument

__all__ = ["RaftOptions", "TickTiming"]


@dataclass(frozen=True)
class RaftOptions:
    """Settings of one Raft replica."""

    raft_tick_interval_ms: int = setting(
        100,
        "How often the driver calls tick() on each replica; every other timing is rounded to this.",
        "advanced",
    )
    raft_heartbeat_interval_ms: int = setting(
        500,
        "Interval at which the leader sends heartbeats to every peer of the Raft config.",
        "advanced",
    )
    leader_failure_max_missed_heartbeat_periods: float = setting(
        3.0,
        "Number of heartbeat periods a follower waits without hearing from the leader before it "
        "starts an election; also the window in which it refuses to vote for anyone else.",
        "advanced",
    )
    leader_failure_exp_backoff_max_delta_ms: int = setting(
        20_000,
        "Cap on how far the exponential backoff after failed elections stretches the election timeout.",
        "advanced",
    )
    raft_enable_pre_election: bool = setting(
        True,
        "Run a pre-election that raises no term before a real election, so that a replica that "
        "cannot win never disrupts a working leader.",
        "advanced",
    )
    consensus_max_batch_size_bytes: int = setting(
        1024 * 1024,
        "Maximum bytes of log entries in one AppendEntries request and in one batch of committed "
        "entries handed to the driver (at least one entry is always sent).",
        "advanced",
    )
    raft_max_inflight_batches: int = setting(
        4,
        "Maximum number of AppendEntries batches in flight to one follower before the leader waits "
        "for acknowledgements.",
        "advanced",
    )
    follower_unavailable_considered_failed_sec: float = setting(
        300.0,
        "A leader reports a follower it has not heard from for this long as FAILED; the master then "
        "replaces it (Kudu's default).",
    )

    def __post_init__(self) -> None:
        if self.raft_tick_interval_ms <= 0:
            raise InvalidArgument(f"raft_tick_interval_ms must be positive, got {self.raft_tick_interval_ms}")
        if self.raft_heartbeat_interval_ms < self.raft_tick_interval_ms:
            raise InvalidArgument(
                f"raft_heartbeat_interval_ms ({self.raft_heartbeat_interval_ms}) must be at least "
                f"raft_tick_interval_ms ({self.raft_tick_interval_ms})"
            )
        if self.leader_failure_max_missed_heartbeat_periods < 1.0:
            raise InvalidArgument(
                "leader_failure_max_missed_heartbeat_periods must be at least 1, got "
                f"{self.leader_failure_max_missed_heartbeat_periods}"
            )
        if self.leader_failure_exp_backoff_max_delta_ms < 0:
            raise InvalidArgument("leader_failure_exp_backoff_max_delta_ms must not be negative")
        if self.consensus_max_batch_size_bytes <= 0:
            raise InvalidArgument("consensus_max_batch_size_bytes must be positive")
        if self.raft_max_inflight_batches <= 0:
            raise InvalidArgument("raft_max_inflight_batches must be positive")
        if not self.follower_unavailable_considered_failed_sec > 0:
            raise InvalidArgument(
                "follower_unavailable_considered_failed_sec must be positive, got "
                f"{self.follower_unavailable_considered_failed_sec}"
            )

    def timing(self) -> TickTiming:
        """The options converted to ticks."""
        tick = self.raft_tick_interval_ms
        heartbeat = max(1, round(self.raft_heartbeat_interval_ms / tick))
        election_ms = self.raft_heartbeat_interval_ms * self.leader_failure_max_missed_heartbeat_periods
        election = max(heartbeat + 1, math.ceil(election_ms / tick))
        return TickTiming(
            heartbeat_ticks=heartbeat,
            election_ticks=election,
            max_backoff_delta_ticks=math.ceil(self.leader_failure_exp_backoff_max_delta_ms / tick),
            failed_follower_ticks=max(1, math.ceil(self.follower_unavailable_considered_failed_sec * 1000 / tick)),
        )


@dataclass(frozen=True, slots=True)
class TickTiming:
    """Timing in ticks.  ``election_ticks`` is the minimum election timeout."""

    heartbeat_ticks: int
    election_ticks: int
    max_backoff_delta_ticks: int
    #: Ticks without an answer after which a leader reports a follower FAILED.
    failed_follower_ticks: int = 3000
