"""Tablet-server states in the catalog: maintenance mode and unregistration (Kudu's TSERVER_STATE).

A ``TSERVER_STATE`` entry, keyed by the tablet server's uuid, holds a
``SysTServerStateEntryPB``.  Only ``MAINTENANCE_MODE`` is stored: a server in ``NONE`` has no
entry, so exiting maintenance deletes it (as Kudu does).  The entry is keyed by uuid alone and
outlives the server's registration, which is in memory only: a new leader master therefore
knows which servers are in maintenance before any of them heartbeats.

Unregistering a server is one write that deletes its state entry and names the server in
``CatalogWritePB.unregistered_tservers``, which every master acts on as it applies the write
(it forgets the server from its in-memory registry).
"""

from __future__ import annotations

import re

from nyala.errors import InvalidArgument
from nyala.proto import master_pb2 as mpb

__all__ = [
    "check_tserver_uuid",
    "maintenance_write",
    "tserver_state_mutation",
    "unregister_write",
]

# Tablet servers name themselves with uuid4().hex (nyala.server.fs).
_UUID = re.compile(r"[0-9a-f]{32}")


def check_tserver_uuid(uuid: str) -> None:
    """InvalidArgument unless ``uuid`` looks like a tablet server's uuid (32 lowercase hex digits)."""
    if not uuid:
        raise InvalidArgument("no tablet server uuid given")
    if not _UUID.fullmatch(uuid):
        shown = uuid if len(uuid) <= 80 else uuid[:80] + "..."
        raise InvalidArgument(f"tablet server uuid {shown!r} is not 32 lowercase hex digits")


def tserver_state_mutation(uuid: str, entry: mpb.SysTServerStateEntryPB | None) -> mpb.CatalogMutationPB:
    """Write ``entry`` as the server's state; None deletes it (the server is back to NONE)."""
    value = b"" if entry is None else entry.SerializeToString(deterministic=True)
    return mpb.CatalogMutationPB(entry_type=mpb.TSERVER_STATE, entry_id=uuid, value=value)


def maintenance_write(uuid: str, enter: bool, now_us: int) -> mpb.CatalogWritePB:
    """The write that puts the server into maintenance mode (``enter``) or takes it out."""
    entry = mpb.SysTServerStateEntryPB(state=mpb.MAINTENANCE_MODE, timestamp_us=now_us) if enter else None
    return mpb.CatalogWritePB(mutations=[tserver_state_mutation(uuid, entry)])


def unregister_write(uuid: str) -> mpb.CatalogWritePB:
    """The write that unregisters the server: its state entry goes, and every master forgets it."""
    return mpb.CatalogWritePB(mutations=[tserver_state_mutation(uuid, None)], unregistered_tservers=[uuid])
