"""Log anchors: who still needs which part of the log, and which closed segments GC may delete.

A holder registers an anchor at the first op index it still needs and moves it forward as it
progresses.  ``REQUIRED`` anchors (entries not yet applied to the tablet store, tablet-copy
sessions) always hold segments back.  ``RETENTION`` anchors (peers that lag behind) hold
segments back only up to ``max_segments_to_retain`` closed segments; a peer behind that needs a
tablet copy instead, as in Kudu.
"""

from __future__ import annotations

import enum
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from nyala.errors import IllegalState, InvalidArgument

__all__ = ["AnchorKind", "LogAnchor", "LogAnchorRegistry", "segments_to_delete"]


class AnchorKind(enum.Enum):
    REQUIRED = "required"
    RETENTION = "retention"


@dataclass(eq=False, slots=True)
class LogAnchor:
    """A registration handle; ``index`` is the first op index its owner still needs."""

    owner: str
    kind: AnchorKind
    index: int
    id: int = field(default=0)


class LogAnchorRegistry:
    """Thread-safe set of anchors on one tablet's log."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._anchors: dict[int, LogAnchor] = {}
        self._ids = itertools.count(1)

    def register(self, index: int, owner: str, kind: AnchorKind = AnchorKind.REQUIRED) -> LogAnchor:
        _check_index(index)
        if not isinstance(kind, AnchorKind):
            raise InvalidArgument(f"anchor kind must be an AnchorKind, got {kind!r}")
        with self._lock:
            anchor = LogAnchor(owner, kind, index, next(self._ids))
            self._anchors[anchor.id] = anchor
        return anchor

    def update(self, anchor: LogAnchor, index: int) -> None:
        """Move ``anchor`` to ``index`` (forwards or backwards)."""
        _check_index(index)
        with self._lock:
            self._require(anchor)
            anchor.index = index

    def release(self, anchor: LogAnchor) -> None:
        with self._lock:
            self._require(anchor)
            del self._anchors[anchor.id]

    def earliest(self, kind: AnchorKind) -> int | None:
        """The lowest index anchored by ``kind``, or None when nothing of that kind is anchored."""
        with self._lock:
            return min((a.index for a in self._anchors.values() if a.kind is kind), default=None)

    def snapshot(self) -> list[LogAnchor]:
        with self._lock:
            return [LogAnchor(a.owner, a.kind, a.index, a.id) for a in self._anchors.values()]

    def _require(self, anchor: LogAnchor) -> None:
        if self._anchors.get(anchor.id) is not anchor:
            raise IllegalState(f"anchor {anchor.id} of {anchor.owner!r} is not registered here")


def _check_index(index: int) -> None:
    if type(index) is not int or index < 0:
        raise InvalidArgument(f"anchor index must be an integer >= 0, got {index!r}")


def segments_to_delete(
    max_indexes: Sequence[int],
    required: int | None,
    retention: int | None,
    min_retain: int,
    max_retain: int,
) -> int:
    """How many of the oldest closed segments (given their max op indexes, oldest first) GC may delete.

    Only a prefix is ever deleted, so truncation markers never outlive the entries they cut.
    """
    total = len(max_indexes)
    by_required = _prefix_below(max_indexes, required)
    # Retention anchors hold at most max_retain closed segments; beyond that they are ignored.
    by_retention = max(_prefix_below(max_indexes, retention), total - max_retain)
    return max(min(by_required, by_retention, total - min_retain), 0)


def _prefix_below(max_indexes: Sequence[int], anchor: int | None) -> int:
    if anchor is None:
        return len(max_indexes)
    count = 0
    for max_index in max_indexes:
        if max_index >= anchor:
            break
        count += 1
    return count
