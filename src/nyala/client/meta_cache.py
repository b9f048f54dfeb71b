"""The client's cache of table schemas and tablet locations.

Tables are cached by id (and their name mapped to the id) with their schema, partitioner and
schema version, as GetTableSchema returns them.  A table entry lives until something shows
it is stale: a write refused for an old schema version, a partition that no tablet covers,
or an explicit refresh after an ALTER from this client.

Tablet locations are cached per table as one sorted list of tablets by partition key,
fetched page by page with GetTableLocations and kept for the ``ttl_millis`` the master gives
(Kudu's 5 minutes).  Lookups of a partition key are a binary search.  The leader of a tablet
is updated in place when a tablet server names a new one; a failure that the cache cannot
explain (an unknown leader, a replica that no longer hosts the tablet) drops the table's
locations so that the next lookup asks the master again.  Concurrent refreshes of one table
share one request.

Tablet servers met in any response are remembered by uuid (address and location), so that
a leader hint (a uuid) can be followed without asking the master.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

from nyala.common.hostport import HostPort, parse_address
from nyala.errors import InvalidArgument, NotFound
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.schema import Partition, Partitioner, Schema
from nyala.services import GET_TABLE_LOCATIONS, GET_TABLE_SCHEMA

from ._retry import Deadline
from .masters import MasterProxy
from .options import ClientOptions
from .placement import NO_POLICY, PlacementPolicy, RangePlacement

__all__ = ["MetaCache", "ServerInfo", "TableInfo", "TableLocations", "TabletLocation", "table_info_from_pb"]

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class ServerInfo:
    """A tablet server as clients see it."""

    uuid: str
    address: HostPort | None
    location: str


@dataclasses.dataclass(frozen=True, slots=True)
class TableInfo:
    """A table's identity and shape at one schema version."""

    id: str
    name: str
    schema: Schema
    partitioner: Partitioner
    schema_version: int
    num_replicas: int
    placement: PlacementPolicy = NO_POLICY
    range_placements: tuple[RangePlacement, ...] = ()


@dataclasses.dataclass(slots=True)
class TabletLocation:
    """One tablet: its partition and replicas; ``leader_uuid`` is the client's best guess."""

    tablet_id: str
    partition: Partition
    replicas: tuple[tuple[str, int], ...]  # (server uuid, RaftRolePB)
    leader_uuid: str

    @property
    def replica_uuids(self) -> list[str]:
        return [uuid for uuid, _ in self.replicas]


@dataclasses.dataclass(slots=True)
class TableLocations:
    """Every tablet of one table, in partition-key order, valid until ``expires_at``."""

    tablets: list[TabletLocation]
    expires_at: float
    starts: list[bytes] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.tablets.sort(key=lambda t: t.partition.partition_key_start)
        self.starts = [t.partition.partition_key_start for t in self.tablets]

    def find(self, partition_key: bytes) -> TabletLocation | None:
        i = bisect.bisect_right(self.starts, partition_key) - 1
        if i >= 0 and self.tablets[i].partition.contains_key(partition_key):
            return self.tablets[i]
        return None

    def by_id(self, tablet_id: str) -> TabletLocation | None:
        return next((t for t in self.tablets if t.tablet_id == tablet_id), None)


