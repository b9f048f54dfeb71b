"""Cluster consistency check (Kudu's ksck), first version: gather, then judge.

Gathering asks, in parallel: every configured master ``ConnectToMaster`` (reachable? its role
and the leader it names), the leader master for its tablet servers, tables and every
table's tablet locations, and every tablet server ``ListTablets`` (replica states) and
``GetConsensusState`` (role, leader, term, committed config of each replica).

Judging is pure (:func:`judge_tablet`): a tablet is

- UNAVAILABLE when no replica leads or fewer than a majority of its replicas are RUNNING;
- CONSENSUS_MISMATCH when replicas disagree on the leader, or a replica's committed config
  differs from the master's;
- RECOVERING when a replica is still bootstrapping;
- UNDER_REPLICATED when some replica is unreachable, missing, failed or tombstoned but a
  leader and a majority remain;
- HEALTHY otherwise.

A table is as bad as its worst tablet.  Every finding is also a line in ``problems``; an
empty list means the cluster is healthy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

from nyala.common.errors import NyalaError
from nyala.common.hostport import parse_address
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.services import CONNECT_TO_MASTER, GET_CONSENSUS_STATE, LIST_TABLETS

from .async_client import AsyncClient
from .info import TabletInfo, TabletServerInfo, role_name

__all__ = [
    "KsckReport",
    "MasterCheck",
    "ReplicaCheck",
    "ServerView",
    "TableCheck",
    "TabletCheck",
    "TabletStatus",
    "judge_tablet",
    "ksck",
]


class TabletStatus(enum.IntEnum):
    """Health of a tablet or table, best first (Kudu's ksck categories)."""

    HEALTHY = 0
    RECOVERING = 1
    UNDER_REPLICATED = 2
    CONSENSUS_MISMATCH = 3
    UNAVAILABLE = 4


@dataclasses.dataclass(frozen=True, slots=True)
class MasterCheck:
    address: str
    role: str
    leader_address: str
    cluster_id: str
    error: str = ""


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


@dataclasses.dataclass(frozen=True, slots=True)
class TabletCheck:
    table: str
    tablet_id: str
    status: TabletStatus
    replicas: tuple[ReplicaCheck, ...]
    problems: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class TableCheck:
    name: str
    num_tablets: int
    status: TabletStatus
    counts: dict[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class KsckReport:
    masters: tuple[MasterCheck, ...]
    tservers: tuple[TabletServerInfo, ...]
    tables: tuple[TableCheck, ...]
    tablets: tuple[TabletCheck, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        def convert(value: Any) -> Any:
            if isinstance(value, TabletStatus):
                return value.name
            if isinstance(value, dict):
                return {k: convert(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [convert(v) for v in value]
            return value

        return {"ok": self.ok, **convert(dataclasses.asdict(self))}


# --- gathering ----------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class ServerView:
    """What one tablet server said about its replicas (or why it could not be asked)."""

    states: dict[str, tpb.ListTabletsResponsePB.StatusPB]
    consensus: dict[str, cpb.ConsensusStatePB]
    error: str = ""


async def ksck(client: AsyncClient, *, timeout_s: float = 30.0) -> KsckReport:
    """Check the whole cluster the client is connected to."""
    masters, tservers, summaries = await asyncio.gather(
        _check_masters(client, timeout_s),
        client.list_tablet_servers(timeout_s=timeout_s),
        client.list_table_summaries(timeout_s=timeout_s),
    )
    layouts = await asyncio.gather(*(client.table_tablets(t.name, timeout_s=timeout_s) for t in summaries))
    addresses = {s.uuid: s.rpc_addresses[0] for s in tservers if s.rpc_addresses}
    for tablets in layouts:
        for tablet in tablets:
            addresses.update({r.uuid: r.address for r in tablet.replicas if r.address})
    gathered = await asyncio.gather(*(_view(client, u, a, timeout_s) for u, a in addresses.items()))
    views = dict(zip(addresses, gathered, strict=True))
    problems = _master_problems(masters) + _tserver_problems(tservers, views)
    checks = [
        judge_tablet(summary.name, tablet, views)
        for summary, tablets in zip(summaries, layouts, strict=True)
        for tablet in tablets
    ]
    problems += [p for c in checks for p in c.problems]
    tables = [_table_check(s.name, [c for c in checks if c.table == s.name]) for s in summaries]
    return KsckReport(tuple(masters), tuple(tservers), tuple(tables), tuple(checks), tuple(problems))


async def _check_masters(client: AsyncClient, timeout_s: float) -> list[MasterCheck]:
    messenger = client._ctx.messenger

    async def probe(address: str) -> MasterCheck:
        try:
            response = await messenger.call(
                address, CONNECT_TO_MASTER, mpb.ConnectToMasterRequestPB(), timeout=min(timeout_s, 10.0)
            )
        except NyalaError as exc:
            return MasterCheck(address, "UNREACHABLE", "", "", f"{type(exc).__name__}: {exc}")
        leader = address if response.role == common_pb2.LEADER else response.leader_address
        return MasterCheck(address, role_name(response.role), leader, response.cluster_id)

    return list(await asyncio.gather(*(probe(a) for a in client.master_addresses)))


async def _view(client: AsyncClient, uuid: str, address: str, timeout_s: float) -> ServerView:
    messenger = client._ctx.messenger
    timeout = min(timeout_s, 10.0)
    try:
        listed, consensus = await asyncio.gather(
            messenger.call(address, LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=timeout),
            messenger.call(
                address, GET_CONSENSUS_STATE, cpb.GetConsensusStateRequestPB(dest_uuid=uuid), timeout=timeout
            ),
        )
    except NyalaError as exc:
        return ServerView({}, {}, f"{type(exc).__name__}: {exc}")
    return ServerView({t.tablet_id: t for t in listed.tablets}, {t.tablet_id: t for t in consensus.tablets})


# --- judging ------------------------------------------------------------------------------


def _master_problems(masters: Sequence[MasterCheck]) -> list[str]:
    problems = [f"master {m.address} is unreachable: {m.error}" for m in masters if m.error]
    leaders = [m.address for m in masters if m.role == "LEADER"]
    if len(leaders) != 1:
        problems.append(f"expected one leader master, found {len(leaders)}: {leaders}")
    named = {_normal(m.leader_address) for m in masters if not m.error}
    if len(named) > 1 or "" in named:
        detail = ", ".join(f"{m.address} names {m.leader_address or 'nobody'}" for m in masters if not m.error)
        problems.append(f"masters disagree on the leader: {detail}")
    cluster_ids = {m.cluster_id for m in masters if not m.error}
    if len(cluster_ids) > 1:
        problems.append(f"masters report different cluster ids: {sorted(cluster_ids)}")
    return problems


def _normal(address: str) -> str:
    try:
        return str(parse_address(address)) if address else ""
    except NyalaError:
        return address


def _tserver_problems(tservers: Sequence[TabletServerInfo], views: Mapping[str, ServerView]) -> list[str]:
    problems = []
    for ts in tservers:
        where = ts.rpc_addresses[0] if ts.rpc_addresses else ts.uuid
        if not ts.live:
            since = ts.millis_since_heartbeat
            problems.append(f"tablet server {ts.uuid} ({where}) is not live (last heartbeat {since} ms ago)")
        view = views.get(ts.uuid)
        if view is not None and view.error:
            problems.append(f"tablet server {ts.uuid} ({where}) is unreachable: {view.error}")
    return problems


def _replica(uuid: str, address: str, tablet_id: str, views: Mapping[str, ServerView]) -> ReplicaCheck:
    view = views.get(uuid)
    if view is None or view.error:
        return ReplicaCheck(uuid, address, "UNREACHABLE")
    status = view.states.get(tablet_id)
    if status is None:
        return ReplicaCheck(uuid, address, "NOT_FOUND")
    cstate = view.consensus.get(tablet_id)
    state = str(tpb.TabletStatePB.Name(status.state))
    if cstate is None:
        return ReplicaCheck(uuid, address, state)
    config = tuple(sorted(p.permanent_uuid for p in cstate.committed_config.peers))
    return ReplicaCheck(uuid, address, state, role_name(cstate.role), cstate.leader_uuid, cstate.current_term, config)


def judge_tablet(table: str, tablet: TabletInfo, views: Mapping[str, ServerView]) -> TabletCheck:
    """The health of one tablet from what its replicas report."""
    replicas = tuple(_replica(r.uuid, r.address, tablet.tablet_id, views) for r in tablet.replicas)
    where = f"tablet {tablet.tablet_id} of table {table!r}"
    problems: list[str] = []
    status = TabletStatus.HEALTHY
    running = [r for r in replicas if r.state == "RUNNING"]
    bad = [r for r in replicas if r.state not in ("RUNNING", "BOOTSTRAPPING", "NOT_INITIALIZED")]
    for r in replicas:
        if r.state != "RUNNING":
            problems.append(f"{where}: replica on {r.address or r.uuid} is {r.state}")
    if any(r.state in ("BOOTSTRAPPING", "NOT_INITIALIZED") for r in replicas):
        status = TabletStatus.RECOVERING
    if bad:
        status = max(status, TabletStatus.UNDER_REPLICATED)
    leaders = {r.uuid for r in running if r.role == "LEADER"}
    named = {r.leader_uuid for r in running if r.leader_uuid}
    expected = tuple(sorted(r.uuid for r in tablet.replicas))
    if len(leaders) > 1 or len(named) > 1:
        problems.append(f"{where}: replicas disagree on the leader ({sorted(named)})")
        status = max(status, TabletStatus.CONSENSUS_MISMATCH)
    mismatched = [r for r in running if r.config and r.config != expected]
    if mismatched:
        problems.append(f"{where}: committed config of {[r.address for r in mismatched]} differs from the master's")
        status = max(status, TabletStatus.CONSENSUS_MISMATCH)
    if not leaders or len(running) <= len(replicas) // 2:
        problems.append(f"{where}: no leader with a majority of running replicas ({len(running)}/{len(replicas)})")
        status = TabletStatus.UNAVAILABLE
    return TabletCheck(table, tablet.tablet_id, status, replicas, tuple(problems))


def _table_check(name: str, tablets: Sequence[TabletCheck]) -> TableCheck:
    counts = {s.name: sum(t.status is s for t in tablets) for s in TabletStatus}
    worst = max((t.status for t in tablets), default=TabletStatus.HEALTHY)
    return TableCheck(name, len(tablets), worst, counts)
