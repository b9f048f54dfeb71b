"""Request ids of one client's writes (Kudu's client-side RequestTracker).

Each write batch to a tablet takes the next sequence number and keeps it through every
retry, so the tablet can tell a retry from a new write.  With each request the client also
sends the lowest sequence number it has not finished with; the tablet forgets the answers
below it.
"""

from __future__ import annotations

import uuid

__all__ = ["RequestTracker"]


class RequestTracker:
    """Sequence numbers of one client's writes and the ones still outstanding (event loop only)."""

    def __init__(self, client_id: str | None = None) -> None:
        #: Random per client, so two clients never share sequence numbers.
        self.client_id = client_id or uuid.uuid4().hex
        self._next = 1
        self._outstanding: set[int] = set()

    def new_seq_no(self) -> int:
        seq_no = self._next
        self._next += 1
        self._outstanding.add(seq_no)
        return seq_no

    def first_incomplete(self) -> int:
        """The lowest sequence number still outstanding (the next one when none is)."""
        # Outstanding writes are bounded by the client's concurrency, so min() stays cheap.
        return min(self._outstanding, default=self._next)

    def complete(self, seq_no: int) -> None:
        self._outstanding.discard(seq_no)
