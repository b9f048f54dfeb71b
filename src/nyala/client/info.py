"""What the client reports about the cluster: plain, immutable records.

These are the public shapes of master, tablet-server, table and tablet listings; they hold
only plain Python values so that they print, compare and pickle without the RPC layer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nyala.proto import common_pb2

__all__ = ["MasterInfo", "ReplicaInfo", "TableSummary", "TabletInfo", "TabletServerInfo", "role_name"]


def role_name(role: int) -> str:
    """``LEADER``, ``FOLLOWER``, ... for a RaftRolePB value."""
    return str(common_pb2.RaftRolePB.Name(role)) if role in common_pb2.RaftRolePB.values() else "UNKNOWN_ROLE"


@dataclasses.dataclass(frozen=True, slots=True)
class MasterInfo:
    """One master as ListMasters reports it; ``error`` is set when it could not be reached."""

    uuid: str
    rpc_addresses: tuple[str, ...]
    role: str
    term: int = 0
    error: str = ""
    #: VOTER, or NON_VOTER while a newly added master catches up.
    member_type: str = "VOTER"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class TabletServerInfo:
    """One registered tablet server, as ListTabletServers reports it.

    ``num_live_replicas`` is what the server last reported in a heartbeat (stale once it is
    dead); ``num_replicas`` counts the replicas the catalog's committed configs place on it,
    true for dead servers too (None when a master without the catalog answered).
    """

    uuid: str
    rpc_addresses: tuple[str, ...]
    location: str
    live: bool
    millis_since_heartbeat: int
    num_live_replicas: int
    software_version: str = ""
    start_time_us: int = 0
    maintenance: bool = False
    num_replicas: int | None = None

    @property
    def state(self) -> str:
        """``live`` or ``dead``, with `` (maintenance)`` while in maintenance mode."""
        liveness = "live" if self.live else "dead"
        return f"{liveness} (maintenance)" if self.maintenance else liveness

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "state": self.state}


@dataclasses.dataclass(frozen=True, slots=True)
class TableSummary:
    """One table in a listing."""

    id: str
    name: str
    num_tablets: int
    num_replicas: int

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica of a tablet: the server it lives on and its last reported role."""

    uuid: str
    address: str
    location: str
    role: str


@dataclasses.dataclass(frozen=True, slots=True)
class TabletInfo:
    """One tablet of a table with its partition (as text) and replicas.

    ``range_start`` is the encoded lower bound of the tablet's range partition (every hash
    bucket of one range shares it): what range-aware placement and rebalancing count replicas
    by.  It is empty for a table without range columns, and when only the tablet is known.
    """

    tablet_id: str
    partition: str
    replicas: tuple[ReplicaInfo, ...]
    range_start: bytes = b""

    @property
    def leader(self) -> ReplicaInfo | None:
        return next((r for r in self.replicas if r.role == "LEADER"), None)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
