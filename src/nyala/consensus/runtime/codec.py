"""The core's message dataclasses to and from ``RaftMessagePB``, field for field."""

from __future__ import annotations

from collections.abc import Iterable

from nyala.common.errors import InvalidArgument
from nyala.consensus.core import (
    AppendRequest,
    AppendResponse,
    EntryType,
    Heartbeat,
    HeartbeatResponse,
    LogEntry,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from nyala.proto import consensus_rpc_pb2 as pb

__all__ = ["decode_message", "encode_message"]


def encode_message(m: Message) -> pb.RaftMessagePB:
    out = pb.RaftMessagePB(group_id=m.group_id, sender=m.sender, recipient=m.recipient, term=m.term)
    if isinstance(m, Heartbeat):
        out.heartbeat.commit_index = m.commit_index
        out.heartbeat.read_seq = m.read_seq
    elif isinstance(m, HeartbeatResponse):
        out.heartbeat_response.read_seq = m.read_seq
        out.heartbeat_response.last_index = m.last_index
    elif isinstance(m, AppendRequest):
        req = out.append_request
        req.prev_index, req.prev_term, req.commit_index = m.prev_index, m.prev_term, m.commit_index
        req.entries.extend(
            pb.LogEntryPB(term=e.term, index=e.index, type=int(e.type), payload=e.payload) for e in m.entries
        )
    elif isinstance(m, AppendResponse):
        r = out.append_response
        r.success, r.index, r.hint_index, r.hint_term, r.last_index = (
            m.success, m.index, m.hint_index, m.hint_term, m.last_index,
        )  # fmt: skip
    elif isinstance(m, VoteRequest):
        v = out.vote_request
        v.last_index, v.last_term, v.pre_vote, v.ignore_live_leader = (
            m.last_index, m.last_term, m.pre_vote, m.ignore_live_leader,
        )  # fmt: skip
    elif isinstance(m, VoteResponse):
        out.vote_response.pre_vote = m.pre_vote
        out.vote_response.granted = m.granted
    elif isinstance(m, TimeoutNow):
        out.timeout_now.SetInParent()
    else:  # pragma: no cover - the Message union is closed
        raise AssertionError(f"unknown Raft message {type(m).__name__}")
    return out


def decode_message(m: pb.RaftMessagePB) -> Message:
    """The core message for ``m``; InvalidArgument for a message with no body or a bad entry type."""
    head = (m.group_id, m.sender, m.recipient, m.term)
    kind = m.WhichOneof("body")
    if kind == "heartbeat":
        return Heartbeat(*head, commit_index=m.heartbeat.commit_index, read_seq=m.heartbeat.read_seq)
    if kind == "heartbeat_response":
        r = m.heartbeat_response
        return HeartbeatResponse(*head, read_seq=r.read_seq, last_index=r.last_index)
    if kind == "append_request":
        a = m.append_request
        return AppendRequest(
            *head,
            prev_index=a.prev_index,
            prev_term=a.prev_term,
            entries=_entries(a.entries),
            commit_index=a.commit_index,
        )
    if kind == "append_response":
        r2 = m.append_response
        return AppendResponse(
            *head, success=r2.success, index=r2.index, hint_index=r2.hint_index, hint_term=r2.hint_term,
            last_index=r2.last_index,
        )  # fmt: skip
    if kind == "vote_request":
        v = m.vote_request
        return VoteRequest(
            *head, last_index=v.last_index, last_term=v.last_term, pre_vote=v.pre_vote,
            ignore_live_leader=v.ignore_live_leader,
        )  # fmt: skip
    if kind == "vote_response":
        return VoteResponse(*head, pre_vote=m.vote_response.pre_vote, granted=m.vote_response.granted)
    if kind == "timeout_now":
        return TimeoutNow(*head)
    raise InvalidArgument(f"Raft message for group {m.group_id!r} from {m.sender!r} has no body")


def _entries(entries: Iterable[pb.LogEntryPB]) -> tuple[LogEntry, ...]:
    try:
        return tuple(LogEntry(e.term, e.index, EntryType(e.type), e.payload) for e in entries)
    except ValueError as exc:
        raise InvalidArgument(f"log entry with an unknown type: {exc}") from exc
