"""Heartbeats to every master, with full and incremental tablet reports.

One task per master address, each on its own clock (``heartbeat_interval_ms``), so a master
that is down or slow never delays the others.  Per master the heartbeater remembers:

- whether the master has this server's registration: it is sent on first contact and again
  whenever the master answers ``needs_reregister``;
- what that master last *acknowledged* of each tablet (a signature: state, role, leader,
  term, configs, schema version, error).  A full report lists every tablet and replaces the
  acknowledged set; an incremental one lists the tablets whose signature differs from the
  acknowledged one, plus the ids of tablets no longer hosted.  A report is acknowledged
  only by a successful answer, so a lost heartbeat simply leaves the changes for the next.

The first report to each master is full, as is the one after ``needs_full_tablet_report``.
:meth:`Heartbeater.trigger` sends the next heartbeats at once: the tablet manager calls it
when a replica's role, leader, term, config or schema changes, so a new leader reaches the
masters without waiting for the interval.  Answers carry every tablet server's address,
which goes into the Raft transport's directory so replicas can reach peers by uuid, and its
location, kept in :attr:`Heartbeater.locations` with this server's own
(:attr:`Heartbeater.own_location`): a leader copies a tablet to a peer from a replica in the
peer's location when there is one.

The leader master's answers also carry the current masters (``master_addresses``): when they
differ from the ones this server heartbeats to, a loop starts for each new master and the
loop of each removed one stops, and the set is written to ``masters.json`` in the data
directory.  At start the remembered set is used together with ``--master-addresses``, so
masters added or removed online need no new flags, and a restart with the new set works too.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nyala.common.hostport import HostPort, parse_address
from nyala.consensus.runtime import PeerDirectory
from nyala.errors import InvalidArgument, NyalaError
from nyala.files import write_atomically
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.services import TS_HEARTBEAT
from nyala.tserver.tablet import TabletReplica

__all__ = ["MASTERS_FILE", "Heartbeater", "MasterLink", "remembered_masters"]

log = logging.getLogger("nyala.tserver")

#: In the tablet server's data directory: the masters the leader master last named.
MASTERS_FILE = "masters.json"


def remembered_masters(path: Path) -> list[HostPort]:
    """The masters remembered in ``path`` (empty when there is no usable file)."""
    try:
        return [parse_address(a) for a in json.loads(path.read_text())["masters"]]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError, InvalidArgument) as e:
        log.warning("ignoring %s: %s", path, e)
        return []


Signatures = dict[str, tuple[object, ...]]


@dataclass
class MasterLink:
    """What this server knows about its conversation with one master."""

    address: HostPort
    registered: bool = False
    needs_full_report: bool = True
    acknowledged: Signatures = field(default_factory=dict)
    is_leader: bool = False
    heartbeats_sent: int = 0
    consecutive_failures: int = 0
    #: The version of the tablet-server address book last taken from this master (0: none).
    addresses_version: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class Heartbeater:
    """Runs one heartbeat loop per master."""

    def __init__(
        self,
        masters: list[HostPort],
        messenger: Messenger,
        instance: common_pb2.NodeInstancePB,
        registration: Callable[[], common_pb2.ServerRegistrationPB],
        tablets: Callable[[], list[TabletReplica]],
        directory: PeerDirectory,
        *,
        interval_ms: int,
        rpc_timeout_ms: int,
        masters_file: Path | None = None,
    ) -> None:
        self._masters_file = masters_file
        remembered = remembered_masters(masters_file) if masters_file is not None else []
        self.links = [MasterLink(address) for address in dict.fromkeys([*remembered, *masters])]
        self._messenger = messenger
        self._instance = instance
        self._registration = registration
        self._tablets = tablets
        self._directory = directory
        self._interval_s = interval_ms / 1000
        self._timeout_s = rpc_timeout_ms / 1000
        self._sequence = 0
        self._tasks: dict[HostPort, asyncio.Task[None]] = {}
        self._started = False
        self._saving: asyncio.Task[None] | None = None
        #: Every tablet server's location by uuid, as the masters last said ("" unknown or none).
        self.locations: dict[str, str] = {}
        #: This server's location, as the masters assigned it.
        self.own_location = ""

    def start(self) -> None:
        self._started = True
        for link in self.links:
            self._start_link(link)

    def _start_link(self, link: MasterLink) -> None:
        task = asyncio.get_running_loop().create_task(self._run(link), name=f"heartbeat-{link.address}")
        self._tasks[link.address] = task

    async def stop(self) -> None:
        self._started = False
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = {}
        if self._saving is not None:
            await asyncio.gather(self._saving, return_exceptions=True)

    def _follow_masters(self, masters: list[HostPort]) -> None:
        """The leader master named the current masters: heartbeat to exactly those."""
        current = [link.address for link in self.links]
        if set(masters) == set(current):
            return
        log.info("the masters are now %s (were %s)", ", ".join(map(str, masters)), ", ".join(map(str, current)))
        kept = [link for link in self.links if link.address in masters]
        for link in self.links:
            if link.address not in masters:
                task = self._tasks.pop(link.address, None)
                if task is not None:
                    task.cancel()
        added = [MasterLink(a) for a in masters if a not in current]
        self.links = kept + added
        if self._started:
            for link in added:
                self._start_link(link)
        if self._masters_file is not None and (self._saving is None or self._saving.done()):
            self._saving = asyncio.get_running_loop().create_task(self._save(), name="save-masters")

    async def _save(self) -> None:
        assert self._masters_file is not None
        saved: list[HostPort] = []
        while saved != [link.address for link in self.links]:
            saved = [link.address for link in self.links]
            text = json.dumps({"masters": [str(a) for a in saved]}, indent=1)
            try:
                await asyncio.to_thread(write_atomically, self._masters_file, text.encode())
            except OSError as e:
                log.error("could not remember the masters in %s: %s", self._masters_file, e)
                return

    def location_of(self, uuid: str) -> str:
        """Where tablet server ``uuid`` is ("" when unknown or locations are not configured)."""
        return self.own_location if uuid == self._instance.permanent_uuid else self.locations.get(uuid, "")

    def trigger(self) -> None:
        """Heartbeat every master now (a tablet changed in a way masters must learn soon)."""
        for link in self.links:
            link.wake.set()

    async def _run(self, link: MasterLink) -> None:
        while True:
            await self.heartbeat(link)
            try:
                await asyncio.wait_for(link.wake.wait(), self._backoff(link))
            except TimeoutError:
                pass

    def _backoff(self, link: MasterLink) -> float:
        # A master that keeps failing is retried less often, at most every 8 intervals.
        return self._interval_s * min(8, 1 << min(3, link.consecutive_failures))

    async def heartbeat(self, link: MasterLink) -> mpb.TSHeartbeatResponsePB | None:
        """Send one heartbeat to ``link``'s master and take in its answer; None when it failed."""
        link.wake.clear()
        request, sent = self._request(link)
        try:
            response = await self._messenger.call(link.address, TS_HEARTBEAT, request, timeout=self._timeout_s)
        except NyalaError as e:
            link.consecutive_failures += 1
            log.log(
                logging.WARNING if link.consecutive_failures == 3 else logging.DEBUG,
                "heartbeat to master %s failed (%d in a row): %s",
                link.address,
                link.consecutive_failures,
                e,
            )
            return None
        link.heartbeats_sent += 1
        link.consecutive_failures = 0
        self._take_response(link, request, sent, response)
        return response

    def _request(self, link: MasterLink) -> tuple[mpb.TSHeartbeatRequestPB, Signatures]:
        tablets = self._tablets()
        current = {t.tablet_id: t.signature() for t in tablets}
        self._sequence += 1
        report = mpb.TabletReportPB(is_incremental=not link.needs_full_report, sequence_number=self._sequence)
        for tablet in tablets:
            if link.needs_full_report or link.acknowledged.get(tablet.tablet_id) != current[tablet.tablet_id]:
                report.updated_tablets.append(tablet.report())
        if not link.needs_full_report:
            report.removed_tablet_ids.extend(sorted(set(link.acknowledged) - set(current)))
        request = mpb.TSHeartbeatRequestPB(
            instance=self._instance,
            tablet_report=report,
            num_live_tablets=sum(1 for t in tablets if t.state == tpb.RUNNING),
            tserver_addresses_version=link.addresses_version,
        )
        if not link.registered:
            request.registration.CopyFrom(self._registration())
        return request, current

    def _take_response(
        self,
        link: MasterLink,
        request: mpb.TSHeartbeatRequestPB,
        sent: Signatures,
        response: mpb.TSHeartbeatResponsePB,
    ) -> None:
        link.is_leader = response.leader_master
        if response.leader_master and response.master_addresses:
            self._follow_masters([HostPort(a.host, a.port) for a in response.master_addresses])
        if response.location:
            self.own_location = response.location
        # The master sends the address book only when this link's copy is not its current version.
        for peer in response.tserver_addresses:
            if peer.permanent_uuid and peer.rpc_address.port:
                self._directory.learn(peer.permanent_uuid, HostPort(peer.rpc_address.host, peer.rpc_address.port))
                if peer.location:
                    self.locations[peer.permanent_uuid] = peer.location
        if response.tserver_addresses or not response.tserver_addresses_version:
            link.addresses_version = response.tserver_addresses_version
        if response.needs_reregister:
            link.registered = False
            link.needs_full_report = True
            link.acknowledged = {}
            if not request.HasField("registration"):
                link.wake.set()  # register now, not an interval later
            return
        link.registered = True
        report = request.tablet_report
        if report.is_incremental:
            acknowledged = dict(link.acknowledged)
            acknowledged.update((t.tablet_id, sent[t.tablet_id]) for t in report.updated_tablets)
            link.acknowledged = acknowledged
            for tablet_id in report.removed_tablet_ids:
                link.acknowledged.pop(tablet_id, None)
        else:
            link.acknowledged = dict(sent)
        link.needs_full_report = response.needs_full_tablet_report
        if link.needs_full_report and report.is_incremental:
            link.wake.set()  # the master lost track: tell it everything now
