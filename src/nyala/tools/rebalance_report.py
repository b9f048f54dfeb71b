"""What ``nyala cluster rebalance`` shows: the replica distribution, its skew, and the plan.

Pure: computed from a :class:`~nyala.tools.rebalancer.Snapshot`, the planner's
:class:`~nyala.tools.rebalancer.Model` and :class:`~nyala.placement.Plan`.  Counts are of the
replicas of the selected tables on the servers that take part (as the planner sees them);
left-out servers are listed with their replicas and the reason.

- per server: location, state, replicas;
- per location: servers, replicas, load (replicas per server) and skew (most minus fewest
  replicas on one of its servers);
- per table: tablets, replication factor, the table's skew across locations (highest minus
  lowest load of the table among locations), its worst skew within one location (most minus
  fewest of its replicas on one server of a location), and how many of its tablets violate
  the placement policy;
- the plan: each move with its phase, and the tablets whose violation no layout can fix;
- with details, each table's replicas per server and each violating tablet's count per location.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from nyala.placement import Plan, PolicyCheck, TabletInfo, Verdict, check_constraint, check_placement
from nyala.tools.rebalancer import Model, Snapshot

__all__ = ["distribution_report", "table_skews"]


def table_skews(model: Model) -> dict[str, tuple[float, int]]:
    """Per table id: (skew across locations, worst skew within a location)."""
    info = model.info
    servers_of: dict[str, list[str]] = defaultdict(list)
    for uuid, location in info.tservers.items():
        if uuid not in info.draining:
            servers_of[location].append(uuid)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for tablet in info.tablets:
        counts[tablet.table_id].update(tablet.replicas)
    out: dict[str, tuple[float, int]] = {}
    for table_id, per_server in counts.items():
        loads = [sum(per_server[u] for u in uuids) / len(uuids) for uuids in servers_of.values()]
        across = max(loads) - min(loads) if loads else 0.0
        within = max(
            (max(per_server[u] for u in us) - min(per_server[u] for u in us) for us in servers_of.values()), default=0
        )
        out[table_id] = (round(across, 2), within)
    return out


def distribution_report(snapshot: Snapshot, model: Model, plan: Plan, *, details: bool = False) -> dict[str, Any]:
    """Everything ``--report-only`` prints, as plain values (the JSON output as is)."""
    info = model.info
    total: Counter[str] = Counter()
    held: Counter[str] = Counter()
    for tablet in info.tablets:
        total.update(tablet.replicas)
    for view in snapshot.tablets:
        held.update(view.members)
    servers = []
    for server in sorted(snapshot.tservers, key=lambda s: (s.location, s.rpc_addresses)):
        if server.uuid in info.draining:
            state = "draining"
        elif server.uuid in model.left_out:
            state = f"left out: {model.left_out[server.uuid]}"
        else:
            state = "balanced"
        servers.append(
            {
                "uuid": server.uuid,
                "address": server.rpc_addresses[0] if server.rpc_addresses else "",
                "location": info.tservers.get(server.uuid, server.location),
                "state": state,
                "replicas": total[server.uuid] if server.uuid in info.tservers else held[server.uuid],
            }
        )
    by_location: dict[str, list[str]] = defaultdict(list)
    for uuid, location in info.tservers.items():
        if uuid not in info.draining:
            by_location[location].append(uuid)
    locations = [
        {
            "location": location,
            "tservers": len(uuids),
            "replicas": sum(total[u] for u in uuids),
            "load": round(sum(total[u] for u in uuids) / len(uuids), 2),
            "skew": max(total[u] for u in uuids) - min(total[u] for u in uuids),
        }
        for location, uuids in sorted(by_location.items())
    ]
    servers_per_location = {loc: len(uuids) for loc, uuids in by_location.items()}
    location_of = info.tservers
    violations: list[tuple[TabletInfo, PolicyCheck, tuple[str, ...]]] = []
    for tablet in info.tablets:
        staying = [location_of[u] for u in tablet.replicas if u not in info.draining]
        if tablet.constraint is not None and tablet.constraint.strict:
            # The table's own policy: its subtrees, and the rule one level below them.
            own = check_constraint(tablet.constraint, tablet.replication_factor, staying, servers_per_location)
            if own.outside or not own.policy.met:
                violations.append((tablet, own.policy, own.outside))
            continue
        check = check_placement(tablet.replication_factor, Counter(staying), servers_per_location)
        if not check.met:
            violations.append((tablet, check, ()))
    table_name = {t.id: t.name for t in snapshot.tables}
    skews = table_skews(model)
    violating = Counter(tablet.table_id for tablet, _, _ in violations)
    tables = [
        {
            "table": summary.name,
            "tablets": sum(1 for t in info.tablets if t.table_id == summary.id),
            "rf": summary.num_replicas,
            "location_skew": skews.get(summary.id, (0.0, 0))[0],
            "server_skew": skews.get(summary.id, (0.0, 0))[1],
            "violations": violating[summary.id],
        }
        for summary in snapshot.tables
    ]
    tablet_table = {t.tablet_id: t.table for t in snapshot.tablets}
    moves = [
        {
            "tablet": m.tablet_id,
            "table": tablet_table.get(m.tablet_id, ""),
            "from": snapshot.address_of(m.from_uuid),
            "from_location": location_of.get(m.from_uuid, ""),
            "to": snapshot.address_of(m.to_uuid),
            "to_location": location_of.get(m.to_uuid, ""),
            "phase": m.phase,
        }
        for m in plan.moves
    ]
    report: dict[str, Any] = {
        "tservers": servers,
        "locations": locations,
        "tables": tables,
        "moves": moves,
        "unfixable": [{"tablet": t, "table": tablet_table.get(t, "")} for t in plan.unfixable],
    }
    if details:
        per_server: dict[str, Counter[str]] = defaultdict(Counter)
        for tablet in info.tablets:
            per_server[tablet.table_id].update(tablet.replicas)
        report["replicas_per_server"] = [
            {
                "table": table_name.get(table_id, table_id),
                "uuid": uuid,
                "address": snapshot.address_of(uuid),
                "location": location_of[uuid],
                "replicas": counts[uuid],
            }
            for table_id, counts in sorted(per_server.items(), key=lambda item: table_name.get(item[0], item[0]))
            for uuid in sorted(location_of, key=lambda u: (location_of[u], snapshot.address_of(u)))
            if uuid not in info.draining
        ]
        report["violations"] = [
            {
                "tablet": tablet.tablet_id,
                "table": table_name.get(tablet.table_id, tablet.table_id),
                "replicas_per_location": dict(check.replicas_per_location),
                "limit": check.limit,
                "fixable": check.verdict is not Verdict.UNSATISFIABLE
                and not (outside and tablet.tablet_id in plan.unfixable),
                "outside_its_locations": list(outside),
            }
            for tablet, check, outside in violations
        ]
    return report
