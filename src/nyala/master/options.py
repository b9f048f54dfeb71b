"""The master's settings (Kudu's flag names, in Python style)."""

from __future__ import annotations

import dataclasses

from nyala.catalog import CatalogOptions
from nyala.common.config import setting
from nyala.errors import InvalidArgument
from nyala.master.location_mapping import parse_command
from nyala.master.replica_management import RepairKind
from nyala.placement import PlacementOptions, RebalanceOptions
from nyala.server import ServerOptions

__all__ = ["MasterOptions"]


@dataclasses.dataclass(frozen=True)
class MasterOptions:
    """Everything ``nyala master start`` can set."""

    server: ServerOptions = dataclasses.field(default_factory=ServerOptions)
    catalog: CatalogOptions = dataclasses.field(default_factory=CatalogOptions)
    placement: PlacementOptions = dataclasses.field(default_factory=PlacementOptions)
    master_addresses: str = setting(
        "",
        "Comma-separated host:port of every master of the cluster, this one included; empty means this "
        "master alone (its own --rpc-bind-address).",
    )
    master_auto_join: bool = setting(
        False,
        "A master started into a running cluster that does not count it yet asks the leader to add it "
        "(Kudu's master_auto_join_cluster); otherwise it waits for `nyala master add`.",
    )
    heartbeat_interval_ms: int = setting(
        1000,
        "Interval at which the leader master retries tablet creations, deletions and alterations that "
        "have not taken effect yet, and re-checks tablet-server liveness.",
    )
    tserver_unresponsive_timeout_ms: int = setting(
        60_000,
        "A tablet server not heard from for this long is considered dead: it gets no new replicas and "
        "is listed as not live.",
    )
    tserver_warm_up_ms: int = setting(
        0,
        "For this long after a master starts, too few live tablet servers for a new table is a retriable "
        "ServiceUnavailable rather than InvalidArgument (tablet servers may not have heartbeated yet); 0 means "
        "five heartbeat intervals.",
    )
    master_add_server_when_underreplicated: bool = setting(
        True,
        "Add a replica (a NON_VOTER that is promoted once caught up) to a tablet whose leader reports "
        "fewer healthy voters than its replication factor (Kudu's flag).",
    )
    catalog_manager_evict_excess_replicas: bool = setting(
        True,
        "Remove failed, replaced and excess replicas from a tablet's config on its leader's report, and "
        "ask a leader marked for replacement to step down (Kudu's flag).",
    )
    master_tombstone_evicted_tablet_replicas: bool = setting(
        True,
        "Tombstone replicas that are no longer in their tablet's committed config: members a config "
        "change removed, and replicas a returning tablet server still holds (Kudu's flag).",
    )
    auto_rebalancing_enabled: bool = setting(
        True,
        "Run the rebalancer in the leader master: every interval it moves replicas (3-4-3) to restore the "
        "placement policy and to even out replicas across locations and servers, as `nyala cluster rebalance` "
        "does.  It pauses while a CLI rebalance runs and never moves replicas of servers in maintenance mode.",
    )
    auto_rebalancing_interval_sec: float = setting(
        30.0, "Time between two rounds of the leader master's auto rebalancer."
    )
    auto_rebalancing_max_moves_per_server: int = setting(
        1, "Most moves the auto rebalancer starts from one tablet server, and to one, in a round."
    )
    auto_rebalancing_load_imbalance_threshold: float = setting(
        1.0,
        "Smallest difference of per-server load between two locations, for one table (or range), that the "
        "auto rebalancer balances across locations (the placement policy is always restored).",
        "advanced",
    )
    location_mapping_cmd: str = setting(
        "",
        "Executable (with optional arguments, split like a shell command line) that the master runs with "
        "one or more hosts or IP addresses appended; it must print one location per host, one per line, "
        "each like /dc1/rack1.  Tablet servers are placed by location and clients learn theirs; empty turns "
        "location awareness off.  Every master must use the same command.",
    )
    location_mapping_timeout_ms: int = setting(
        10_000,
        "Longest time one run of the location mapping command may take; it is killed after that and the "
        "registration waiting for it is refused (the tablet server retries at its next heartbeat).",
        "advanced",
    )
    table_locations_ttl_ms: int = setting(
        300_000, "How long clients may cache the tablet locations the master returns."
    )
    master_failover_catchup_timeout_ms: int = setting(
        30_000,
        "How long a newly elected leader master may take to apply every committed catalog entry before "
        "it gives up leadership (Kudu crashes instead).",
        "advanced",
    )
    master_registration_timeout_ms: int = setting(
        2_000, "Timeout of one GetMasterRegistration call to another master at startup.", "advanced"
    )
    tserver_rpc_timeout_ms: int = setting(
        10_000, "Timeout of one CreateTablet, DeleteTablet or AlterSchema call to a tablet server.", "advanced"
    )
    sys_catalog_checkpoint_wal_bytes: int = setting(
        16 << 20,
        "Size of the sys catalog's DuckDB WAL after which it is checkpointed into the catalog file.",
        "advanced",
    )

    def replica_management_allows(self, kind: RepairKind) -> bool:
        """Whether re-replication may make this kind of change (see the two flags above)."""
        if kind is RepairKind.ADD:
            return self.master_add_server_when_underreplicated
        return self.catalog_manager_evict_excess_replicas

    def auto_rebalancing_options(self) -> RebalanceOptions:
        """The planner's options for the auto rebalancer: every phase, ranges balanced apart."""
        return RebalanceOptions(load_imbalance_threshold=self.auto_rebalancing_load_imbalance_threshold)

    @property
    def tserver_warm_up_s(self) -> float:
        return (self.tserver_warm_up_ms or 5 * self.heartbeat_interval_ms) / 1000

    def __post_init__(self) -> None:
        if self.location_mapping_cmd:
            parse_command(self.location_mapping_cmd)  # a malformed command line fails at startup
        if self.auto_rebalancing_interval_sec <= 0:
            raise InvalidArgument(
                f"auto_rebalancing_interval_sec must be positive, got {self.auto_rebalancing_interval_sec:g}"
            )
        if self.auto_rebalancing_max_moves_per_server < 1:
            raise InvalidArgument(
                "auto_rebalancing_max_moves_per_server must be at least 1, got "
                f"{self.auto_rebalancing_max_moves_per_server}"
            )
        if not self.auto_rebalancing_load_imbalance_threshold >= 0:  # NaN too
            raise InvalidArgument(
                "auto_rebalancing_load_imbalance_threshold must not be negative, got "
                f"{self.auto_rebalancing_load_imbalance_threshold:g}"
            )
        if self.tserver_warm_up_ms < 0:
            raise InvalidArgument(f"tserver_warm_up_ms must not be negative, got {self.tserver_warm_up_ms}")
        for name in (
            "heartbeat_interval_ms",
            "tserver_unresponsive_timeout_ms",
            "table_locations_ttl_ms",
            "location_mapping_timeout_ms",
            "master_failover_catchup_timeout_ms",
            "master_registration_timeout_ms",
            "tserver_rpc_timeout_ms",
            "sys_catalog_checkpoint_wal_bytes",
        ):
            if getattr(self, name) <= 0:
                raise InvalidArgument(f"{name} must be positive, got {getattr(self, name)}")
