"""What tablet servers last reported about each replica (the leader master's memory only).

Seed 002 (KUDU-1353) warns against a per-tablet replica cache that a new leader starts
without: here the replica SET always comes from the catalog (each tablet's committed Raft
config), and this view only adds what reports say on top: each replica's state, role, term and
schema version, and so the current leader.  A new leader starts empty and asks every tablet
server for a full report on its first heartbeat, which fills it within one heartbeat
interval; until then the catalog's last persisted leader is the hint.
"""

from __future__ import annotations

import dataclasses

from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb

__all__ = ["ReplicaReport", "ReplicaView"]


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaReport:
    """The latest report of one replica by its tablet server."""

    state: int  # tserver.TabletStatePB
    role: int  # RaftRolePB
    term: int
    leader_uuid: str
    schema_version: int
    error: str = ""

    @classmethod
    def of(cls, reported: mpb.ReportedTabletPB) -> ReplicaReport:
        cs = reported.consensus_state
        return cls(reported.state, cs.role, cs.current_term, cs.leader_uuid, reported.schema_version, reported.error)

    @property
    def tombstoned(self) -> bool:
        return self.state == tpb.TOMBSTONED


class ReplicaView:
    """Reports by tablet and by tablet server."""

    def __init__(self) -> None:
        self._by_tablet: dict[str, dict[str, ReplicaReport]] = {}
        self._by_server: dict[str, set[str]] = {}

    def record(self, server_uuid: str, tablet_id: str, report: ReplicaReport) -> None:
        self._by_tablet.setdefault(tablet_id, {})[server_uuid] = report
        self._by_server.setdefault(server_uuid, set()).add(tablet_id)

    def forget(self, server_uuid: str, tablet_id: str) -> None:
        reports = self._by_tablet.get(tablet_id)
        if reports is not None:
            reports.pop(server_uuid, None)
            if not reports:
                del self._by_tablet[tablet_id]
        tablets = self._by_server.get(server_uuid)
        if tablets is not None:
            tablets.discard(tablet_id)

    def forget_tablet(self, tablet_id: str) -> None:
        for server_uuid in list(self._by_tablet.get(tablet_id, {})):
            self.forget(server_uuid, tablet_id)

    def tablets_of(self, server_uuid: str) -> set[str]:
        return set(self._by_server.get(server_uuid, ()))

    def reports(self, tablet_id: str) -> dict[str, ReplicaReport]:
        return dict(self._by_tablet.get(tablet_id, {}))

    def report(self, server_uuid: str, tablet_id: str) -> ReplicaReport | None:
        return self._by_tablet.get(tablet_id, {}).get(server_uuid)

    def in_state(self, state: int) -> list[tuple[str, str, ReplicaReport]]:
        """(tablet id, server uuid, report) of every replica last reported in ``state``."""
        return [
            (tablet_id, uuid, report)
            for tablet_id, reports in self._by_tablet.items()
            for uuid, report in reports.items()
            if report.state == state
        ]

    def leader(self, tablet_id: str) -> tuple[str, int]:
        """(leader uuid, term) from the report of the highest term that names a leader, or ("", 0).

        A replica reporting itself LEADER wins over others naming a leader in the same term.
        """
        best = ("", 0, False)
        for server_uuid, r in self._by_tablet.get(tablet_id, {}).items():
            if not r.leader_uuid or r.tombstoned:
                continue
            is_self = r.role == common_pb2.LEADER and r.leader_uuid == server_uuid
            if (r.term, is_self) > (best[1], best[2]):
                best = (r.leader_uuid, r.term, is_self)
        return best[0], best[1]

    def leader_schema_version(self, tablet_id: str) -> int | None:
        """The schema version the tablet's current leader reported, None while unknown."""
        leader, _ = self.leader(tablet_id)
        report = self._by_tablet.get(tablet_id, {}).get(leader) if leader else None
        return None if report is None else report.schema_version

    def set_schema_version(self, server_uuid: str, tablet_id: str, version: int) -> None:
        """Note that a replica acknowledged an AlterSchema (its next report will say the same)."""
        report = self.report(server_uuid, tablet_id)
        if report is not None and report.schema_version < version:
            self.record(server_uuid, tablet_id, dataclasses.replace(report, schema_version=version))
