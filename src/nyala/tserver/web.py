"""The tablet server's web pages: its tablets, one tablet's consensus state, scanners, maintenance.

Pages read the tablet registry, each replica's Raft state and store counters, the scanner
registry and the heartbeater, all in memory; the only disk access is a ``stat`` of the files
of the tablets shown on one page (their size).  The tablets list is paged and summarised by
state and role, so it stays fast with 10,000 tablets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from nyala.consensus.runtime import PeerDirectory
from nyala.errors import NotFound
from nyala.proto import consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.tserver.heartbeat import Heartbeater
from nyala.tserver.manager import TabletManager
from nyala.tserver.options import TabletServerOptions
from nyala.tserver.scanners import ScannerRegistry, ScanSession
from nyala.tserver.tablet import TabletReplica
from nyala.web import Badge, BadRequest, Fields, Link, Page, PageRequest, Table, WebServer
from nyala.web.view import Cell, paged

__all__ = ["TabletServerPages"]

#: A master link that failed this many heartbeats in a row counts as lost for /healthz.
LOST_AFTER_FAILURES = 3
_NOT_READY_STATES = {tpb.NOT_INITIALIZED, tpb.BOOTSTRAPPING}


def _state(tablet: TabletReplica) -> Badge:
    name = tablet.state_name
    if tablet.state == tpb.RUNNING:
        return Badge(name, "good")
    return Badge(name, "bad" if tablet.state == tpb.FAILED else "warn")


class TabletServerPages:
    """Builds the tablet server's pages; :meth:`add_to` registers them on the web server."""

    def __init__(
        self,
        tablets: TabletManager,
        scanners: ScannerRegistry,
        heartbeater: Heartbeater,
        directory: PeerDirectory,
        options: TabletServerOptions,
        location: Callable[[], str],
    ) -> None:
        self.tablets = tablets
        self.directory = directory
        self.scanners = scanners
        self.heartbeater = heartbeater
        self.options = options
        self.location = location

    def add_to(self, web: WebServer) -> None:
        web.page("/tablets", self.tablet_list, paged=True, params=("state",), nav="Tablets")
        web.page("/tablets/{tablet_id}", self.tablet)
        web.page("/scanners", self.scanner_list, paged=True, nav="Scanners")
        web.page("/maintenance", self.maintenance, nav="Maintenance")

    # -- tablets ------------------------------------------------------------------------------

    def tablet_list(self, request: PageRequest) -> Page:
        all_tablets = sorted(self.tablets.tablets(), key=lambda t: t.tablet_id)
        wanted = request.query.string("state").upper()
        states_known = list(tpb.TabletStatePB.keys())
        if wanted and wanted not in states_known:
            raise _bad_state(wanted)
        tablets = [t for t in all_tablets if not wanted or t.state_name == wanted]
        offset, limit = request.query.page()
        states = Counter(t.state_name for t in all_tablets)
        roles = Counter(t.raft.role.value for t in all_tablets if t.raft is not None)
        summary = Fields(
            "summary",
            {
                "tablets": len(all_tablets),
                **{f"state_{k.lower()}": v for k, v in sorted(states.items())},
                **{f"role_{k.lower()}": v for k, v in sorted(roles.items())},
            },
        )
        columns = ["tablet_id", "table", "state", "role", "term", "leader", "last_index", "commit_index",
                   "applied_index", "on_disk_bytes", "memrowset_rows", "memrowset_bytes", "wal_segments"]  # fmt: skip
        return Page("Tablets", [summary, paged("tablets", columns, tablets, _tablet_row, offset, limit)])

    def tablet(self, request: PageRequest) -> Page:
        tablet_id = request.path["tablet_id"]
        tablet = self.tablets.find(tablet_id)
        if tablet is None:
            raise NotFound(f"no tablet {tablet_id!r} on this tablet server")
        meta = tablet.meta
        sections: list[Fields | Table] = [
            Fields(
                "tablet",
                {
                    "tablet_id": tablet.tablet_id,
                    "table": meta.table_name,
                    "table_id": meta.table_id,
                    "state": _state(tablet),
                    "error": tablet.failure,
                    "schema_version": meta.schema_version,
                },
            )
        ]
        consensus = tablet.consensus_state()
        if consensus is not None:
            raft = tablet.raft
            sections.append(
                Fields(
                    "consensus",
                    {
                        "role": raft.role.value if raft is not None else "NON_PARTICIPANT",
                        "term": consensus.current_term,
                        "leader": consensus.leader_uuid,
                        "last_index": consensus.last_index,
                        "commit_index": consensus.commit_index,
                        "applied_index": consensus.applied_index,
                        "committed_config_index": consensus.committed_config.opid_index,
                        "pending_config": consensus.HasField("pending_config"),
                    },
                    "Consensus",
                )
            )
            progress = {p.permanent_uuid: p for p in consensus.peers}
            rows: list[list[Cell]] = []
            for peer in consensus.committed_config.peers:
                p = progress.get(peer.permanent_uuid)
                address = self.tablets_peer_address(peer.permanent_uuid)
                rows.append([
                    peer.permanent_uuid, address, self.heartbeater.location_of(peer.permanent_uuid),
                    _member_type(peer.member_type),
                    None if p is None else p.match_index, None if p is None else p.next_index,
                    None if p is None else max(0, consensus.last_index - p.match_index),
                    "" if p is None else _peer_health(p.health),
                ])  # fmt: skip
            sections.append(
                Table("peers", ["uuid", "rpc_address", "location", "member_type", "match_index", "next_index",
                                "lag_entries", "health"], rows, "Peers (progress as this leader sees it)")
            )  # fmt: skip
        return Page(f"Tablet {tablet.tablet_id}", list(sections))

    def tablets_peer_address(self, uuid: str) -> str:
        address = self.directory.get(uuid)
        return "" if address is None else str(address)

    # -- scanners and maintenance ------------------------------------------------------------

    def scanner_list(self, request: PageRequest) -> Page:
        now = self.scanners.now()
        sessions = sorted(self.scanners.sessions(), key=lambda s: s.last_access)
        offset, limit = request.query.page()

        def row(s: ScanSession) -> list[Cell]:
            return [s.scanner_id.decode(), Link(s.tablet_id, f"/tablets/{s.tablet_id}"), list(s.output_columns),
                    s.next_call_seq, round(now - s.last_access, 1)]  # fmt: skip

        columns = ["scanner_id", "tablet_id", "columns", "next_call", "idle_s"]
        table = paged("scanners", columns, sessions, row, offset, limit)
        return Page("Scanners", [Fields("summary", {"open": len(sessions), "expired": self.scanners.expired}), table])

    def maintenance(self, request: PageRequest) -> Page:
        o = self.options
        tablets = [t for t in self.tablets.tablets() if t.store is not None]
        mrs_rows = sum(t.store.memrowset_rows() for t in tablets if t.store is not None)
        mrs_bytes = sum(t.store.memrowset_bytes() for t in tablets if t.store is not None)
        copies: list[list[Cell]] = [
            [c.tablet_id, c.source_uuid, str(tpb.TabletCopyStatusPB.State.Name(c.state)), c.total_bytes, c.error]
            for c in self.tablets.copy_statuses()
        ]
        return Page(
            "Maintenance",
            [
                Fields(
                    "maintenance",
                    {
                        "interval_ms": o.maintenance_interval_ms,
                        "flush_threshold_rows": o.storage.flush_threshold_rows,
                        "flush_threshold_secs": o.storage.flush_threshold_secs,
                        "checkpoint_wal_size_bytes": o.tablet_checkpoint_wal_size_bytes,
                        "memrowset_rows": mrs_rows,
                        "memrowset_bytes": mrs_bytes,
                        "copies_in_progress": len(self.tablets.copies_in_progress()),
                    },
                ),
                Table("copies", ["tablet_id", "source", "state", "bytes", "error"], copies, "Tablet copies"),
            ],
        )

    # -- health and status --------------------------------------------------------------------

    def status_fields(self) -> dict[str, Cell]:
        return {
            "role": "tserver",
            "location": self.location(),
            "masters": [str(link.address) for link in self.heartbeater.links],
            "tablets": len(self.tablets.tablets()),
        }

    def not_ready(self) -> list[str]:
        reasons = []
        opening = sum(1 for t in self.tablets.tablets() if t.state in _NOT_READY_STATES)
        if opening:
            reasons.append(f"{opening} tablets are still bootstrapping")
        links = self.heartbeater.links
        if links and all(link.heartbeats_sent == 0 or link.consecutive_failures >= LOST_AFTER_FAILURES
                         for link in links):  # fmt: skip
            reasons.append(f"no master answers heartbeats ({', '.join(str(link.address) for link in links)})")
        return reasons


