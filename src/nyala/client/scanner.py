"""Scanners over a whole table, and scan tokens: one picklable description per tablet.

A scanner first prunes: the Partitioner keeps only the partitions whose hash buckets and
range can hold rows matching the predicates and key range, and the tablets of those
partitions are read, in partition-key order, each by a :class:`TabletScan`.

- Iterating yields pyarrow RecordBatches tablet after tablet, fetching the next batch of a
  tablet while the caller works on the current one.
- ``to_arrow()`` reads up to ``scan_parallelism`` tablets at once (without a limit) and
  concatenates them in tablet order; with a limit, tablets are read one after another until
  it is reached.
- ``count()`` asks for the narrowest projection and adds up the servers' row counts.

Rows within a tablet come in primary-key order only when ``ordered=True``; tablets follow each
other in partition-key order, so an ordered scan of a range-only table is globally ordered,
and one of a hash-partitioned table is ordered per tablet (as in Kudu).

A :class:`ScanToken` holds everything needed to read one tablet elsewhere (another thread,
process or machine): the master addresses, the table id, the tablet, the bound scan as JSON,
the replicas with their addresses (for locality), the minimum Raft index a READ_YOUR_WRITES
read must see and, as Kudu's tokens do with table and tablet metadata, the table's schema and
partitioning: a client opening a scanner from a token therefore asks the master nothing
(:meth:`ScanToken.table_info`, :meth:`ScanToken.tablet_location`) unless every carried replica
fails or the schema changed, when the scan asks the master as any scan does.
``serialize()``/``deserialize()`` turn it into bytes; it also pickles.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import pyarrow as pa

from nyala.errors import InvalidArgument, NotFound, ServiceUnavailable, TimedOut
from nyala.proto import common_pb2
from nyala.schema import Partition, Partitioner, Schema

from ._context import ClientContext
from ._retry import Backoff, Deadline
from .info import role_name
from .meta_cache import TableInfo, TabletLocation
from .scan_spec import ScanSpec
from .tablet_scan import TabletScan

__all__ = ["AsyncScanner", "ScanToken", "make_scan_tokens"]


class AsyncScanner:
    """Reads the tablets of one table that a scan can match (use on the client's event loop)."""

    def __init__(
        self,
        ctx: ClientContext,
        table: TableInfo,
        spec: ScanSpec,
        *,
        tablet_id: str = "",
        min_applied_index: int = 0,
        tablet: TabletLocation | None = None,
    ) -> None:
        self._ctx = ctx
        self.table = table
        self.spec = spec
        self._tablet_id = tablet.tablet_id if tablet is not None else tablet_id
        #: The one tablet to read, located already (from a scan token): no master lookup.
        self._tablet = tablet
        self._min_applied_index = min_applied_index
        self._open: set[TabletScan] = set()
        self._closed = False

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the rows this scanner returns."""
        return self.spec.arrow_schema(self.table.schema)

    async def tablets(self) -> list[TabletLocation]:
        """The tablets this scan reads, after pruning, in partition-key order."""
        deadline = Deadline(self.spec.timeout_s, f"locating the tablets of {self.table.name!r}")
        if self._tablet is not None:
            return [self._tablet]
        if self._tablet_id:
            return [await self._tablet_by_id(deadline)]
        backoff = Backoff(self._ctx.options, self._ctx.rng)
        refresh = False
        while True:
            try:
                wanted, by_partition = await self._locate(deadline, refresh)
            except TimedOut:
                if backoff.last_error is None:
                    raise
                raise deadline.timed_out(backoff.last_error, backoff.attempts) from None
            missing = [p for p in wanted if p not in by_partition]
            if not missing:
                return [by_partition[p] for p in wanted]
            # Never skip a tablet silently: one that is still being created is waited for.
            waiting = ServiceUnavailable(f"{len(missing)} tablets of {self.table.name!r} have no location yet")
            await backoff.wait(deadline, waiting)
            refresh = True

    async def _locate(
        self, deadline: Deadline, refresh: bool
    ) -> tuple[list[Partition], dict[Partition, TabletLocation]]:
        """The partitions to read and the tablets located so far, by partition."""
        locations = await self._ctx.meta.locations(self.table, deadline, refresh=refresh)
        if not {t.partition for t in locations.tablets} <= set(self.table.partitioner.partitions):
            # A partition the client does not know: the table's ranges changed; learn them.
            self.table = await self._ctx.meta.table(deadline, table_id=self.table.id, refresh=True)
            locations = await self._ctx.meta.locations(self.table, deadline, refresh=True)
        wanted = self.table.partitioner.prune(self.spec.predicates, self.spec.key_range)
        return wanted, {t.partition: t for t in locations.tablets}

    async def _tablet_by_id(self, deadline: Deadline) -> TabletLocation:
        for refresh in (False, True):
            found = (await self._ctx.meta.locations(self.table, deadline, refresh=refresh)).by_id(self._tablet_id)
            if found is not None:
                return found
        raise NotFound(f"tablet {self._tablet_id} of table {self.table.name!r} no longer exists")

    def _stream(self, tablet: TabletLocation, limit: int | None, count_only: bool = False) -> TabletScan:
        spec = self.spec if limit == self.spec.limit else dataclasses.replace(self.spec, limit=limit)
        scan = TabletScan(
            self._ctx, self.table, tablet, spec, count_only=count_only, min_applied_index=self._min_applied_index
        )
        self._open.add(scan)
        return scan

    def _finish(self, scan: TabletScan) -> None:
        scan.close_soon()
        self._open.discard(scan)

    # --- reading -------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[pa.RecordBatch]:
        return self.batches()

    async def batches(self) -> AsyncGenerator[pa.RecordBatch, None]:
        """Every matching row as RecordBatches, tablet after tablet."""
        self._check_open()
        remaining = self.spec.limit
        target = self.schema
        for tablet in await self.tablets():
            if remaining == 0:
                break
            scan = self._stream(tablet, remaining)
            try:
                pending = asyncio.ensure_future(scan.next())
                while True:
                    table, _ = await pending
                    if table is None and scan.done:
                        break
                    pending = asyncio.ensure_future(scan.next())  # fetch ahead while the caller works
                    if table is None:
                        continue
                    table = _trim(table, remaining)
                    remaining = None if remaining is None else remaining - table.num_rows
                    for batch in _conform(table, target).to_batches():
                        yield batch
                    if remaining == 0:
                        break
            finally:
                if not pending.done():
                    pending.cancel()
                self._finish(scan)

    async def to_arrow(self) -> pa.Table:
        """Every matching row as one Arrow table (tablets in partition-key order)."""
        self._check_open()
        target = self.schema
        if self.spec.limit is not None:
            return _concat([b async for b in self.batches()], target)
        tablets = await self.tablets()
        gate = asyncio.Semaphore(self._ctx.options.scan_parallelism)

        async def read(tablet: TabletLocation) -> list[pa.Table]:
            async with gate:
                scan = self._stream(tablet, None)
                parts = []
                try:
                    while True:
                        table, _ = await scan.next()
                        if table is not None:
                            parts.append(_conform(table, target))
                        elif scan.done:
                            return parts
                finally:
                    self._finish(scan)

        results = await asyncio.gather(*(read(t) for t in tablets))
        return _concat([b for parts in results for part in parts for b in part.to_batches()], target)

    async def to_pandas(self) -> Any:
        """Every matching row as a pandas DataFrame (pandas must be installed)."""
        table = await self.to_arrow()
        try:
            return table.to_pandas()
        except ImportError as exc:
            raise ImportError("Scanner.to_pandas() needs pandas: pip install pandas") from exc

    async def count(self) -> int:
        """How many rows match (the rows themselves stay on the servers' side of the wire, mostly)."""
        self._check_open()
        tablets = await self.tablets()
        gate = asyncio.Semaphore(self._ctx.options.scan_parallelism)

        async def count_one(tablet: TabletLocation) -> int:
            async with gate:
                scan = self._stream(tablet, self.spec.limit, count_only=True)
                total = 0
                try:
                    while not scan.done:
                        total += (await scan.next())[1]
                    return total
                finally:
                    self._finish(scan)

        total = sum(await asyncio.gather(*(count_one(t) for t in tablets)))
        return total if self.spec.limit is None else min(total, self.spec.limit)

    async def close(self) -> None:
        """Release every server-side scanner still open."""
        self._closed = True
        for scan in list(self._open):
            self._finish(scan)

    async def __aenter__(self) -> AsyncScanner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgument("the scanner is closed")


def _trim(table: pa.Table, remaining: int | None) -> pa.Table:
    return table if remaining is None or table.num_rows <= remaining else table.slice(0, remaining)


def _conform(table: pa.Table, target: pa.Schema) -> pa.Table:
    """Give server batches the client's view of the schema when only nullability differs."""
    if table.schema.equals(target):
        return table
    if table.schema.names == target.names and all(a.type == b.type for a, b in zip(table.schema, target, strict=True)):
        return pa.Table.from_arrays(table.columns, schema=target)
    return table  # the table changed under the scan (ALTER): return what the server sent


def _concat(batches: Sequence[pa.RecordBatch], target: pa.Schema) -> pa.Table:
    if not batches:
        return target.empty_table()
    schemas = {b.schema for b in batches}
    if len(schemas) == 1:
        return pa.Table.from_batches(batches)
    return pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="permissive")


@dataclasses.dataclass(frozen=True, slots=True)
class ScanToken:
    """A scan of one tablet that can be executed by any client of the cluster."""

    master_addresses: tuple[str, ...]
    table_id: str
    table_name: str
    tablet_id: str
    #: ``Partition.to_dict()`` of the tablet.
    partition: dict[str, Any]
    #: The bound scan (``ScanSpec.to_dict``), read against the table's schema when executed.
    spec: dict[str, Any]
    #: (uuid, rpc address, location, role) of every replica when the token was made.
    replicas: tuple[tuple[str, str, str, str], ...]
    #: READ_YOUR_WRITES: the Raft index the reading replica must have applied.
    min_applied_index: int = 0
    #: The table's schema and partitioning when the token was made (Kudu's table metadata in
    #: a token): ``schema`` and ``partitioner`` as JSON text, ``schema_version``,
    #: ``num_replicas``. None in tokens of older clients: the table is then looked up.
    table_metadata: dict[str, Any] | None = None

    def table_info(self) -> TableInfo | None:
        """The table as the token carries it, or None when it carries no metadata."""
        meta = self.table_metadata
        if meta is None:
            return None
        try:
            schema = Schema.from_json(meta["schema"])
            partitioner = Partitioner.from_json(str(meta["partitioner"]).encode())
            return TableInfo(
                id=self.table_id,
                name=self.table_name,
                schema=schema,
                partitioner=Partitioner(schema, partitioner.partition_schema, partitioner.ranges),
                schema_version=int(meta["schema_version"]),
                num_replicas=int(meta["num_replicas"]),
            )
        except (KeyError, TypeError, ValueError, InvalidArgument) as exc:
            raise InvalidArgument(
                f"scan token of table {self.table_name!r} has malformed table metadata: {exc}"
            ) from None

    def tablet_location(self) -> TabletLocation:
        """The tablet and its replicas as the token carries them (the leader as it was then)."""
        replicas = tuple((uuid, _role_value(role)) for uuid, _address, _location, role in self.replicas)
        leader = next((uuid for uuid, _a, _l, role in self.replicas if role == "LEADER"), "")
        return TabletLocation(self.tablet_id, Partition.from_dict(self.partition), replicas, leader)

    @property
    def preferred_hosts(self) -> list[str]:
        """Hosts holding a replica (only the leader's under LEADER_ONLY), for task placement."""
        leader_only = self.spec.get("replica_selection") == "LEADER_ONLY"
        hosts = [addr.rsplit(":", 1)[0] for _, addr, _, role in self.replicas if not leader_only or role == "LEADER"]
        return list(dict.fromkeys(h.strip("[]") for h in hosts if h))

    def serialize(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def deserialize(cls, data: bytes | str) -> ScanToken:
        try:
            d = json.loads(data)
            return cls(
                master_addresses=tuple(d["master_addresses"]),
                table_id=str(d["table_id"]),
                table_name=str(d["table_name"]),
                tablet_id=str(d["tablet_id"]),
                partition=dict(d["partition"]),
                spec=dict(d["spec"]),
                replicas=tuple(tuple(r) for r in d["replicas"]),
                min_applied_index=int(d.get("min_applied_index", 0)),
                table_metadata=None if d.get("table_metadata") is None else dict(d["table_metadata"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgument(f"not a serialized scan token: {exc}") from None


async def make_scan_tokens(scanner: AsyncScanner, master_addresses: Sequence[str]) -> list[ScanToken]:
    """One token per tablet the scanner would read."""
    ctx = scanner._ctx
    tokens = []
    metadata = _table_metadata(scanner.table)
    for tablet in await scanner.tablets():
        replicas = []
        for uuid, role in tablet.replicas:
            server = ctx.meta.servers.get(uuid)
            address = str(server.address) if server is not None and server.address is not None else ""
            if uuid == tablet.leader_uuid:
                role_text = "LEADER"
            else:
                role_text = "FOLLOWER" if role == common_pb2.LEADER else role_name(role)
            replicas.append((uuid, address, server.location if server is not None else "", role_text))
        tokens.append(
            ScanToken(
                master_addresses=tuple(master_addresses),
                table_id=scanner.table.id,
                table_name=scanner.table.name,
                tablet_id=tablet.tablet_id,
                partition=tablet.partition.to_dict(),
                spec=scanner.spec.to_dict(scanner.table.schema),
                replicas=tuple(replicas),
                min_applied_index=ctx.op_indices.get(tablet.tablet_id, 0),
                table_metadata=metadata,
            )
        )
    return tokens


def _table_metadata(table: TableInfo) -> dict[str, Any]:
    return {
        "schema": table.schema.to_json().decode(),
        "partitioner": table.partitioner.to_json().decode(),
        "schema_version": table.schema_version,
        "num_replicas": table.num_replicas,
    }


def _role_value(role: str) -> int:
    """The RaftRolePB value of a role name; an unknown name reads as a follower's."""
    try:
        return int(common_pb2.RaftRolePB.Value(role))
    except ValueError:
        return int(common_pb2.FOLLOWER)
