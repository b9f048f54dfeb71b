"""Which replica serves a read: Kudu's replica selections, and read modes.

LEADER_ONLY reads from the replica the client believes leads the tablet.  CLOSEST_REPLICA
ranks replicas by

1. a replica on the client's own host (the tablet server's address is one of this host's
   addresses, or a loopback address),
2. the length of the common prefix of the tablet server's location and the client's location
   (the client learns its location from ConnectToMaster; both are empty until locations are
   configured, so this step is the hook for location-aware reads),
3. a pseudo-random order that is stable per client (a hash of a per-client salt and the
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

    def rank(uuid: str) -> tuple[int, int, int]:
        server = servers.get(uuid)
        local = server is not None and server.address is not None and is_local(server.address.host, local_hosts)
        affinity = location_affinity(server.location, client_location) if server is not None else 0
        # A real hash, not a CRC: CRCs of similar strings differ by a fixed pattern, which skews the order.
        spread = int.from_bytes(hashlib.blake2b(f"{salt}:{uuid}".encode(), digest_size=8).digest(), "big")
        return (0 if local else 1, -affinity, spread)

    return sorted(tablet.replica_uuids, key=rank)
