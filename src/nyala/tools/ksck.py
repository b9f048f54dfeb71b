"""Cluster consistency check (Kudu's ksck): gather, then judge.

Gathering asks, in parallel: every configured master ``ConnectToMaster`` (reachable? its role
and the leader it names), the leader master for its tablet servers, tables and every
table's tablet locations, and every tablet server ``ListTablets`` (replica states) and
``GetConsensusState`` (role, leader, term, committed config of each replica).

Judging is pure (:func:`~nyala.tools.ksck_tablets.judge_tablet`): each replica gets a
health (HEALTHY, RECOVERING, FAILED) with its reasons, and each tablet Kudu's category
(HEALTHY, RECOVERING, UNDER_REPLICATED, CONSENSUS_MISMATCH, UNAVAILABLE); the rules are in
:mod:`nyala.tools.ksck_tablets`.  A table is as bad as its worst tablet.  Every finding is
also a line in ``problems``.  ``tables`` limits the check to the named tables (an unknown
name is InvalidArgument, before anything is asked of a tablet server).

With ``checksum_scan``, every replica of every checked tablet also checksums its rows at the
same Raft index and the replicas that differ are problems
(:mod:`nyala.tools.ksck_checksum`).

Locations (seed 000; Kudu's ksck only lists them): each tablet server's location, a summary
per location (servers, live servers, replicas, round trip), and ``warnings`` for

- every tablet whose replicas violate the placement policy (:func:`judge_placement`, using
  ``nyala.placement.check_tablet``: the locations with a live server, the replicas on live
  servers, the same rule as the master's), naming the
  table, the tablet and the replica count per location;
- every table whose own placement policy (docs/placement.md) cannot be met (too few live
  tablet servers in its subtrees: its tablets stay under-replicated rather than leave them),
  and every tablet that violates its table's or range's policy: replicas outside the subtrees,
  a majority in one location one level below them, or a leader outside the leader location
  (:func:`judge_constraint`; live servers count, as for the master);
- every location whose servers are unreachable or lose pings, or whose round trip is much
  slower than the other locations' (:func:`judge_locations`).  The round trip of a server is
  the fastest of ``PINGS`` Ping calls (the least noisy estimate on a busy machine); a
  location's is the median of its servers'.  "Much slower" means more than ``SLOW_FACTOR``
  times the median of the other locations and at least ``SLOW_MIN_MS`` more, so loopback
  jitter is not a warning.

The cluster is healthy (``ok``) when there is neither a problem nor a warning.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nyala.client.async_client import AsyncClient
from nyala.client.info import TableSummary, TabletInfo, TabletServerInfo, role_name
from nyala.client.table import AsyncTable
from nyala.common.hostport import parse_address
from nyala.errors import InvalidArgument, NyalaError
from nyala.placement import PlacementConstraint, Verdict, check_constraint, check_tablet
from nyala.proto import common_pb2, rpc_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.services import CONNECT_TO_MASTER, GET_CONSENSUS_STATE, LIST_TABLETS, PING
from nyala.tools.ksck_checksum import ReplicaChecksum, TabletChecksum, checksum_tablets, judge_checksums
from nyala.tools.ksck_tablets import ReplicaCheck, ReplicaHealth, ServerView, TabletCheck, TabletStatus, judge_tablet

__all__ = [
    "KsckReport",
    "LocationCheck",
    "MasterCheck",
    "PingResult",
    "ReplicaCheck",
    "ReplicaChecksum",
    "ReplicaHealth",
    "ServerView",
    "TableCheck",
    "TabletCheck",
    "TabletChecksum",
    "TabletStatus",
    "judge_locations",
    "judge_placement",
    "judge_tablet",
    "ksck",
    "select_tables",
]

#: Pings per tablet server; its round trip is the fastest.
PINGS = 3
#: A location is slow when its round trip exceeds the others' median this many times ...
SLOW_FACTOR = 5.0
#: ... and by at least this much.
SLOW_MIN_MS = 20.0
#: How ksck shows a tablet server without a location.
NO_LOCATION = "<none>"


@dataclasses.dataclass(frozen=True, slots=True)
class MasterCheck:
    address: str
    role: str
    leader_address: str
    cluster_id: str
    error: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class TableCheck:
    name: str
    num_tablets: int
    status: TabletStatus
    counts: dict[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class PingResult:
    """Round trips to one tablet server: the fastest, in milliseconds, and how many pings failed."""

    rtt_ms: float | None
    failed: int
    error: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class LocationCheck:
    """One location: its servers, their replicas and round trip (None when no server answered)."""

    location: str
    tservers: int
    live_tservers: int
    replicas: int
    rtt_ms: float | None
    unreachable: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class KsckReport:
    masters: tuple[MasterCheck, ...]
    tservers: tuple[TabletServerInfo, ...]
    tables: tuple[TableCheck, ...]
    tablets: tuple[TabletCheck, ...]
    problems: tuple[str, ...]
    locations: tuple[LocationCheck, ...] = ()
    #: Round trip of each tablet server (uuid -> ms; None when unreachable).
    rtt_ms: dict[str, float | None] = dataclasses.field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: With a checksum scan: the checksums of every checked tablet's replicas.
    checksums: tuple[TabletChecksum, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems and not self.warnings

    def as_dict(self) -> dict[str, Any]:
        def convert(value: Any) -> Any:
            if isinstance(value, enum.Enum):
                return value.name
            if isinstance(value, dict):
                return {k: convert(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [convert(v) for v in value]
            return value

        out: dict[str, Any] = {"ok": self.ok, **convert(dataclasses.asdict(self))}
        for entry, checksum in zip(out["checksums"], self.checksums, strict=True):
            entry["result"] = checksum.result
        return out


# --- gathering ----------------------------------------------------------------------------


async def ksck(
    client: AsyncClient,
    *,
    timeout_s: float = 30.0,
    tables: Sequence[str] | None = None,
    checksum_scan: bool = False,
) -> KsckReport:
    """Check the cluster the client is connected to: every table, or the ``tables`` named.

    Replicas on tablet servers in maintenance mode (as the leader master lists them) say so.
    """
    masters, tservers, every_table = await asyncio.gather(
        _check_masters(client, timeout_s),
        client.list_tablet_servers(timeout_s=timeout_s),
        client.list_table_summaries(timeout_s=timeout_s),
    )
    summaries = select_tables(every_table, tables)
    layouts, opened = await asyncio.gather(
        asyncio.gather(*(client.table_tablets(t.name, timeout_s=timeout_s) for t in summaries)),
        asyncio.gather(*(client.open_table(t.name, timeout_s=timeout_s) for t in summaries)),
    )
    in_maintenance = frozenset(s.uuid for s in tservers if s.maintenance)
    addresses = {s.uuid: s.rpc_addresses[0] for s in tservers if s.rpc_addresses}
    for tablets in layouts:
        for tablet in tablets:
            addresses.update({r.uuid: r.address for r in tablet.replicas if r.address})
    gathered, pings = await asyncio.gather(
        asyncio.gather(*(_view(client, u, a, timeout_s) for u, a in addresses.items())),
        asyncio.gather(*(_ping(client, a, timeout_s) for a in addresses.values())),
    )
    views = dict(zip(addresses, gathered, strict=True))
    rtts = dict(zip(addresses, pings, strict=True))
    problems = _master_problems(masters) + _tserver_problems(tservers, views)
    checks = [
        judge_tablet(summary.name, tablet, views, num_replicas=summary.num_replicas, in_maintenance=in_maintenance)
        for summary, tablets in zip(summaries, layouts, strict=True)
        for tablet in tablets
    ]
    problems += [p for c in checks for p in c.problems]
    checksums: list[TabletChecksum] = []
    if checksum_scan:
        targets = [
            (summary.name, tablet, _leader_of(check))
            for summary, tablets in zip(summaries, layouts, strict=True)
            for tablet, check in zip(tablets, [c for c in checks if c.table == summary.name], strict=True)
        ]
        checksums = await checksum_tablets(client, targets, timeout_s=timeout_s)
        problems += judge_checksums(checksums)
    table_checks = [_table_check(s.name, [c for c in checks if c.table == s.name]) for s in summaries]
    location_of = {s.uuid: s.location or NO_LOCATION for s in tservers}
    placement_of = {s.uuid: (s.location or NO_LOCATION, s.live) for s in tservers}
    live_per_location = _count(s.location or NO_LOCATION for s in tservers if s.live)
    warnings: list[str] = []
    for summary, tablets, table in zip(summaries, layouts, opened, strict=True):
        constraints = table_constraints(table)
        unmet: set[PlacementConstraint] = set()
        for tablet in tablets:
            constraint = constraints.get(tablet.range_start, constraints.get(None))
            if constraint is None or not constraint.strict:
                w = judge_placement(summary.name, summary.num_replicas, tablet, placement_of)
                if w:
                    warnings.append(w)
            if constraint is not None:
                w = judge_constraint(
                    summary.name, summary.num_replicas, tablet, constraint, location_of, live_per_location, unmet
                )
                if w:
                    warnings.append(w)
    locations = _location_checks(tservers, layouts, rtts)
    warnings += judge_locations(locations, tservers, rtts)
    return KsckReport(
        tuple(masters),
        tuple(tservers),
        tuple(table_checks),
        tuple(checks),
        tuple(problems),
        tuple(locations),
        {u: p.rtt_ms for u, p in rtts.items()},
        tuple(warnings),
        tuple(checksums),
    )


def select_tables(summaries: Sequence[TableSummary], names: Sequence[str] | None) -> list[TableSummary]:
    """The tables to work on: all, or the named ones (InvalidArgument naming any unknown one)."""
    if names is None:
        return list(summaries)
    wanted = list(dict.fromkeys(n.strip() for n in names))
    if not wanted or "" in wanted:
        raise InvalidArgument(f"--tables needs table names separated by commas, got {','.join(names)!r}")
    known = {s.name for s in summaries}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise InvalidArgument(f"no such tables: {unknown} (the cluster has {sorted(known)})")
    return [s for s in summaries if s.name in wanted]


def _leader_of(check: TabletCheck) -> str:
    """The uuid of the RUNNING replica that leads (the latest term's), or "" when none does."""
    leaders = [r for r in check.replicas if r.state == "RUNNING" and r.role == "LEADER"]
    return max(leaders, key=lambda r: r.term).uuid if leaders else ""


def _count(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


async def _ping(client: AsyncClient, address: str, timeout_s: float) -> PingResult:
    """The fastest of ``PINGS`` round trips to ``address`` (sequential, so they do not queue)."""
    messenger = client.messenger
    loop = asyncio.get_running_loop()
    best: float | None = None
    failed, error = 0, ""
    for _ in range(PINGS):
        started = loop.time()
        try:
            await messenger.call(address, PING, rpc_pb2.PingRequest(), timeout=min(timeout_s, 5.0))
        except NyalaError as exc:
            failed, error = failed + 1, f"{type(exc).__name__}: {exc}"
            continue
        elapsed_ms = (loop.time() - started) * 1000
        best = elapsed_ms if best is None else min(best, elapsed_ms)
    return PingResult(best, failed, error)


async def _check_masters(client: AsyncClient, timeout_s: float) -> list[MasterCheck]:
    messenger = client.messenger

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
    messenger = client.messenger
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


def _table_check(name: str, tablets: Sequence[TabletCheck]) -> TableCheck:
    counts = {s.name: sum(t.status is s for t in tablets) for s in TabletStatus}
    worst = max((t.status for t in tablets), default=TabletStatus.HEALTHY)
    return TableCheck(name, len(tablets), worst, counts)


# --- locations ----------------------------------------------------------------------------


def judge_placement(
    table: str,
    num_replicas: int,
    tablet: TabletInfo,
    placement_of: Mapping[str, tuple[str, bool]],
) -> str | None:
    """A warning when the tablet's replicas violate the placement policy, else None.

    ``placement_of`` maps each registered tablet server to its (location, live).  Which
    locations and replicas count is :func:`nyala.placement.check_tablet`'s rule, the one the
    master applies too: only locations with a live server, only replicas on live servers.
    """
    check = check_tablet(num_replicas, (r.uuid for r in tablet.replicas), placement_of)
    if check.verdict is Verdict.MET:
        return None
    return f"tablet {tablet.tablet_id} of table {table!r} {check.explain()}"


def table_constraints(table: AsyncTable) -> dict[bytes | None, PlacementConstraint]:
    """A table's own placement policy (key None) and its ranges' (by range start)."""
    out: dict[bytes | None, PlacementConstraint] = {}
    if not table.placement.empty:
        out[None] = PlacementConstraint.of(table.placement.locations, table.placement.leader_location)
    for item in table.range_placements:
        out[item.lower] = PlacementConstraint.of(item.policy.locations, item.policy.leader_location)
    return out


def judge_constraint(
    table: str,
    num_replicas: int,
    tablet: TabletInfo,
    constraint: PlacementConstraint,
    location_of: Mapping[str, str],
    live_per_location: Mapping[str, int],
    unmet: set[PlacementConstraint],
) -> str | None:
    """A warning when the tablet's layout breaks its table's (or range's) own policy, else None.

    A policy that cannot be met is said once per table and policy (``unmet`` remembers), with
    the reason its tablets stay under-replicated.
    """
    leader = next((r.uuid for r in tablet.replicas if r.role == "LEADER"), "")
    check = check_constraint(
        constraint,
        num_replicas,
        [location_of[r.uuid] for r in tablet.replicas if r.uuid in location_of],
        live_per_location,
        location_of.get(leader) if leader else None,
    )
    if not check.satisfiable and constraint.strict:
        if constraint in unmet:
            return None
        unmet.add(constraint)
        return f"table {table!r}: placement policy ({constraint.describe()}): {check.explain(constraint)}"
    if check.met or (not constraint.strict and not check.leader_misplaced):
        return None  # without subtrees, the cluster-wide rule is judge_placement's to report
    why = check.explain(constraint) if constraint.strict else f"leader outside {constraint.leader_location}"
    return f"tablet {tablet.tablet_id} of table {table!r} breaks its placement policy: {why}"


def _location_checks(
    tservers: Sequence[TabletServerInfo], layouts: Sequence[Sequence[TabletInfo]], rtts: Mapping[str, PingResult]
) -> list[LocationCheck]:
    location_of = {s.uuid: s.location or NO_LOCATION for s in tservers}
    replicas = _count(location_of[r.uuid] for ts in layouts for t in ts for r in t.replicas if r.uuid in location_of)
    out = []
    for location in sorted(set(location_of.values())):
        members = [s for s in tservers if location_of[s.uuid] == location]
        answered = [p.rtt_ms for s in members if (p := rtts.get(s.uuid)) is not None and p.rtt_ms is not None]
        unreachable = tuple(
            s.rpc_addresses[0] if s.rpc_addresses else s.uuid
            for s in members
            if (p := rtts.get(s.uuid)) is None or p.rtt_ms is None
        )
        out.append(
            LocationCheck(
                location,
                len(members),
                sum(s.live for s in members),
                replicas.get(location, 0),
                statistics.median(answered) if answered else None,
                unreachable,
            )
        )
    return out


def judge_locations(
    locations: Sequence[LocationCheck], tservers: Sequence[TabletServerInfo], rtts: Mapping[str, PingResult]
) -> list[str]:
    """Warnings about locations whose servers are unreachable, lose pings, or answer much slower."""
    warnings = []
    for loc in locations:
        if loc.unreachable:
            which = "all" if len(loc.unreachable) == loc.tservers else f"{len(loc.unreachable)} of"
            warnings.append(
                f"location {loc.location}: {which} {loc.tservers} tablet servers unreachable "
                f"({', '.join(loc.unreachable)})"
            )
        lossy = [
            f"{s.rpc_addresses[0] if s.rpc_addresses else s.uuid} lost {p.failed} of {PINGS} pings ({p.error})"
            for s in tservers
            if (s.location or NO_LOCATION) == loc.location
            and (p := rtts.get(s.uuid)) is not None
            and p.rtt_ms is not None
            and p.failed
        ]
        if lossy:
            warnings.append(f"location {loc.location}: unreliable connection: {'; '.join(lossy)}")
    for loc in locations:
        others = [o.rtt_ms for o in locations if o is not loc and o.rtt_ms is not None]
        if loc.rtt_ms is None or not others:
            continue
        typical = statistics.median(others)
        if loc.rtt_ms > SLOW_FACTOR * typical and loc.rtt_ms - typical >= SLOW_MIN_MS:
            warnings.append(
                f"location {loc.location}: round trip {loc.rtt_ms:.1f} ms, much slower than the other "
                f"locations ({typical:.1f} ms)"
            )
    return warnings
