"""Settings of the client library (Kudu's client defaults where Kudu has one)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nyala.common.config import setting
from nyala.errors import InvalidArgument
from nyala.rpc import RpcOptions

__all__ = ["MAX_MASTER_READ_STALENESS_MS", "ClientOptions"]

#: Largest staleness bound of follower master reads (one day; the wire field is 32 bits).
MAX_MASTER_READ_STALENESS_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """Timeouts, retry backoff, session buffers and scan batch sizes of one client."""

    operation_timeout_ms: int = setting(
        30_000,
        "Deadline of a write flush, a scan request or a lookup, including every retry (Kudu's default).",
    )
    admin_operation_timeout_ms: int = setting(
        30_000, "Deadline of a DDL call (create, alter, delete, list), including every retry."
    )
    rpc_attempt_timeout_ms: int = setting(
        10_000,
        "Longest time one attempt of an RPC may take before the client tries again elsewhere, so that a "
        "paused server costs one attempt rather than the whole operation.",
        "advanced",
    )
    retry_backoff_initial_ms: int = setting(
        10, "First pause between attempts of a retriable failure; doubled per attempt.", "advanced"
    )
    retry_backoff_max_ms: int = setting(
        250,
        "Upper bound of the pause between attempts.  Kept short because the usual reason to retry is a "
        "leader election (1.5 to 2.3 s by default): a longer pause only delays noticing the new leader.",
        "advanced",
    )
    session_buffer_bytes: int = setting(
        7 * 1024 * 1024,
        "Bytes of row operations a session buffers before applying back-pressure (Kudu's mutation buffer).",
    )
    session_flush_watermark_pct: int = setting(
        50, "In AUTO_FLUSH_BACKGROUND, a flush starts when the buffer is this full (percent)."
    )
    session_flush_interval_ms: int = setting(
        1_000, "In AUTO_FLUSH_BACKGROUND, buffered operations are flushed at least this often."
    )
    write_batch_max_bytes: int = setting(
        1024 * 1024 - 1024,
        "Largest encoded batch of row operations sent in one Write; bigger batches are split.  It must "
        "not exceed what a tablet server accepts (one Raft batch: 1 MiB by default).",
        "advanced",
    )
    session_max_pending_errors: int = setting(
        100_000, "Row errors a session keeps for pending_errors(); beyond this it only counts them."
    )
    scan_batch_size_bytes: int = setting(
        4 * 1024 * 1024,
        "Bytes of rows a tablet server returns per scan call.  Kudu uses 1 MiB; Arrow batches of 4 MiB "
        "halve the per-call overhead that dominates a Python scan (measured: 16M vs 34M rows/s).",
    )
    scan_parallelism: int = setting(4, "Tablets read at the same time by Scanner.to_arrow() and count().", "advanced")
    locations_fetch_batch: int = setting(1_000, "Tablet locations asked for in one GetTableLocations call.", "advanced")
    master_read_staleness_ms: int = setting(
        0,
        "Catalog reads (table schemas and locations, table and tablet-server lists) may be answered by any "
        "master whose catalog is provably at most this old, spreading them over every master; 0 sends them "
        "to the leader master only.  DDL always goes to the leader, and for this long after its own DDL the "
        "client reads from the leader too, so it sees its own changes.",
    )
    rpc: RpcOptions = field(default_factory=RpcOptions)

    def __post_init__(self) -> None:
        positive = (
            "operation_timeout_ms",
            "admin_operation_timeout_ms",
            "rpc_attempt_timeout_ms",
            "retry_backoff_initial_ms",
            "retry_backoff_max_ms",
            "session_buffer_bytes",
            "session_flush_interval_ms",
            "write_batch_max_bytes",
            "scan_batch_size_bytes",
            "scan_parallelism",
            "locations_fetch_batch",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise InvalidArgument(f"client option {name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.master_read_staleness_ms <= MAX_MASTER_READ_STALENESS_MS:
            raise InvalidArgument(
                f"client option master_read_staleness_ms must be 0-{MAX_MASTER_READ_STALENESS_MS}, "
                f"got {self.master_read_staleness_ms}"
            )
        if not 1 <= self.session_flush_watermark_pct <= 100:
            raise InvalidArgument(
                f"client option session_flush_watermark_pct must be 1-100, got {self.session_flush_watermark_pct}"
            )
