"""The synchronous, thread-safe client: the async client on a background event loop.

:class:`Client` starts one daemon thread running an event loop (uvloop when installed) and
an :class:`AsyncClient` on it.  Every synchronous method submits the matching coroutine to
that loop and waits for its result, so any number of threads may share one client: all
state is touched only by the loop thread, and calls from different threads run
concurrently on the loop.  ``Client.aio`` is the AsyncClient itself, for coroutines passed to
``Client.run``; calling a synchronous method from the loop thread (inside such a coroutine)
would deadlock and raises IllegalState instead.

Tables, sessions and scanners returned here are thin synchronous views of their async
counterparts and share the client's loop.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from nyala.common.hostport import HostPort
from nyala.errors import IllegalState
from nyala.rpc.loop import loop_factory
from nyala.schema import OpType, Partitioner, Schema

from .async_client import AsyncClient, ColumnLike, RangeLike
from .info import MasterInfo, TableSummary, TabletInfo, TabletServerInfo
from .meta_cache import TableInfo
from .operations import Operation, RowError, Rows, UnhandledRowErrors
from .options import ClientOptions
from .placement import PlacementLike, PlacementPolicy, RangePlacement
from .predicates import PredicateLike
from .scan_spec import ScanArgs
from .scanner import AsyncScanner, ScanToken
from .schemas import Partitioning
from .session import AsyncSession, FlushMode
from .table import AsyncTable

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Client", "Scanner", "Session", "Table", "connect"]

T = TypeVar("T")


class _LoopThread:
    """An event loop running forever on its own daemon thread."""

    def __init__(self) -> None:
        self.loop = loop_factory()()
        self._thread = threading.Thread(target=self._main, name="nyala-client-loop", daemon=True)
        self._stopped = False
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise IllegalState("a synchronous client method was called on the client's loop; await client.aio instead")
        if self._stopped:
            coro.close()
            raise IllegalState("the client is closed")
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # KeyboardInterrupt and the like: do not leave the call running
            raise

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join()


class Client:
    """A connection to a Nyala cluster; ``nyala.connect("host:7051,host2:7051")`` makes one."""

    def __init__(
        self,
        master_addresses: str | Sequence[str | HostPort],
        *,
        timeout_s: float | None = None,
        options: ClientOptions | None = None,
        ssl_context: ssl.SSLContext | None = None,
        master_read_staleness_ms: int | None = None,
        lazy: bool = False,
    ) -> None:
        self._runner = _LoopThread()
        try:
            self._aio = self._runner.run(
                AsyncClient.connect(
                    master_addresses,
                    timeout_s=timeout_s,
                    options=options,
                    ssl_context=ssl_context,
                    master_read_staleness_ms=master_read_staleness_ms,
                    lazy=lazy,
                )
            )
        except BaseException:
            self._runner.stop()
            raise

    @property
    def aio(self) -> AsyncClient:
        """The async client behind this one; its coroutines must run via :meth:`run`."""
        return self._aio

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the client's event loop and return its result."""
        return self._runner.run(coro)

    def close(self) -> None:
        """Close every connection and stop the background loop."""
        try:
            self._runner.run(self._aio.close())
        except IllegalState:
            pass  # already closed
        finally:
            self._runner.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def options(self) -> ClientOptions:
        return self._aio.options

    @property
    def master_addresses(self) -> list[str]:
        return self._aio.master_addresses

    @property
    def leader_master(self) -> str | None:
        return self._aio.leader_master

    @property
    def cluster_id(self) -> str:
        return self._aio.cluster_id

    @property
    def client_location(self) -> str:
        """This client's location as the leader master mapped it ("" without location mapping)."""
        return self._aio.client_location

    # --- DDL and listings ------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        schema: Schema | pa.Schema,
        partitioning: Partitioning | Partitioner | None = None,
        *,
        primary_key: Sequence[str] | str | None = None,
        num_replicas: int = 3,
        placement: PlacementLike | None = None,
        range_placements: Sequence[tuple[RangeLike, PlacementLike]] = (),
        wait: bool = True,
        timeout_s: float | None = None,
    ) -> Table:
        """Create a table; see :meth:`AsyncClient.create_table`."""
        table = self.run(
            self._aio.create_table(
                name,
                schema,
                partitioning,
                primary_key=primary_key,
                num_replicas=num_replicas,
                placement=placement,
                range_placements=range_placements,
                wait=wait,
                timeout_s=timeout_s,
            )
        )
        return Table(self, table)

    def delete_table(self, name: str, *, timeout_s: float | None = None) -> None:
        self.run(self._aio.delete_table(name, timeout_s=timeout_s))

    def alter_table(
        self,
        name: str,
        *,
        rename_to: str | None = None,
        add_columns: Sequence[ColumnLike] = (),
        drop_columns: Sequence[str] = (),
        rename_columns: dict[str, str] | None = None,
        add_range_partitions: Sequence[RangeLike] = (),
        drop_range_partitions: Sequence[RangeLike] = (),
        set_placement: PlacementLike | None = None,
        set_range_placements: Sequence[tuple[RangeLike, PlacementLike]] = (),
        wait: bool = True,
        timeout_s: float | None = None,
    ) -> int:
        """Alter a table; returns the new schema version.  See :meth:`AsyncClient.alter_table`."""
        return self.run(
            self._aio.alter_table(
                name,
                rename_to=rename_to,
                add_columns=add_columns,
                drop_columns=drop_columns,
                rename_columns=rename_columns,
                add_range_partitions=add_range_partitions,
                drop_range_partitions=drop_range_partitions,
                set_placement=set_placement,
                set_range_placements=set_range_placements,
                wait=wait,
                timeout_s=timeout_s,
            )
        )

    def open_table(self, name: str, *, timeout_s: float | None = None) -> Table:
        return Table(self, self.run(self._aio.open_table(name, timeout_s=timeout_s)))

    def table_exists(self, name: str, *, timeout_s: float | None = None) -> bool:
        return self.run(self._aio.table_exists(name, timeout_s=timeout_s))

    def list_tables(self, name_filter: str = "", *, timeout_s: float | None = None) -> list[str]:
        return self.run(self._aio.list_tables(name_filter, timeout_s=timeout_s))

    def list_table_summaries(self, name_filter: str = "", *, timeout_s: float | None = None) -> list[TableSummary]:
        return self.run(self._aio.list_table_summaries(name_filter, timeout_s=timeout_s))

    def table_tablets(self, name: str, *, timeout_s: float | None = None) -> list[TabletInfo]:
        return self.run(self._aio.table_tablets(name, timeout_s=timeout_s))

    def tablet_info(self, tablet_id: str, *, timeout_s: float | None = None) -> TabletInfo:
        return self.run(self._aio.tablet_info(tablet_id, timeout_s=timeout_s))

    def list_tablet_servers(self, *, timeout_s: float | None = None) -> list[TabletServerInfo]:
        return self.run(self._aio.list_tablet_servers(timeout_s=timeout_s))

    def list_masters(self, *, timeout_s: float | None = None) -> list[MasterInfo]:
        return self.run(self._aio.list_masters(timeout_s=timeout_s))

    def add_master(self, address: str, *, timeout_s: float | None = None) -> tuple[str, bool]:
        """Add the running master at ``address``; returns its uuid and whether it was a member already."""
        return self.run(self._aio.add_master(address, timeout_s=timeout_s))

    def remove_master(self, master: str, *, timeout_s: float | None = None) -> tuple[str, bool]:
        """Remove a master (host:port or uuid); returns its uuid and whether it was removed already."""
        return self.run(self._aio.remove_master(master, timeout_s=timeout_s))

    def change_tserver_state(self, uuid: str, *, maintenance: bool, timeout_s: float | None = None) -> bool:
        """Enter (``maintenance=True``) or exit maintenance mode; True when the state changed."""
        return self.run(self._aio.change_tserver_state(uuid, maintenance=maintenance, timeout_s=timeout_s))

    def unregister_tserver(self, uuid: str, *, force: bool = False, timeout_s: float | None = None) -> int:
        """Make every master forget a dead tablet server; returns the replicas it still held."""
        return self.run(self._aio.unregister_tserver(uuid, force=force, timeout_s=timeout_s))

    def rebalance_lease(self, holder: str, duration_s: float, *, timeout_s: float | None = None) -> bool:
        """Take, renew (or with 0, release) a lease that pauses the master's auto rebalancer;
        returns whether auto rebalancing is enabled at all."""
        return self.run(self._aio.rebalance_lease(holder, duration_s, timeout_s=timeout_s))

    def scanner_from_token(self, token: ScanToken) -> Scanner:
        """A scanner reading the one tablet of ``token`` (made by any client of the cluster)."""
        return Scanner(self, self.run(self._aio.scanner_from_token(token)))


