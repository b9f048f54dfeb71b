"""The leader's view of one peer's log (etcd's Progress, Kudu's TrackedPeer).

A peer is in one of three states:

- PROBE: the leader does not know where the peer's log matches its own.  It sends one
  AppendEntries at a time (then ``paused`` until an answer or the next heartbeat answer) and
  moves ``next`` back using the peer's hints until an append succeeds.  ``match`` only grows,
  except when a probe at ``match`` itself is refused: the peer lost entries it acknowledged
  (its log was replaced by an older copy) and ``match`` starts again from 0.
- REPLICATE: the logs match up to ``match``; the leader streams batches optimistically,
  advancing ``next`` as it sends, with at most ``raft_max_inflight_batches`` unacknowledged.
  A rejection, or no acknowledgement for an election timeout (lost messages), falls back to
  PROBE.
- NEEDS_COPY: the peer needs entries the leader has compacted away.  The driver is asked for
  a tablet copy (again every few election timeouts).  Only heartbeats and, when the peer's
  log looks long enough, an empty AppendEntries at the compaction base are sent; the first
  acknowledgement (the copy has landed) resumes replication.
"""

from __future__ import annotations

import enum
from collections import deque

__all__ = ["PeerHealth", "Progress", "ProgressState"]


class ProgressState(enum.Enum):
    PROBE = "PROBE"
    REPLICATE = "REPLICATE"
    NEEDS_COPY = "NEEDS_COPY"


class PeerHealth(enum.Enum):
    """A member's health as its leader sees it (Kudu's HealthStatus); the master replaces
    FAILED and FAILED_UNRECOVERABLE members."""

    UNKNOWN = "UNKNOWN"  # the leader is still looking for the end of its log
    HEALTHY = "HEALTHY"  # being replicated to
    FAILED = "FAILED"  # silent for follower_unavailable_considered_failed_sec
    FAILED_UNRECOVERABLE = "FAILED_UNRECOVERABLE"  # needs entries the leader compacted away


class Progress:
    """Replication state of one peer, kept by the leader only."""

    __slots__ = (
        "answers",
        "copy_notice_ticks",
        "copy_ticks",
        "inflight",
        "match",
        "next",
        "notice_due",
        "paused",
        "read_seq",
        "recent_active",
        "sent_commit",
        "silent_ticks",
        "stall_ticks",
        "state",
    )

    def __init__(self, next_index: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.paused = False
        self.inflight: deque[int] = deque()  # last index of each unacknowledged batch, ascending
        self.recent_active = False  # any answer since the last check-quorum round
        self.silent_ticks = 0  # ticks since the peer last answered (or since this leader began)
        self.answers = 0  # answers heard from the peer while this leader leads (only grows)
        self.stall_ticks = 0  # ticks with batches in flight and no acknowledgement
        self.read_seq = 0  # highest heartbeat round this peer answered
        self.sent_commit = 0  # commit index last sent in an AppendEntries (or a heartbeat)
        self.notice_due = False  # a tick passed since: a commit index it lacks may go alone
        self.copy_notice_ticks = 0  # ticks until NEEDS_COPY is reported to the driver again
        self.copy_ticks = 0  # ticks spent in NEEDS_COPY this time

    def __repr__(self) -> str:
        return f"Progress({self.state.value}, match={self.match}, next={self.next}, inflight={len(self.inflight)})"

    def heard(self) -> None:
        """The peer answered something."""
        self.recent_active = True
        self.silent_ticks = 0
        self.answers += 1

    def health(self, failed_ticks: int) -> PeerHealth:
        """FAILED after ``failed_ticks`` of silence (Kudu's rule).  A peer needing a copy is
        FAILED_UNRECOVERABLE only once it has needed one that long: unlike Kudu's, a Nyala
        leader copies the tablet to it itself, so until then it is recovering (UNKNOWN)."""
        if self.state is ProgressState.NEEDS_COPY:
            return PeerHealth.FAILED_UNRECOVERABLE if self.copy_ticks >= failed_ticks else PeerHealth.UNKNOWN
        if self.silent_ticks >= failed_ticks:
            return PeerHealth.FAILED
        return PeerHealth.HEALTHY if self.state is ProgressState.REPLICATE else PeerHealth.UNKNOWN

    def acknowledge(self, index: int) -> bool:
        """Record that the peer's log matches up to ``index``; True when ``match`` moved."""
        self.stall_ticks = 0
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()
        if index <= self.match:
            return False
        self.match = index
        self.next = max(self.next, index + 1)
        self.paused = False
        return True

    def reject(self, rejected: int, hint_index: int) -> bool:
        """Move ``next`` back after a rejection; False when the rejection is stale."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
        elif self.state is ProgressState.PROBE:
            if rejected != self.next - 1:
                return False
        else:
            return False
        if rejected <= self.match:
            # Probing at ``match`` failed: the peer no longer holds an entry it acknowledged.
            # Its log was replaced by an older one (a tablet copy taken before its last
            # acknowledgements; a disk restored from a backup).  Counting it at ``match`` would
            # let the leader count entries the peer lacks toward commit, and ``next`` could
            # never go below ``match + 1``: the leader would probe there for ever.  Forget
            # what it acknowledged until it acknowledges again.
            self.match = 0
        self.next = max(min(rejected, hint_index + 1), self.match + 1)
        self.state = ProgressState.PROBE
        self.paused = False
        self.inflight.clear()
        return True

    def become_probe(self) -> None:
        self.state = ProgressState.PROBE
        self.next = self.match + 1
        self.paused = False
        self.inflight.clear()
        self.stall_ticks = 0

    def become_replicate(self) -> None:
        self.state = ProgressState.REPLICATE
        self.next = self.match + 1
        self.inflight.clear()
        self.stall_ticks = 0

    def become_needs_copy(self) -> None:
        self.state = ProgressState.NEEDS_COPY
        self.paused = False
        self.inflight.clear()
        self.copy_notice_ticks = 0
        self.copy_ticks = 0

    def sent(self, last_index: int) -> None:
        """A batch ending at ``last_index`` went out."""
        if self.state is ProgressState.REPLICATE:
            self.inflight.append(last_index)
            self.next = last_index + 1
        else:
            self.paused = True
