"""Tablet servers as every master knows them: registrations, instances, heartbeats, liveness.

Every master (followers too) keeps one :class:`TSDescriptor` per tablet server that
registered with it, because tablet servers heartbeat to all masters (seed 002): a newly
elected leader therefore knows the cluster at once (KUDU-1358).  Nothing here is persisted;
a master that restarts asks every tablet server to register again (``needs_reregister``).
An unregistered server is forgotten (:meth:`TSManager.forget`) by every master as it applies
the catalog write that unregisters it; if it heartbeats again it simply registers again.

Every heartbeat answer can carry where every tablet server is (its uuid, address and
location), so replicas reach their peers by uuid.  With a thousand servers that list is most
of the heartbeat's cost, so the registry versions it: :attr:`TSManager.addresses_version`
changes whenever a server registers at a new address or location or is forgotten, the list is
built once per version, and a tablet server that already holds the current version gets none.

A tablet server is *live* while its last heartbeat is younger than
``tserver_unresponsive_timeout_ms``.  A heartbeat with a higher ``instance_seqno`` than the
registered one comes from a restarted process: it must register again and send a full
tablet report.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable

from nyala.common.hostport import HostPort
from nyala.errors import IllegalState, InvalidArgument
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb

__all__ = ["HeartbeatOutcome", "TSDescriptor", "TSManager", "registration_address"]


def registration_address(uuid: str, registration: common_pb2.ServerRegistrationPB) -> common_pb2.HostPortPB:
    """The first RPC address of a registration (the one locations map); InvalidArgument when bad."""
    if not registration.rpc_addresses:
        raise InvalidArgument(f"registration of tablet server {uuid} has no RPC address")
    first = registration.rpc_addresses[0]
    if not first.host or not 0 < first.port < 65536:
        raise InvalidArgument(f"registration of tablet server {uuid} has a bad RPC address {first.host}:{first.port}")
    return first


@dataclasses.dataclass
class TSDescriptor:
    """One registered tablet server."""

    uuid: str
    instance_seqno: int
    registration: common_pb2.ServerRegistrationPB
    address: HostPort
    last_heartbeat_s: float
    location: str = ""
    num_live_tablets: int = 0
    #: Leader term in which this master last processed a full tablet report from the server
    #: (-1: never, or the server re-registered since): a new leader asks for one first.
    full_report_term: int = -1

    def since_heartbeat_s(self, now_s: float) -> float:
        return max(0.0, now_s - self.last_heartbeat_s)

    def ts_info(self) -> common_pb2.TSInfoPB:
        return common_pb2.TSInfoPB(
            permanent_uuid=self.uuid,
            rpc_addresses=[common_pb2.HostPortPB(host=self.address.host, port=self.address.port)],
            location=self.location,
        )


@dataclasses.dataclass(frozen=True)
class HeartbeatOutcome:
    """What a heartbeat did to the registry."""

    descriptor: TSDescriptor | None  # None when the server must register first
    needs_reregister: bool
    registered: bool  # a (re-)registration happened in this heartbeat


class TSManager:
    """The registry of tablet servers; ``clock`` is monotonic seconds (injected for tests)."""

    def __init__(self, unresponsive_timeout_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.unresponsive_timeout_s = unresponsive_timeout_ms / 1000
        self.clock = clock
        self._servers: dict[str, TSDescriptor] = {}
        # Random start: a tablet server's version from this master's previous process (or from
        # another master) must not pass for the current one.
        self._addresses_version = random.getrandbits(62) + 1
        self._addresses: list[tpb.PeerAddressPB] | None = None

    def heartbeat(self, request: mpb.TSHeartbeatRequestPB, location: str = "") -> HeartbeatOutcome:
        """Record a heartbeat; register the server (at ``location``) when it carries a registration."""
        uuid = request.instance.permanent_uuid
        if not uuid:
            raise InvalidArgument("heartbeat without a tablet server uuid (instance.permanent_uuid)")
        seqno = request.instance.instance_seqno
        known = self._servers.get(uuid)
        if known is not None and seqno < known.instance_seqno:
            raise IllegalState(
                f"heartbeat from an old instance {seqno} of tablet server {uuid}; instance {known.instance_seqno} "
                "registered since"
            )
        now = self.clock()
        if request.HasField("registration"):
            return HeartbeatOutcome(self._register(uuid, seqno, request, now, location), False, True)
        if known is None or seqno != known.instance_seqno:
            return HeartbeatOutcome(None, True, False)
        known.last_heartbeat_s = now
        known.num_live_tablets = request.num_live_tablets
        return HeartbeatOutcome(known, False, False)

    def _register(
        self, uuid: str, seqno: int, request: mpb.TSHeartbeatRequestPB, now: float, location: str
    ) -> TSDescriptor:
        registration = request.registration
        first = registration_address(uuid, registration)
        descriptor = TSDescriptor(
            uuid,
            seqno,
            registration,
            HostPort(first.host, first.port),
            now,
            location=location,
            num_live_tablets=request.num_live_tablets,
        )
        old = self._servers.get(uuid)
        if old is None or (old.address, old.location) != (descriptor.address, descriptor.location):
            self._addresses_changed()
        self._servers[uuid] = descriptor
        return descriptor

    def _addresses_changed(self) -> None:
        self._addresses_version += 1
        self._addresses = None

    def request_full_reports(self) -> None:
        """Ask every registered server for a full tablet report with its next heartbeat."""
        for descriptor in self._servers.values():
            descriptor.full_report_term = -1

    def forget(self, uuid: str) -> bool:
        """Drop the server (it was unregistered); True when it was known.  Its next heartbeat is
        answered ``needs_reregister``, so a server that comes back registers again."""
        if self._servers.pop(uuid, None) is None:
            return False
        self._addresses_changed()
        return True

    # -- lookups --------------------------------------------------------------------------

    def get(self, uuid: str) -> TSDescriptor | None:
        return self._servers.get(uuid)

    def all(self) -> list[TSDescriptor]:
        return sorted(self._servers.values(), key=lambda d: d.uuid)

    def is_live(self, descriptor: TSDescriptor) -> bool:
        return descriptor.since_heartbeat_s(self.clock()) < self.unresponsive_timeout_s

    def live(self) -> list[TSDescriptor]:
        return [d for d in self.all() if self.is_live(d)]

    def address_of(self, uuid: str) -> HostPort | None:
        descriptor = self._servers.get(uuid)
        return None if descriptor is None else descriptor.address

    @property
    def addresses_version(self) -> int:
        """The version of :meth:`peer_addresses`: it changes whenever the list does."""
        return self._addresses_version

    def peer_addresses(self) -> list[tpb.PeerAddressPB]:
        """Where every registered tablet server is, and its location (heartbeat responses carry
        this); built once per :attr:`addresses_version` (do not change the messages)."""
        if self._addresses is None:
            self._addresses = [
                tpb.PeerAddressPB(
                    permanent_uuid=d.uuid,
                    rpc_address=common_pb2.HostPortPB(host=d.address.host, port=d.address.port),
                    location=d.location,
                )
                for d in self.all()
            ]
        return self._addresses
