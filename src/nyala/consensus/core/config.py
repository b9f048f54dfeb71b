"""Raft configurations: members, quorum arithmetic, change validation and the byte encoding.

A config is an ordered tuple of members, each a VOTER or a NON_VOTER with Kudu's attributes
``promote`` and ``replace``.  Only voters vote, count toward a majority and campaign.  The
``opid_index`` is the index of the CHANGE_CONFIG entry that carries the config (0 for an
initial config that was never in a log); compare-and-set requests name it.

:func:`apply_changes` enforces seed 003's one-by-one rule: at most one voter is added, removed,
promoted or demoted per change, so the old and new majorities always overlap.  The encoding is
``RaftConfigPB`` from ``proto/nyala/consensus.proto``, so the runtime, the WAL dump tool and
the consensus metadata file read the same bytes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from google.protobuf.message import DecodeError

from nyala.errors import AlreadyPresent, Corruption, InvalidArgument, NotFound
from nyala.proto import consensus_pb2

__all__ = [
    "ChangeKind",
    "ConfigChange",
    "Member",
    "MemberType",
    "RaftConfig",
    "apply_changes",
    "decode_config",
    "encode_config",
]


class MemberType(enum.IntEnum):
    """Kudu's member types (consensus/metadata.proto)."""

    NON_VOTER = 0
    VOTER = 1


@dataclass(frozen=True, slots=True)
class Member:
    """One replica in a config."""

    peer_id: str
    member_type: MemberType
    promote: bool = False
    replace: bool = False

    @property
    def is_voter(self) -> bool:
        return self.member_type is MemberType.VOTER


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """An immutable Raft config with lookups precomputed (it is consulted on every message)."""

    members: tuple[Member, ...]
    opid_index: int = 0
    unsafe_config_change: bool = False
    voters: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _by_id: dict[str, Member] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id: dict[str, Member] = {}
        for member in self.members:
            if not member.peer_id:
                raise InvalidArgument("a config member has an empty peer id")
            if member.peer_id in by_id:
                raise InvalidArgument(f"peer {member.peer_id!r} appears twice in the config")
            by_id[member.peer_id] = member
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "voters", tuple(m.peer_id for m in self.members if m.is_voter))

    @classmethod
    def of_voters(cls, peer_ids: Iterable[str], opid_index: int = 0) -> RaftConfig:
        """A config whose members are all voters, in the given order."""
        return cls(tuple(Member(p, MemberType.VOTER) for p in peer_ids), opid_index)

    @property
    def peer_ids(self) -> tuple[str, ...]:
        return tuple(m.peer_id for m in self.members)

    @property
    def majority(self) -> int:
        """Votes or acknowledgements needed: more than half of the voters."""
        return len(self.voters) // 2 + 1

    def member(self, peer_id: str) -> Member | None:
        return self._by_id.get(peer_id)

    def contains(self, peer_id: str) -> bool:
        return peer_id in self._by_id

    def is_voter(self, peer_id: str) -> bool:
        member = self._by_id.get(peer_id)
        return member is not None and member.member_type is MemberType.VOTER

    def with_opid_index(self, opid_index: int) -> RaftConfig:
        return replace(self, opid_index=opid_index)


_PB_MEMBER_TYPES = {
    MemberType.NON_VOTER: consensus_pb2.NON_VOTER,
    MemberType.VOTER: consensus_pb2.VOTER,
}


class ChangeKind(enum.IntEnum):
    """Kudu's ChangeConfigType values."""

    ADD_PEER = 1
    REMOVE_PEER = 2
    MODIFY_PEER = 3


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One step of a config change.  ``None`` attributes of MODIFY_PEER keep their value."""

    kind: ChangeKind
    peer_id: str
    member_type: MemberType | None = None
    promote: bool | None = None
    replace: bool | None = None


def apply_changes(config: RaftConfig, changes: Sequence[ConfigChange]) -> RaftConfig:
    """The config that results from ``changes``, or an error naming the first bad change.

    The result keeps ``config``'s opid_index; the caller sets the index of the entry that
    will carry it.
    """
    if not changes:
        raise InvalidArgument("a config change needs at least one change")
    touched = [c.peer_id for c in changes]
    if len(set(touched)) != len(touched):
        raise InvalidArgument(f"a config change names a peer more than once: {touched}")
    members = {m.peer_id: m for m in config.members}
    voter_changes = 0
    for change in changes:
        before = members.get(change.peer_id)
        after = _changed_member(before, change)
        if after == before:
            raise InvalidArgument(f"{change.kind.name} of {change.peer_id!r} changes nothing")
        if (before is not None and before.is_voter) != (after is not None and after.is_voter):
            voter_changes += 1
        if after is None:
            del members[change.peer_id]
        else:
            members[change.peer_id] = after
    if voter_changes > 1:
        raise InvalidArgument(
            "at most one voter may be added, removed, promoted or demoted per config change "
            f"(this change touches {voter_changes})"
        )
    result = RaftConfig(tuple(members.values()), config.opid_index)
    if not result.voters:
        raise InvalidArgument("a config must keep at least one voter")
    return result


def _changed_member(before: Member | None, change: ConfigChange) -> Member | None:
    if change.kind is ChangeKind.ADD_PEER:
        if before is not None:
            raise AlreadyPresent(f"peer {change.peer_id!r} is already in the config")
        if change.member_type is None:
            raise InvalidArgument(f"ADD_PEER of {change.peer_id!r} must give a member type")
        return Member(change.peer_id, change.member_type, bool(change.promote), bool(change.replace))
    if before is None:
        raise NotFound(f"peer {change.peer_id!r} is not in the config")
    if change.kind is ChangeKind.REMOVE_PEER:
        return None
    return Member(
        before.peer_id,
        before.member_type if change.member_type is None else change.member_type,
        before.promote if change.promote is None else change.promote,
        before.replace if change.replace is None else change.replace,
    )


def encode_config(config: RaftConfig) -> bytes:
    """``config`` as RaftConfigPB bytes (the payload of a CHANGE_CONFIG entry)."""
    pb = consensus_pb2.RaftConfigPB(opid_index=config.opid_index, unsafe_config_change=config.unsafe_config_change)
    for m in config.members:
        peer = pb.peers.add(permanent_uuid=m.peer_id, member_type=_PB_MEMBER_TYPES[m.member_type])
        peer.attrs.promote = m.promote
        peer.attrs.replace = m.replace
    return pb.SerializeToString(deterministic=True)


def decode_config(data: bytes) -> RaftConfig:
    """Parse RaftConfigPB bytes; damaged bytes raise :class:`Corruption`."""
    pb = consensus_pb2.RaftConfigPB()
    try:
        pb.ParseFromString(data)
        members = tuple(
            Member(p.permanent_uuid, MemberType(p.member_type), p.attrs.promote, p.attrs.replace) for p in pb.peers
        )
        return RaftConfig(members, pb.opid_index, pb.unsafe_config_change)
    except (DecodeError, ValueError, InvalidArgument) as exc:  # ValueError: an unknown member type
        raise Corruption(f"undecodable Raft config ({len(data)} bytes): {exc}") from exc
