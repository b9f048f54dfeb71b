"""What the write and scan paths share: one client's connections, caches and settings."""

from __future__ import annotations

import dataclasses
import random

from nyala.common.hostport import HostPort
from nyala.rpc import Messenger

from ._requests import RequestTracker
from .masters import MasterProxy
from .meta_cache import MetaCache
from .options import ClientOptions
from .write_batcher import WriteBatcher

__all__ = ["ClientContext"]


@dataclasses.dataclass(slots=True)
class ClientContext:
    """The internals of one client, used only on its event loop."""

    messenger: Messenger
    masters: MasterProxy
    meta: MetaCache
    options: ClientOptions
    rng: random.Random
    #: Per-client salt of CLOSEST_REPLICA's stable random order.
    salt: int
    local_hosts: frozenset[str] = frozenset()
    #: Highest Raft index of an acknowledged write per tablet (READ_YOUR_WRITES).
    op_indices: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Request ids of writes (exactly-once retries).
    requests: RequestTracker = dataclasses.field(default_factory=RequestTracker)
    #: Batches small writes to one tablet into one Write (made by the write path on first use).
    write_batcher: WriteBatcher | None = None

    def note_write(self, tablet_id: str, op_index: int) -> None:
        if op_index > self.op_indices.get(tablet_id, 0):
            self.op_indices[tablet_id] = op_index

    def server_address(self, uuid: str) -> HostPort | None:
        server = self.meta.servers.get(uuid)
        return server.address if server is not None else None