class Table:
    """A table opened by a :class:`Client`."""

    def __init__(self, client: Client, table: AsyncTable) -> None:
        self._client = client
        self.aio = table

    def __repr__(self) -> str:
        return repr(self.aio)

    @property
    def info(self) -> TableInfo:
        return self.aio.info

    @property
    def name(self) -> str:
        return self.aio.name

    @property
    def id(self) -> str:
        return self.aio.id

    @property
    def schema(self) -> Schema:
        return self.aio.schema

    @property
    def partitioner(self) -> Partitioner:
        return self.aio.partitioner

    @property
    def num_replicas(self) -> int:
        return self.aio.num_replicas

    @property
    def placement(self) -> PlacementPolicy:
        return self.aio.placement

    @property
    def range_placements(self) -> tuple[RangePlacement, ...]:
        return self.aio.range_placements

    @property
    def schema_version(self) -> int:
        return self.aio.schema_version

    def refresh(self) -> None:
        self._client.run(self.aio.refresh())

    def tablets(self) -> list[TabletInfo]:
        return self._client.run(self.aio.tablets())

    def new_session(
        self,
        flush_mode: FlushMode = FlushMode.AUTO_FLUSH_SYNC,
        *,
        buffer_bytes: int | None = None,
        timeout_s: float | None = None,
    ) -> Session:
        return Session(self._client, self.aio.new_session(flush_mode, buffer_bytes=buffer_bytes, timeout_s=timeout_s))

    def new_insert(self, row: dict[str, Any]) -> Operation:
        return self.aio.new_insert(row)

    def new_insert_ignore(self, row: dict[str, Any]) -> Operation:
        return self.aio.new_insert_ignore(row)

    def new_upsert(self, row: dict[str, Any]) -> Operation:
        return self.aio.new_upsert(row)

    def new_upsert_ignore(self, row: dict[str, Any]) -> Operation:
        return self.aio.new_upsert_ignore(row)

    def new_update(self, row: dict[str, Any]) -> Operation:
        return self.aio.new_update(row)

    def new_update_ignore(self, row: dict[str, Any]) -> Operation:
        return self.aio.new_update_ignore(row)

    def new_delete(self, row: dict[str, Any]) -> Operation:
        return self.aio.new_delete(row)

    def new_delete_ignore(self, row: dict[str, Any]) -> Operation:
        return self.aio.new_delete_ignore(row)

    def write(self, op: OpType, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        """Apply ``op`` to every row (a dict, list of dicts or Arrow data); returns the row errors."""
        return self._client.run(self.aio.write(op, rows, timeout_s=timeout_s))

    def insert(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return self.write(OpType.INSERT, rows, timeout_s=timeout_s)

    def insert_ignore(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return self.write(OpType.INSERT_IGNORE, rows, timeout_s=timeout_s)

    def upsert(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return self.write(OpType.UPSERT, rows, timeout_s=timeout_s)

    def upsert_ignore(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return self.write(OpType.UPSERT_IGNORE, rows, timeout_s=timeout_s)

    def update(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return self.write(OpType.UPDATE, rows, timeout_s=timeout_s)

    def update_ignore(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return self.write(OpType.UPDATE_IGNORE, rows, timeout_s=timeout_s)

    def delete(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return self.write(OpType.DELETE, rows, timeout_s=timeout_s)

    def delete_ignore(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return self.write(OpType.DELETE_IGNORE, rows, timeout_s=timeout_s)

    def scanner(
        self, columns: Sequence[str] | None = None, predicates: Sequence[PredicateLike] = (), **kwargs: Unpack[ScanArgs]
    ) -> Scanner:
        """A scanner; the keyword arguments are described by :class:`nyala.client.ScanArgs`."""
        return Scanner(self._client, self.aio.scanner(columns, predicates, **kwargs))

    def scan_tokens(
        self, columns: Sequence[str] | None = None, predicates: Sequence[PredicateLike] = (), **kwargs: Unpack[ScanArgs]
    ) -> list[ScanToken]:
        """One serializable token per tablet the scan would read."""
        return self._client.run(self.aio.scan_tokens(columns, predicates, **kwargs))

    def to_arrow(
        self, columns: Sequence[str] | None = None, predicates: Sequence[PredicateLike] = (), **kwargs: Unpack[ScanArgs]
    ) -> pa.Table:
        return self.scanner(columns, predicates, **kwargs).to_arrow()

    def count(self, predicates: Sequence[PredicateLike] = (), **kwargs: Unpack[ScanArgs]) -> int:
        return self._client.run(self.aio.count(predicates, **kwargs))


class Session:
    """A write session; see :class:`nyala.client.AsyncSession` for the flush modes."""

    def __init__(self, client: Client, session: AsyncSession) -> None:
        self._client = client
        self.aio = session

    @property
    def table_name(self) -> str:
        return self.aio.table_name

    @property
    def flush_mode(self) -> FlushMode:
        return self.aio.flush_mode

    @property
    def buffer_bytes(self) -> int:
        return self.aio.buffer_bytes

    @property
    def timeout_s(self) -> float:
        return self.aio.timeout_s

    @property
    def dropped_errors(self) -> int:
        return self.aio.dropped_errors

    @property
    def buffered_bytes(self) -> int:
        return self.aio.buffered_bytes

    @property
    def closed(self) -> bool:
        return self.aio.closed

    def apply(self, *operations: Operation) -> list[RowError]:
        return self._client.run(self.aio.apply(*operations))

    def write(self, op: OpType, rows: Rows) -> list[RowError]:
        return self._client.run(self.aio.write(op, rows))

    def insert(self, rows: Rows) -> list[RowError]:
        return self.write(OpType.INSERT, rows)

    def insert_ignore(self, rows: Rows) -> list[RowError]:
        return self.write(OpType.INSERT_IGNORE, rows)

    def upsert(self, rows: Rows) -> list[RowError]:
        return self.write(OpType.UPSERT, rows)

    def upsert_ignore(self, rows: Rows) -> list[RowError]:
        return self.write(OpType.UPSERT_IGNORE, rows)

    def update(self, rows: Rows) -> list[RowError]:
        return self.write(OpType.UPDATE, rows)

    def update_ignore(self, rows: Rows) -> list[RowError]:
        return self.write(OpType.UPDATE_IGNORE, rows)

    def delete(self, rows: Rows) -> list[RowError]:
        return self.write(OpType.DELETE, rows)

    def delete_ignore(self, rows: Rows) -> list[RowError]:
        return self.write(OpType.DELETE_IGNORE, rows)

    def flush(self) -> list[RowError]:
        return self._client.run(self.aio.flush())

    def close(self) -> list[RowError]:
        return self._client.run(self.aio.close())

    def pending_errors(self) -> list[RowError]:
        return self._client.run(_call(self.aio.pending_errors))

    def count_pending_errors(self) -> int:
        return self._client.run(_call(self.aio.count_pending_errors))

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        errors = self.close()
        dropped = self.aio.dropped_errors
        if exc is None and (errors or dropped):
            raise UnhandledRowErrors(errors, dropped)


class Scanner:
    """Reads matching rows: iterate for RecordBatches, or ``to_arrow()`` / ``to_pandas()`` / ``count()``."""

    def __init__(self, client: Client, scanner: AsyncScanner) -> None:
        self._client = client
        self.aio = scanner

    @property
    def schema(self) -> pa.Schema:
        return self.aio.schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self.batches()

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Every matching row as RecordBatches, tablet after tablet."""
        batches = self.aio.batches()
        try:
            while True:
                try:
                    batch = self._client.run(_next(batches))
                except StopAsyncIteration:
                    return
                yield batch
        finally:
            self._client.run(batches.aclose())

    def to_arrow(self) -> pa.Table:
        return self._client.run(self.aio.to_arrow())

    def to_pandas(self) -> Any:
        return self._client.run(self.aio.to_pandas())

    def count(self) -> int:
        return self._client.run(self.aio.count())

    def close(self) -> None:
        self._client.run(self.aio.close())

    def __enter__(self) -> Scanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _next(batches: AsyncIterator[pa.RecordBatch]) -> pa.RecordBatch:
    return await batches.__anext__()


async def _call(function: Callable[[], T]) -> T:
    return function()


def connect(
    master_addresses: str | Sequence[str | HostPort],
    *,
    timeout_s: float | None = None,
    options: ClientOptions | None = None,
    ssl_context: ssl.SSLContext | None = None,
    master_read_staleness_ms: int | None = None,
    lazy: bool = False,
) -> Client:
    """Connect to the cluster whose masters are ``master_addresses`` ("h1:7051,h2:7051" or a list).

    Returns once the leader master is found; raises TimedOut naming every master's answer if
    none leads within ``timeout_s`` (default: the admin operation timeout, 30 s).
    ``master_read_staleness_ms`` > 0 spreads catalog reads over every master whose catalog is
    provably at most that old (follower reads); 0 (the default) reads from the leader only.
    ``lazy=True`` returns at once and looks for the leader at the first master call: a client
    that only reads scan tokens (which carry the table and its replicas) never calls one.
    """
    return Client(
        master_addresses,
        timeout_s=timeout_s,
        options=options,
        ssl_context=ssl_context,
        master_read_staleness_ms=master_read_staleness_ms,
        lazy=lazy,
    )
