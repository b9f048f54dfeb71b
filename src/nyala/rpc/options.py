"""Settings of the RPC layer, shared by servers and the messenger."""

from __future__ import annotations

from dataclasses import dataclass

from nyala.common.config import setting

__all__ = ["RpcOptions"]


@dataclass(frozen=True, slots=True)
class RpcOptions:
    """Limits and timeouts of RPC connections (Kudu's rpc_* flags where one exists)."""

    max_frame_bytes: int = setting(
        64 * 1024 * 1024,
        "Largest frame accepted or sent; a bigger one closes the connection before anything is allocated.",
        "advanced",
    )
    default_timeout_s: float = setting(30.0, "Deadline given to a call whose caller does not set one.", "advanced")
    connect_timeout_s: float = setting(
        5.0, "Longest time a connection attempt may take before the calls waiting on it fail.", "advanced"
    )
    reconnect_backoff_initial_s: float = setting(
        0.05,
        "After a failed connection attempt, calls to that peer fail at once for this long; doubled per failure.",
        "advanced",
    )
    reconnect_backoff_max_s: float = setting(2.0, "Upper bound of the reconnection backoff.", "advanced")
    max_concurrent_calls: int = setting(
        4096,
        "Calls a server runs at once; beyond this it answers SERVICE_UNAVAILABLE instead of queueing without bound.",
        "advanced",
    )
    read_buffer_bytes: int = setting(
        256 * 1024, "Size of each connection's receive buffer for small frames.", "advanced"
    )
