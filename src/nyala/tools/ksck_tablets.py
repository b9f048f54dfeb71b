"""ksck's judgement of one tablet from what its replicas and their leader report (pure).

Each replica of the master's view of the tablet gets a health and the reasons for it:

- FAILED: its tablet server is unreachable; the server answers but has no such replica
  (missing); the replica is FAILED, TOMBSTONED or STOPPING; or its leader sees it FAILED (not
  heard from for ``--follower-unavailable-considered-failed-sec``) or FAILED_UNRECOVERABLE
  (it needs a tablet copy);
- RECOVERING: it is being copied (COPYING) or bootstrapping; its leader is still looking for
  the end of its log (health unknown) or it is more than :data:`LAGGING_ENTRIES` entries
  behind the leader's commit index (lagging); or it is a NON_VOTER that will be promoted;
- HEALTHY otherwise.

A replica on a tablet server in maintenance mode also says so (its health does not change).

The tablet, as Kudu's ksck classifies it, the first that applies:

1. UNAVAILABLE: no RUNNING replica leads, or fewer than a majority of the voters are RUNNING;
2. CONSENSUS_MISMATCH: RUNNING replicas name different leaders, or the committed config of
   one differs from the master's;
3. when fewer voters are HEALTHY than the replication factor: RECOVERING if at least as many
   replicas are RECOVERING as are missing (a NON_VOTER being copied or catching up to replace
   a failed voter, a voter bootstrapping after a restart), else UNDER_REPLICATED;
4. UNDER_REPLICATED when some replica is FAILED all the same (an extra one), RECOVERING when
   one is RECOVERING (a NON_VOTER added by a move), HEALTHY otherwise.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Mapping, Sequence

from nyala.client.info import ReplicaInfo, TabletInfo, role_name
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb

__all__ = [
    "LAGGING_ENTRIES",
    "ReplicaCheck",
    "ReplicaHealth",
    "ServerView",
    "TabletCheck",
    "TabletStatus",
    "judge_tablet",
]

#: A follower further behind its leader's commit index than this many entries is lagging.
LAGGING_ENTRIES = 1000


class TabletStatus(enum.IntEnum):
    """Health of a tablet or table, best first (Kudu's ksck categories)."""

    HEALTHY = 0
    RECOVERING = 1
    UNDER_REPLICATED = 2
    CONSENSUS_MISMATCH = 3
    UNAVAILABLE = 4


class ReplicaHealth(enum.StrEnum):
    HEALTHY = "HEALTHY"
    RECOVERING = "RECOVERING"
    FAILED = "FAILED"


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaCheck:
    uuid: str
    address: str
    #: RUNNING, BOOTSTRAPPING, FAILED, ..., or UNREACHABLE / NOT_FOUND when the server could not say.
    state: str
    role: str = "UNKNOWN_ROLE"
    leader_uuid: str = ""
    term: int = 0
    config: tuple[str, ...] = ()
    #: VOTER or NON_VOTER, as the master's committed config says.
    member_type: str = "VOTER"
    health: ReplicaHealth = ReplicaHealth.HEALTHY
    #: Why the replica is not HEALTHY, and notes such as maintenance mode.
    reasons: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class TabletCheck:
    table: str
    tablet_id: str
    status: TabletStatus
    replicas: tuple[ReplicaCheck, ...]
    problems: tuple[str, ...]


@dataclasses.dataclass(slots=True)
class ServerView:
    """What one tablet server said about its replicas (or why it could not be asked)."""

    states: dict[str, tpb.ListTabletsResponsePB.StatusPB]
    consensus: dict[str, cpb.ConsensusStatePB]
    error: str = ""


_RECOVERING_STATES = {
    "COPYING": "copying: a tablet copy is filling it",
    "BOOTSTRAPPING": "bootstrapping: replaying its log",
    "NOT_INITIALIZED": "bootstrapping: not opened yet",
}


def _base(replica: ReplicaInfo, tablet_id: str, views: Mapping[str, ServerView]) -> ReplicaCheck:
    """What the replica's own server says: its state, role and config, and a first health."""
    member_type = "NON_VOTER" if replica.role == "LEARNER" else "VOTER"
    uuid, address = replica.uuid, replica.address
    view = views.get(uuid)
    if view is None or view.error:
        why = f"unreachable: {view.error}" if view is not None else "unreachable"
        return ReplicaCheck(uuid, address, "UNREACHABLE", member_type=member_type,
                            health=ReplicaHealth.FAILED, reasons=(why,))  # fmt: skip
    status = view.states.get(tablet_id)
    if status is None:
        return ReplicaCheck(uuid, address, "NOT_FOUND", member_type=member_type, health=ReplicaHealth.FAILED,
                            reasons=("missing: its tablet server has no such replica",))  # fmt: skip
    state = str(tpb.TabletStatePB.Name(status.state))
    health: ReplicaHealth = ReplicaHealth.HEALTHY
    reasons: tuple[str, ...] = ()
    if state in _RECOVERING_STATES:
        health, reasons = ReplicaHealth.RECOVERING, (_RECOVERING_STATES[state],)
    elif state == "FAILED":
        health, reasons = ReplicaHealth.FAILED, (f"failed: {status.error}" if status.error else "failed",)
    elif state != "RUNNING":
        health, reasons = ReplicaHealth.FAILED, (state.lower(),)
    cstate = view.consensus.get(tablet_id)
    if cstate is None:
        return ReplicaCheck(uuid, address, state, member_type=member_type, health=health, reasons=reasons)
    config = tuple(sorted(p.permanent_uuid for p in cstate.committed_config.peers))
    return ReplicaCheck(uuid, address, state, role_name(cstate.role), cstate.leader_uuid, cstate.current_term,
                        config, member_type, health, reasons)  # fmt: skip


def _leader_view(
    replica: ReplicaCheck, leader: cpb.ConsensusStatePB | None, promote: Mapping[str, bool]
) -> tuple[ReplicaHealth, tuple[str, ...]]:
    """The health of a RUNNING follower as its leader sees it (Kudu's peer health)."""
    if leader is None or replica.role == "LEADER":
        return replica.health, replica.reasons
    peer = next((p for p in leader.peers if p.permanent_uuid == replica.uuid), None)
    if peer is None:  # a leader that reports no peers (or does not track this one) says nothing
        return replica.health, replica.reasons
    if peer.health == cpb.FAILED:
        return ReplicaHealth.FAILED, ("failed: its leader has not heard from it for too long",)
    if peer.health == cpb.FAILED_UNRECOVERABLE:
        return ReplicaHealth.FAILED, ("failed: it needs a tablet copy (its leader no longer has the entries it lacks)",)
    if peer.health == cpb.HEALTH_UNKNOWN:
        return ReplicaHealth.RECOVERING, ("lagging: its leader is still looking for the end of its log",)
    behind = leader.commit_index - peer.match_index
    if behind > LAGGING_ENTRIES:
        return ReplicaHealth.RECOVERING, (f"lagging: {behind} entries behind its leader's commit index",)
    if replica.member_type == "NON_VOTER" and promote.get(replica.uuid, False):
        return ReplicaHealth.RECOVERING, ("catching up: a NON_VOTER to be promoted to VOTER",)
    return replica.health, replica.reasons


def judge_tablet(
    table: str,
    tablet: TabletInfo,
    views: Mapping[str, ServerView],
    *,
    num_replicas: int | None = None,
    in_maintenance: Collection[str] = (),
) -> TabletCheck:
    """The health of one tablet from what its replicas report.

    ``num_replicas`` is the table's replication factor (the number of voters when None);
    ``in_maintenance`` the uuids of tablet servers in maintenance mode."""
    replicas = [_base(r, tablet.tablet_id, views) for r in tablet.replicas]
    running = [r for r in replicas if r.state == "RUNNING"]
    leaders = sorted((r for r in running if r.role == "LEADER"), key=lambda r: r.term, reverse=True)
    leader_state = views[leaders[0].uuid].consensus.get(tablet.tablet_id) if leaders else None
    promote = {p.permanent_uuid: p.attrs.promote for p in leader_state.committed_config.peers} if leader_state else {}
    judged = []
    for r in replicas:
        if r.state == "RUNNING":
            health, reasons = _leader_view(r, leader_state, promote)
            r = dataclasses.replace(r, health=health, reasons=reasons)
        if r.uuid in in_maintenance:
            r = dataclasses.replace(r, reasons=(*r.reasons, "its tablet server is in maintenance mode"))
        judged.append(r)
    status, problems = _classify(judged, leaders, num_replicas)
    where = f"tablet {tablet.tablet_id} of table {table!r}"
    lines = [f"{where}: {line}" for line in problems]
    lines += [
        f"{where}: {r.member_type} replica on {r.address or r.uuid} is {r.health}: {'; '.join(r.reasons)}"
        for r in judged
        if r.health is not ReplicaHealth.HEALTHY
    ]
    return TabletCheck(table, tablet.tablet_id, status, tuple(judged), tuple(lines))


def _classify(
    replicas: Sequence[ReplicaCheck], leaders: Sequence[ReplicaCheck], num_replicas: int | None
) -> tuple[TabletStatus, list[str]]:
    voters = [r for r in replicas if r.member_type == "VOTER"]
    running_voters = sum(r.state == "RUNNING" for r in voters)
    majority = len(voters) // 2 + 1
    if not leaders:
        return TabletStatus.UNAVAILABLE, ["is UNAVAILABLE: no replica leads"]
    if running_voters < majority:
        return TabletStatus.UNAVAILABLE, [
            f"is UNAVAILABLE: {running_voters} of {len(voters)} voters are RUNNING, a majority needs {majority}"
        ]
    running = [r for r in replicas if r.state == "RUNNING"]
    mismatch = []
    named = {r.leader_uuid for r in running if r.leader_uuid}
    if len(leaders) > 1 or len(named) > 1:
        mismatch.append(f"replicas disagree on the leader ({sorted(named | {r.uuid for r in leaders})})")
    expected = tuple(sorted(r.uuid for r in replicas))
    differ = [r.address or r.uuid for r in running if r.config and r.config != expected]
    if differ:
        mismatch.append(f"committed config of {differ} differs from the master's {list(expected)}")
    if mismatch:
        return TabletStatus.CONSENSUS_MISMATCH, [f"is CONSENSUS_MISMATCH: {m}" for m in mismatch]
    factor = num_replicas if num_replicas is not None else len(voters)
    healthy_voters = sum(r.health is ReplicaHealth.HEALTHY for r in voters)
    recovering = sum(r.health is ReplicaHealth.RECOVERING for r in replicas)
    missing = factor - healthy_voters
    if missing > 0:
        counts = f"{healthy_voters} of {factor} voters are HEALTHY"
        if recovering >= missing:
            return TabletStatus.RECOVERING, [f"is RECOVERING: {counts}, {recovering} replicas are recovering"]
        return TabletStatus.UNDER_REPLICATED, [f"is UNDER_REPLICATED: {counts}"]
    if any(r.health is ReplicaHealth.FAILED for r in replicas):
        return TabletStatus.UNDER_REPLICATED, ["is UNDER_REPLICATED: a replica has failed"]
    if recovering:
        return TabletStatus.RECOVERING, [f"is RECOVERING: {recovering} replicas are recovering"]
    return TabletStatus.HEALTHY, []
