"""Settings of the write-ahead log (Kudu's ``log_*`` flags where one exists)."""

from __future__ import annotations

from dataclasses import dataclass

from nyala.common.config import setting
from nyala.errors import InvalidArgument

__all__ = ["WalOptions"]

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class WalOptions:
    """How one tablet's log lays out, syncs and retains its segments."""

    segment_size_bytes: int = setting(
        8 * MiB,
        "Size at which the active segment is closed and the next one started; also the preallocated size "
        "(Kudu's log_segment_size_mb=8).",
        "advanced",
    )
    fsync_enabled: bool = setting(
        True,
        "Make every acknowledged append durable with fdatasync before its future completes; turning it off "
        "loses acknowledged writes on power failure and is meant for benchmarks only.",
        "unsafe",
    )
    preallocate_segments: bool = setting(
        True,
        "Preallocate the next segment in the background with posix_fallocate so appends can use the cheaper "
        "fdatasync (Kudu's log_preallocate_segments).",
        "advanced",
    )
    group_commit_max_bytes: int = setting(
        4 * MiB,
        "Bytes the appender takes from its queue for one write and one sync; more waits for the next group "
        "(after Kudu's group_commit_queue_size_bytes).",
        "advanced",
    )
    append_queue_max_bytes: int = setting(
        16 * MiB,
        "Bytes waiting in the append queue at which Log.wait_for_room makes asyncio producers wait until the "
        "appender has taken a group; appends themselves are never refused or delayed, so the bound is soft "
        "(after Kudu's group_commit_queue_size_bytes).",
        "advanced",
    )
    max_append_bytes: int = setting(
        64 * MiB,
        "Largest encoded size of the entries of one append call; a bigger call is refused.",
        "advanced",
    )
    min_segments_to_retain: int = setting(
        1,
        "Closed segments always kept, whatever the anchors say (Kudu's log_min_segments_to_retain).",
        "advanced",
    )
    max_segments_to_retain: int = setting(
        80,
        "Closed segments kept for lagging peers at most; beyond this their retention anchors are ignored "
        "and such peers need a tablet copy (Kudu's log_max_segments_to_retain).",
        "advanced",
    )

    def __post_init__(self) -> None:
        if self.segment_size_bytes < 4096:
            raise InvalidArgument(f"segment_size_bytes must be at least 4096, got {self.segment_size_bytes}")
        if self.group_commit_max_bytes < 1:
            raise InvalidArgument(f"group_commit_max_bytes must be positive, got {self.group_commit_max_bytes}")
        if self.append_queue_max_bytes < 1:
            raise InvalidArgument(f"append_queue_max_bytes must be positive, got {self.append_queue_max_bytes}")
        if not 1 <= self.max_append_bytes < 2**32 - 64:
            raise InvalidArgument(f"max_append_bytes must be in [1, 2**32 - 64), got {self.max_append_bytes}")
        if self.min_segments_to_retain < 1:
            # At least one closed segment must survive GC: it carries the last index across a restart.
            raise InvalidArgument(f"min_segments_to_retain must be at least 1, got {self.min_segments_to_retain}")
        if self.max_segments_to_retain < self.min_segments_to_retain:
            raise InvalidArgument(
                f"max_segments_to_retain ({self.max_segments_to_retain}) must not be below "
                f"min_segments_to_retain ({self.min_segments_to_retain})"
            )