def _tablet_row(tablet: TabletReplica) -> list[Cell]:
    raft, store = tablet.raft, tablet.store
    return [
        Link(tablet.tablet_id, f"/tablets/{tablet.tablet_id}"),
        tablet.meta.table_name,
        _state(tablet),
        raft.role.value if raft is not None else "",
        raft.term if raft is not None else None,
        raft.leader_id[:8] if raft is not None else "",
        raft.last_index if raft is not None else None,
        raft.commit_index if raft is not None else None,
        raft.applied_index if raft is not None else None,
        store.file_size_bytes() if store is not None else None,
        store.memrowset_rows() if store is not None else None,
        store.memrowset_bytes() if store is not None else None,
        raft.wal.segment_count if raft is not None else None,
    ]


def _member_type(value: int) -> str:
    return str(consensus_pb2.MemberType.Name(value)) if value in consensus_pb2.MemberType.values() else str(value)


def _peer_health(value: int) -> str:
    return str(cpb.PeerHealthPB.Name(value)) if value in cpb.PeerHealthPB.values() else str(value)


def _bad_state(wanted: str) -> BadRequest:
    return BadRequest(f"query parameter 'state' must be a tablet state ({', '.join(tpb.TabletStatePB.keys())}), "
                      f"got {wanted!r}")  # fmt: skip
