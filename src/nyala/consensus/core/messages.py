"""The messages replicas exchange, as plain frozen dataclasses.

Every message names its Raft group (``group_id``, the tablet id), its sender, its recipient
and the sender's term, so a driver can route it, and can coalesce the messages of many groups
between the same two servers into one RPC (Kudu's MultiRaftUpdateConsensus).  Heartbeats are
their own small message type for that reason: they carry no entries and are the bulk of the
idle traffic.  The runtime maps these to protobuf; the core never sees bytes on the wire.

"No" answers are messages too (``success=False``, ``granted=False``), never exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass

from nyala.consensus.core.types import LogEntry

__all__ = [
    "AppendRequest",
    "AppendResponse",
    "Heartbeat",
    "HeartbeatResponse",
    "Message",
    "TimeoutNow",
    "VoteRequest",
    "VoteResponse",
]


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """The leader's AppendEntries: ``entries`` follow the entry at (``prev_index``, ``prev_term``)."""

    group_id: str
    sender: str
    recipient: str
    term: int
    prev_index: int
    prev_term: int
    entries: tuple[LogEntry, ...]
    commit_index: int


@dataclass(frozen=True, slots=True)
class AppendResponse:
    """A follower's answer.

    On success ``index`` is the last index now known to match the leader.  On rejection
    ``index`` echoes the rejected ``prev_index`` and (``hint_index``, ``hint_term``) is the
    follower's last entry at or below it whose term is at most the request's ``prev_term``:
    the leader skips back over a whole conflicting term in one round trip (fast backtracking).
    ``last_index`` is the follower's last log index, whatever the outcome.
    """

    group_id: str
    sender: str
    recipient: str
    term: int
    success: bool
    index: int
    hint_index: int
    hint_term: int
    last_index: int


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """RequestVote.  A pre-vote asks for ``term`` (the sender's term + 1) without raising anything."""

    group_id: str
    sender: str
    recipient: str
    term: int
    last_index: int
    last_term: int
    pre_vote: bool
    # Set only by a leadership-transfer target: vote even if a leader was heard from recently.
    ignore_live_leader: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    """A vote.  A granted pre-vote echoes the requested term; anything else carries the voter's term."""

    group_id: str
    sender: str
    recipient: str
    term: int
    pre_vote: bool
    granted: bool


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """The leader's periodic proof of life.

    ``commit_index`` is capped at what the recipient is known to hold.  ``read_seq`` numbers the
    heartbeat round so that read-index requests can wait for a majority to answer it.
    ``leader_commit`` is the leader's whole commit index, uncapped: a follower that has applied
    up to it holds everything committed when the heartbeat was sent (follower reads prove
    their staleness bound with it; 0 from a sender that does not say).
    """

    group_id: str
    sender: str
    recipient: str
    term: int
    commit_index: int
    read_seq: int
    leader_commit: int = 0


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """Answer to a heartbeat, with the follower's last index so a stalled peer can be probed again."""

    group_id: str
    sender: str
    recipient: str
    term: int
    read_seq: int
    last_index: int


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    """Kudu's RunLeaderElection: the leader tells a caught-up voter to campaign now (transfer)."""

    group_id: str
    sender: str
    recipient: str
    term: int


Message = AppendRequest | AppendResponse | VoteRequest | VoteResponse | Heartbeat | HeartbeatResponse | TimeoutNow
