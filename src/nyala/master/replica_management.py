"""Re-replication: from a tablet leader's report to one config change (Kudu's 3-4-3 scheme).

Only the tablet's leader knows its members' health, so only a report from a leader with no
pending config is acted on (:func:`decide`).  The decision (:mod:`.quorum`) is one step:

- ``evict``: REMOVE_PEER of a failed, unrecoverable, replaced or excess member;
- ``add``: ADD_PEER of a NON_VOTER with ``promote`` on a server placed by
  ``nyala.placement.place_replacement`` (location- and range-aware, the policy of seed 000
  kept when the topology allows; the members being replaced do not count for their location).
  The leader copies the tablet to it (from a replica in its own location when there is one)
  and promotes it once it has caught up;
- ``step_down``: a leader marked ``replace`` hands leadership over gracefully, so that the
  next leader's report can evict it.

Every change carries the reported committed config's index as CAS, so a decision made from a
stale report fails harmlessly and the next report decides again.  The master remembers only
the latest actionable report per tablet (:class:`Repair`, in the leader's view), so a new
leader master resumes from the full reports it asks every tablet server for.

Tombstones (:func:`stale_replica_cas`): a replica outside the catalog's committed config,
whose own committed config is older than the catalog's, is tombstoned with that index as CAS
(seed 002 appendix A: CAS-protected, and a replica the catalog has no record of is never
touched).  A replica whose config is as new as the catalog's may be a member being added
whose copy holds the config before its addition, so it is left alone, as Kudu does.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable

from nyala.consensus.core import PeerHealth
from nyala.master.quorum import (
    Member,
    eviction_tie_break,
    should_add,
    should_evict,
    should_step_down_for_replacement,
)
from nyala.placement.constraint import PlacementConstraint
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb

__all__ = ["Repair", "RepairKind", "decide", "members", "stale_replica_cas"]

_HEALTH = {
    cpb.HEALTH_UNKNOWN: PeerHealth.UNKNOWN,
    cpb.HEALTHY: PeerHealth.HEALTHY,
    cpb.FAILED: PeerHealth.FAILED,
    cpb.FAILED_UNRECOVERABLE: PeerHealth.FAILED_UNRECOVERABLE,
}


class RepairKind(enum.Enum):
    EVICT = "evict"
    ADD = "add"
    STEP_DOWN = "step_down"


@dataclasses.dataclass(frozen=True)
class Repair:
    """One config change the master owes a tablet, decided from its leader's report."""

    kind: RepairKind
    tablet_id: str
    leader: str
    cas_config_index: int
    members: tuple[Member, ...]
    #: EVICT: the member to remove.  ADD: "" (the server is placed when the change is sent).
    target: str = ""

    @property
    def leaving(self) -> tuple[str, ...]:
        """Voters the change replaces (failed or marked ``replace``): they do not count for placement."""
        return tuple(m.uuid for m in self.members if m.voter and (m.failed or m.replace))


def members(cstate: cpb.ConsensusStatePB) -> list[Member]:
    """The committed config with the health the leader reports (the leader itself is healthy)."""
    health = {p.permanent_uuid: _HEALTH.get(p.health, PeerHealth.UNKNOWN) for p in cstate.peers}
    result = []
    for peer in cstate.committed_config.peers:
        uuid = peer.permanent_uuid
        state = PeerHealth.HEALTHY if uuid == cstate.leader_uuid else health.get(uuid, PeerHealth.UNKNOWN)
        result.append(
            Member(
                uuid,
                peer.member_type == consensus_pb2.VOTER,
                state,
                promote=peer.attrs.promote,
                replace=peer.attrs.replace,
            )
        )
    return result


def decide(
    reporter: str,
    state: int,
    cstate: cpb.ConsensusStatePB,
    replication_factor: int,
    *,
    in_maintenance: frozenset[str] = frozenset(),
    location_of: Callable[[str], str] = lambda _uuid: "",
    constraint: PlacementConstraint | None = None,
) -> Repair | None:
    """The step a report from ``reporter`` calls for, or None (not a running leader with a
    committed config and no pending one, or nothing to do)."""
    leads = cstate.role == common_pb2.LEADER and cstate.leader_uuid == reporter
    if not leads or state != tpb.RUNNING or cstate.HasField("pending_config") or not cstate.committed_config.peers:
        return None
    config = tuple(members(cstate))
    cas = cstate.committed_config.opid_index
    tie_break = eviction_tie_break(location_of, config, constraint)
    victim = should_evict(config, reporter, replication_factor, tie_break)
    if victim is not None:
        return Repair(RepairKind.EVICT, cstate.tablet_id, reporter, cas, config, victim)
    if should_add(config, replication_factor, in_maintenance):
        return Repair(RepairKind.ADD, cstate.tablet_id, reporter, cas, config)
    if should_step_down_for_replacement(config, reporter, replication_factor):
        return Repair(RepairKind.STEP_DOWN, cstate.tablet_id, reporter, cas, config, reporter)
    return None


def stale_replica_cas(
    reporter: str, state: int, reported: consensus_pb2.RaftConfigPB | None, catalog: consensus_pb2.RaftConfigPB
) -> int | None:
    """The CAS index to tombstone a reported replica with, or None to leave it alone."""
    if state in (tpb.TOMBSTONED, tpb.COPYING) or not catalog.peers:
        return None
    if any(p.permanent_uuid == reporter for p in catalog.peers):
        return None
    reported_index = reported.opid_index if reported is not None and reported.peers else -1
    return catalog.opid_index if reported_index < catalog.opid_index else None
