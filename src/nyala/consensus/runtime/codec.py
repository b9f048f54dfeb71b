"""The core's message dataclasses to and from ``RaftMessagePB``, field for field.

An entry payload of at least :data:`SIDECAR_MIN_BYTES` is not put in the protobuf: it is
appended to the ``sidecars`` list of the call that will carry the message, and the entry
names it by position.  Serialising a 1 MiB payload through protobuf cost 2.4-3 ms on the
sending side (copied into the message, again into the call, again by serialisation and again
into the frame); as a sidecar it is written from the entry's own bytes object, and the
receiver copies it once out of the frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
from nyala.errors import InvalidArgument
from nyala.proto import consensus_rpc_pb2 as pb
from nyala.rpc.framing import Buffer

__all__ = ["MAX_SIDECARS", "SIDECAR_MIN_BYTES", "decode_message", "encode_message"]

#: Smaller payloads stay inline: copying 1 KiB costs less than a sidecar's bookkeeping.
SIDECAR_MIN_BYTES = 1024
#: Beyond this many sidecars in one call, payloads go inline: each sidecar's size takes 4
#: bytes of the frame header, which is limited to 64 KiB.
MAX_SIDECARS = 1024


def encode_message(m: Message, sidecars: list[Buffer]) -> pb.RaftMessagePB:
    """The protobuf for ``m``; large entry payloads are appended to ``sidecars`` instead."""
    out = pb.RaftMessagePB(group_id=m.group_id, sender=m.sender, recipient=m.recipient, term=m.term)
    if isinstance(m, Heartbeat):
        out.heartbeat.commit_index = m.commit_index
        out.heartbeat.read_seq = m.read_seq
        out.heartbeat.leader_commit = m.leader_commit
    elif isinstance(m, HeartbeatResponse):
        out.heartbeat_response.read_seq = m.read_seq
        out.heartbeat_response.last_index = m.last_index
    elif isinstance(m, AppendRequest):
        req = out.append_request
        req.prev_index, req.prev_term, req.commit_index = m.prev_index, m.prev_term, m.commit_index
        entries = req.entries
        for e in m.entries:
            if len(e.payload) < SIDECAR_MIN_BYTES or len(sidecars) >= MAX_SIDECARS:
                entries.add(term=e.term, index=e.index, type=int(e.type), payload=e.payload)
            else:
                sidecars.append(e.payload)
                entries.add(term=e.term, index=e.index, type=int(e.type), payload_sidecar=len(sidecars))
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


def decode_message(m: pb.RaftMessagePB, sidecars: Sequence[Buffer] = ()) -> Message:
    """The core message for ``m``, whose large payloads are among ``sidecars``.

    InvalidArgument for a message with no body, a bad entry type or a missing sidecar.
    """
    head = (m.group_id, m.sender, m.recipient, m.term)
    kind = m.WhichOneof("body")
    if kind == "heartbeat":
        h = m.heartbeat
        return Heartbeat(*head, commit_index=h.commit_index, read_seq=h.read_seq, leader_commit=h.leader_commit)
    if kind == "heartbeat_response":
        r = m.heartbeat_response
        return HeartbeatResponse(*head, read_seq=r.read_seq, last_index=r.last_index)
    if kind == "append_request":
        a = m.append_request
        return AppendRequest(
            *head,
            prev_index=a.prev_index,
            prev_term=a.prev_term,
            entries=_entries(a.entries, sidecars),
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


def _entries(entries: Iterable[pb.LogEntryPB], sidecars: Sequence[Buffer]) -> tuple[LogEntry, ...]:
    out = []
    for e in entries:
        try:
            kind = EntryType(e.type)
        except ValueError as exc:
            raise InvalidArgument(f"log entry {e.index} has an unknown type: {exc}") from exc
        where = e.payload_sidecar
        if not where:
            payload = e.payload
        elif e.payload:
            raise InvalidArgument(f"log entry {e.index} has both an inline payload and sidecar {where - 1}")
        elif where > len(sidecars):
            raise InvalidArgument(
                f"log entry {e.index} names payload sidecar {where - 1}, but the call has {len(sidecars)} sidecars"
            )
        else:
            # A copy, not a view: log entries are kept and handed to other threads as bytes.
            payload = bytes(sidecars[where - 1])
        out.append(LogEntry(e.term, e.index, kind, payload))
    return tuple(out)
