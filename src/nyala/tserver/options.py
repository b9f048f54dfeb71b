"""The tablet server's settings (Kudu's flag names where Kudu has them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nyala.common.config import setting
from nyala.common.hostport import HostPort, parse_address
from nyala.consensus.runtime import ReplicaOptions
from nyala.errors import InvalidArgument
from nyala.schema import RowOperationOptions
from nyala.server import ServerOptions
from nyala.storage import StorageOptions
from nyala.wal import WalOptions

__all__ = ["MASTER_DEFAULT_PORT", "TSERVER_DEFAULT_PORT", "TabletServerOptions"]

TSERVER_DEFAULT_PORT = 7050
MASTER_DEFAULT_PORT = 7051
MiB = 1 << 20


@dataclass(frozen=True)
class TabletServerOptions(ServerOptions):
    """Everything a tablet server process is configured with, beside the common server settings."""

    master_addresses: tuple[str, ...] = setting(
        (), "Addresses (host:port) of every master; the server heartbeats to each of them."
    )
    heartbeat_interval_ms: int = setting(
        1000, "Interval between heartbeats to each master (Kudu's heartbeat_interval_ms)."
    )
    heartbeat_rpc_timeout_ms: int = setting(
        15_000, "Deadline of one heartbeat call to a master (Kudu's heartbeat_rpc_timeout_ms).", "advanced"
    )
    scanner_ttl_ms: int = setting(
        60_000, "A scanner not continued for this long is closed and its resources freed (Kudu's scanner_ttl_ms)."
    )
    scanner_default_batch_size_bytes: int = setting(
        MiB, "Bytes of rows returned per scan call when the caller does not say (Kudu's default)."
    )
    scanner_max_batch_size_bytes: int = setting(
        8 * MiB, "Upper bound on the bytes of rows one scan call returns, whatever the caller asks.", "advanced"
    )
    tablet_checkpoint_wal_size_bytes: int = setting(
        64 * MiB,
        "A tablet whose storage WAL grows past this is checkpointed by the maintenance task, which bounds "
        "restart time and reclaims space.",
        "advanced",
    )
    maintenance_interval_ms: int = setting(
        10_000, "How often the maintenance task looks for MemRowSets to flush and tablets to checkpoint.", "advanced"
    )
    remember_responses_ttl_ms: int = setting(
        600_000,
        "How long a tablet keeps the answer of a write for a client that may retry it (exactly-once "
        "writes; Kudu's remember_responses_ttl_ms).",
        "advanced",
    )
    remember_clients_ttl_ms: int = setting(
        3_600_000,
        "How long a tablet remembers a client that sends no writes (Kudu's remember_clients_ttl_ms).",
        "advanced",
    )
    tablet_copy_transfer_chunk_size_bytes: int = setting(
        4 * MiB,
        "Largest chunk a tablet copy source returns per FetchData call, in bytes (Kudu's "
        "tablet_copy_transfer_chunk_size_bytes).",
        "advanced",
    )
    tablet_copy_idle_timeout_sec: float = setting(
        600.0,
        "A tablet copy session with no call for this long ends, its staging files are deleted and its "
        "WAL anchor released (Kudu's tablet_copy_idle_timeout_sec).",
        "advanced",
    )
    tablet_copy_throttler_bytes_per_sec: int = setting(
        0,
        "Bytes per second all tablet copies into this server may fetch together; 0 does not throttle "
        "(Kudu's tablet_copy_throttler_bytes_per_sec).",
    )
    num_tablets_to_copy_simultaneously: int = setting(
        10,
        "Tablet copies this server runs as the destination at once; StartTabletCopy beyond that is "
        "refused with ServiceUnavailable and the leader asks again later (Kudu's default).",
    )
    tablet_copy_download_threads_nums_per_session: int = setting(
        4,
        "FetchData calls each tablet copy keeps in flight at once (Kudu's name, where they are threads).",
        "advanced",
    )
    tablet_copy_fetch_max_retries: int = setting(
        5,
        "Times a failed or damaged chunk of a tablet copy is fetched again from its offset before the copy fails.",
        "advanced",
    )
    enable_tablet_copy: bool = setting(
        True,
        "Whether a leader asks a peer that lacks the tablet, or the log it needs, to copy the tablet "
        "(Kudu's enable_tablet_copy).  Off, such a peer stays behind until an operator acts; tests of "
        "replica deletion turn it off so a deleted replica is not copied back.",
        "advanced",
    )
    tablet_copy_start_interval_ms: int = setting(
        5000,
        "A leader sends StartTabletCopy for one tablet to one peer at most this often, however often "
        "the peer is found to need a copy.",
        "advanced",
    )
    storage: StorageOptions = field(default_factory=StorageOptions)
    wal: WalOptions = field(default_factory=WalOptions)
    row_operations: RowOperationOptions = field(default_factory=RowOperationOptions)
    log_cache_entries: int = setting(
        20_000,
        "Raft entries each tablet keeps in memory behind its applied index for lagging followers.",
        "advanced",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in (
            "heartbeat_interval_ms",
            "heartbeat_rpc_timeout_ms",
            "scanner_ttl_ms",
            "scanner_default_batch_size_bytes",
            "scanner_max_batch_size_bytes",
            "maintenance_interval_ms",
            "remember_responses_ttl_ms",
            "remember_clients_ttl_ms",
            "tablet_copy_transfer_chunk_size_bytes",
            "tablet_copy_idle_timeout_sec",
            "num_tablets_to_copy_simultaneously",
            "tablet_copy_download_threads_nums_per_session",
            "tablet_copy_start_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise InvalidArgument(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("tablet_copy_throttler_bytes_per_sec", "tablet_copy_fetch_max_retries"):
            if getattr(self, name) < 0:
                raise InvalidArgument(f"{name} must be >= 0, got {getattr(self, name)}")
        # A chunk travels as one sidecar of one RPC frame, beside a small header and body.
        if self.tablet_copy_transfer_chunk_size_bytes > self.rpc.max_frame_bytes - 64 * 1024:
            raise InvalidArgument(
                f"tablet_copy_transfer_chunk_size_bytes ({self.tablet_copy_transfer_chunk_size_bytes}) must leave "
                f"room in an RPC frame (max_frame_bytes {self.rpc.max_frame_bytes})"
            )
        if self.scanner_default_batch_size_bytes > self.scanner_max_batch_size_bytes:
            raise InvalidArgument(
                f"scanner_default_batch_size_bytes ({self.scanner_default_batch_size_bytes}) exceeds "
                f"scanner_max_batch_size_bytes ({self.scanner_max_batch_size_bytes})"
            )
        self.masters()  # validates every address

    def masters(self) -> list[HostPort]:
        """The master addresses, parsed (default port 7051)."""
        return [parse_address(a, MASTER_DEFAULT_PORT) for a in self.master_addresses]

    def replica_options(self) -> ReplicaOptions:
        return ReplicaOptions(raft=self.raft, wal=self.wal, log_cache_entries=self.log_cache_entries)

    @property
    def max_write_bytes(self) -> int:
        """Largest row-operations sidecar a Write may carry: it must fit one Raft entry with its envelope."""
        return min(self.row_operations.max_row_operations_bytes, self.raft.consensus_max_batch_size_bytes - 1)