class MetaCache:
    """Schemas and tablet locations of the tables this client uses."""

    def __init__(self, masters: MasterProxy, options: ClientOptions) -> None:
        self._masters = masters
        self._options = options
        self.servers: dict[str, ServerInfo] = {}
        self._tables: dict[str, TableInfo] = {}
        self._ids_by_name: dict[str, str] = {}
        self._locations: dict[str, TableLocations] = {}
        self._inflight: dict[tuple[str, str], asyncio.Future[object]] = {}

    # --- tables ----------------------------------------------------------------------------

    def cached_table(self, table_id: str) -> TableInfo | None:
        return self._tables.get(table_id)

    async def table(
        self, deadline: Deadline, *, name: str = "", table_id: str = "", refresh: bool = False
    ) -> TableInfo:
        """The table named ``name`` (or with ``table_id``); NotFound when there is none."""
        if not name and not table_id:
            raise InvalidArgument("a table name is needed")
        cached_id = table_id or self._ids_by_name.get(name, "")
        if not refresh and cached_id in self._tables:
            return self._tables[cached_id]
        key = table_id or f"name:{name}"
        return await self._shared(("table", key), lambda: self._fetch_table(name, table_id, deadline))

    async def _fetch_table(self, name: str, table_id: str, deadline: Deadline) -> TableInfo:
        request = mpb.GetTableSchemaRequestPB(table=common_pb2.TableIdentifierPB(table_id=table_id, table_name=name))
        try:
            response = await self._masters.read(GET_TABLE_SCHEMA, request, deadline)
        except NotFound:
            self.forget_table(name=name, table_id=table_id)
            raise
        info = table_info_from_pb(response)
        old = self._tables.get(info.id)
        if old is not None and old.name != info.name:
            self._ids_by_name.pop(old.name, None)
        if old is not None and old.partitioner.ranges != info.partitioner.ranges:
            self._locations.pop(info.id, None)  # tablets were added or dropped
        if name and name != info.name:
            self._ids_by_name.pop(name, None)
        self._tables[info.id] = info
        self._ids_by_name[info.name] = info.id
        return info

    def forget_table(self, *, name: str = "", table_id: str = "") -> None:
        table_id = table_id or self._ids_by_name.get(name, "")
        info = self._tables.pop(table_id, None)
        self._ids_by_name.pop(name, None)
        if info is not None:
            self._ids_by_name.pop(info.name, None)
        self._locations.pop(table_id, None)

    # --- locations -------------------------------------------------------------------------

    async def locations(self, table: TableInfo, deadline: Deadline, *, refresh: bool = False) -> TableLocations:
        cached = self._locations.get(table.id)
        now = asyncio.get_running_loop().time()
        if not refresh and cached is not None and now < cached.expires_at:
            return cached
        return await self._shared(("locations", table.id), lambda: self._fetch_locations(table, deadline))

    async def tablet_for_key(self, table: TableInfo, partition_key: bytes, deadline: Deadline) -> TabletLocation:
        """The tablet whose partition holds ``partition_key``; one refresh before NotFound."""
        found = (await self.locations(table, deadline)).find(partition_key)
        if found is None:
            found = (await self.locations(table, deadline, refresh=True)).find(partition_key)
        if found is None:
            raise NotFound(f"table {table.name!r} has no tablet for partition key {partition_key.hex()}")
        return found

    def invalidate_locations(self, table_id: str) -> None:
        self._locations.pop(table_id, None)

    async def _fetch_locations(self, table: TableInfo, deadline: Deadline) -> TableLocations:
        tablets: dict[str, TabletLocation] = {}
        cursor = b""
        ttl_ms = 300_000
        batch = self._options.locations_fetch_batch
        while True:
            request = mpb.GetTableLocationsRequestPB(
                table=common_pb2.TableIdentifierPB(table_id=table.id),
                partition_key_start=cursor,
                max_returned_locations=batch,
            )
            try:
                response = await self._masters.read(GET_TABLE_LOCATIONS, request, deadline)
            except NotFound:
                self.forget_table(table_id=table.id)
                raise
            ttl_ms = response.ttl_millis or ttl_ms
            page = self._read_locations(response)
            tablets.update((t.tablet_id, t) for t in page)
            if len(page) < batch:
                break
            last_end = max(page, key=lambda t: t.partition.partition_key_start).partition.partition_key_end
            if not last_end or last_end <= cursor:
                break
            cursor = last_end
        expires = asyncio.get_running_loop().time() + ttl_ms / 1000
        locations = TableLocations(list(tablets.values()), expires)
        self._locations[table.id] = locations
        return locations

    def _read_locations(self, response: mpb.GetTableLocationsResponsePB) -> list[TabletLocation]:
        uuids = [self._learn_server(ts) for ts in response.ts_infos]
        out = []
        for pb in response.tablet_locations:
            partition = Partition.from_dict(_json_object(pb.partition, "tablet partition"))
            replicas = []
            for r in pb.replicas:
                if not 0 <= r.ts_info_idx < len(uuids):
                    raise InvalidArgument(f"tablet {pb.tablet_id}: replica refers to unknown ts_info {r.ts_info_idx}")
                replicas.append((uuids[r.ts_info_idx], int(r.role)))
            leader = next((u for u, role in replicas if role == common_pb2.LEADER), "")
            out.append(TabletLocation(pb.tablet_id, partition, tuple(replicas), leader))
        return out

    def remember_server(self, uuid: str, address: str, location: str) -> None:
        """A server's address from elsewhere (a scan token); what the master said stays."""
        if uuid in self.servers or not address:
            return
        self.servers[uuid] = ServerInfo(uuid, parse_address(address), location)

    def _learn_server(self, ts: common_pb2.TSInfoPB) -> str:
        address = None
        if ts.rpc_addresses:
            first = ts.rpc_addresses[0]
            address = parse_address((first.host, first.port))
        self.servers[ts.permanent_uuid] = ServerInfo(ts.permanent_uuid, address, ts.location)
        return ts.permanent_uuid

    async def _shared(self, key: tuple[str, str], fetch: Callable[[], Awaitable[T]]) -> T:
        """Run ``fetch`` once for concurrent callers with the same key."""
        future = self._inflight.get(key)
        if future is None:
            task: asyncio.Future[T] = asyncio.ensure_future(fetch())
            self._inflight[key] = cast("asyncio.Future[object]", task)
            task.add_done_callback(lambda f: self._done(key, cast("asyncio.Future[object]", f)))
            return await asyncio.shield(task)
        return cast(T, await asyncio.shield(future))

    def _done(self, key: tuple[str, str], future: asyncio.Future[object]) -> None:
        if self._inflight.get(key) is future:
            del self._inflight[key]
        if not future.cancelled():
            future.exception()  # consumed: waiters got it, or nobody is left to care


def table_info_from_pb(response: mpb.GetTableSchemaResponsePB) -> TableInfo:
    """A TableInfo from the master's answer, validating the JSON it carries."""
    schema = Schema.from_json(response.schema)
    partitioner = Partitioner.from_json(response.partitioner)
    if partitioner.schema.key_names != schema.key_names:
        raise InvalidArgument(f"table {response.table_name!r}: partitioner and schema disagree on the primary key")
    # The partitioner's schema is the one it was created with; rows are mapped with the current one.
    partitioner = Partitioner(schema, partitioner.partition_schema, partitioner.ranges)
    return TableInfo(
        id=response.table_id,
        name=response.table_name,
        schema=schema,
        partitioner=partitioner,
        schema_version=response.schema_version,
        num_replicas=response.num_replicas,
        placement=PlacementPolicy.from_pb(response.placement),
        range_placements=tuple(
            RangePlacement(r.shown, r.lower, r.upper, PlacementPolicy.from_pb(r.policy))
            for r in response.range_placements
        ),
    )


def _json_object(data: bytes, what: str) -> dict[str, object]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} must be a JSON object")
    return value
