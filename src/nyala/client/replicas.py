"""Which replica serves a read: Kudu's replica selections, and read modes.

LEADER_ONLY reads from the replica the client believes leads the tablet.  CLOSEST_REPLICA
ranks replicas by

1. a replica on the client's own host (the tablet server's address is one of this host's
   addresses, or a loopback address) -- but, as in Kudu, only when its location is the
   client's or either location is unknown, so that loopback addresses of a one-machine
   cluster with locations do not all count as "here";
2. a replica in the client's own location (the client learns it from ConnectToMaster, the
   master mapping the client's address with its location mapping command);
3. the replica whose location shares the longest ``/``-separated prefix with the client's
   (``/dc1/rack2`` is closer to ``/dc1/rack1`` than ``/dc2/rack1`` is: the hierarchy seed 000
   foresaw and Kudu never built);
4. a pseudo-random order that is stable per client (a hash of a per-client salt and the
   server uuid), so one client keeps reading from the same replica while many clients spread
   over all of them.

The remaining replicas follow in that order, so a scan that loses its replica moves on to
the next closest one.
"""

from __future__ import annotations

import enum
import hashlib
import ipaddress
import socket
from collections.abc import Mapping

from .meta_cache import ServerInfo, TabletLocation

__all__ = ["ReadMode", "ReplicaSelection", "local_host_addresses", "location_affinity", "order_replicas"]


class ReplicaSelection(enum.IntEnum):
    """Where a scan reads (Kudu's names and wire values)."""

    LEADER_ONLY = 0
    CLOSEST_REPLICA = 1


class ReadMode(enum.IntEnum):
    """What a scan sees.

    READ_LATEST: whatever the chosen replica has applied (may lag the leader).
    READ_YOUR_WRITES: at least every write this client has had acknowledged on that tablet
    (the replica waits until it has applied the write's Raft index).
    """

    READ_LATEST = 0
    READ_YOUR_WRITES = 1


def local_host_addresses() -> frozenset[str]:
    """This host's names and addresses (may block on name resolution: call it off the loop)."""
    names = {"localhost", socket.gethostname()}
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            names.add(str(info[4][0]))
    except OSError:
        pass  # an unresolvable hostname just means no extra local addresses
    return frozenset(names)


def is_local(host: str, local_hosts: frozenset[str]) -> bool:
    if host in local_hosts:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def location_affinity(server_location: str, client_location: str) -> int:
    """How many leading location components (``/dc/rack``) the two locations share."""
    a = [p for p in server_location.split("/") if p]
    b = [p for p in client_location.split("/") if p]
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return shared


def order_replicas(
    tablet: TabletLocation,
    servers: Mapping[str, ServerInfo],
    selection: ReplicaSelection,
    *,
    local_hosts: frozenset[str],
    client_location: str,
    salt: int,
) -> list[str]:
    """The uuids of the replicas to try, best first."""
    if selection is ReplicaSelection.LEADER_ONLY:
        return [tablet.leader_uuid] if tablet.leader_uuid else []

    def rank(uuid: str) -> tuple[bool, bool, int, int]:
        server = servers.get(uuid)
        location = server.location if server is not None else ""
        same_location = bool(location) and location == client_location
        here = (
            server is not None
            and server.address is not None
            and (same_location or not location or not client_location)
            and is_local(server.address.host, local_hosts)
        )
        affinity = location_affinity(location, client_location)
        # A real hash, not a CRC: CRCs of similar strings differ by a fixed pattern, which skews the order.
        spread = int.from_bytes(hashlib.blake2b(f"{salt}:{uuid}".encode(), digest_size=8).digest(), "big")
        return (not here, not same_location, -affinity, spread)

    return sorted(tablet.replica_uuids, key=rank)
