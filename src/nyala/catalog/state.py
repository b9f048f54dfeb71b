"""The in-memory catalog: every table and tablet entry, with the lookups the master serves from.

A :class:`CatalogState` is the fold of every committed ``CatalogWritePB``.  The leader master
builds one by applying the whole sys catalog as one write (a rebuild after an election) and
then applies each write it replicates, after replication succeeds (seed 002's commit step).
:meth:`CatalogState.apply` decodes every mutation before it changes anything, so a write that
does not decode leaves the state as it was.

Kept per seed 002: tables by id (removed ones too, as tombstones), tables by name (removed ones
omitted, so a new table may reuse the name), tablets by id (deleted ones too), and per table
its tablets in partition-key order; the tablet servers' states (maintenance mode) by uuid; and
the masters' address book by uuid (removed masters too, marked so).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from google.protobuf.message import DecodeError

from nyala.catalog.entries import TableInfo, TabletInfo
from nyala.errors import Corruption, NotFound
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb

__all__ = ["CatalogState", "state_from_entries"]


class CatalogState:
    """Tables, tablets, tablet-server states and the cluster id, indexed for the master's requests."""

    def __init__(self) -> None:
        self.cluster_id = ""
        self._tables: dict[str, TableInfo] = {}
        self._by_name: dict[str, str] = {}
        self._tablets: dict[str, TabletInfo] = {}
        # Per table: its tablets (deleted ones too) sorted by partition key start, and beside
        # them their sort keys (partition key start, tablet id), to find a key by bisection.
        self._table_tablets: dict[str, list[TabletInfo]] = {}
        self._table_keys: dict[str, list[tuple[bytes, str]]] = {}
        # Tablet server uuid -> its state entry; servers in NONE have none.
        self._tserver_states: dict[str, mpb.SysTServerStateEntryPB] = {}
        #: Master uuid -> its address book entry (removed masters stay, marked removed).
        self.masters: dict[str, mpb.SysMasterEntryPB] = {}

    # -- applying writes ------------------------------------------------------------------

    def apply(self, write: mpb.CatalogWritePB) -> None:
        """Apply one committed write: decode all of it first, then change the maps."""
        decoded = [_decode(m) for m in write.mutations]
        for kind, key, value in decoded:
            if kind == mpb.TABLETS_ENTRY:
                assert value is None or isinstance(value, TabletInfo)
                self._put_tablet(key, value)
        for kind, key, value in decoded:
            if kind == mpb.TABLES_ENTRY:
                assert value is None or isinstance(value, TableInfo)
                self._put_table(key, value)
            elif kind == mpb.CLUSTER_ID:
                assert value is None or isinstance(value, str)
                self.cluster_id = value or ""
            elif kind == mpb.TSERVER_STATE:
                assert value is None or isinstance(value, mpb.SysTServerStateEntryPB)
                if value is None or value.state == mpb.NONE:
                    self._tserver_states.pop(key, None)
                else:
                    self._tserver_states[key] = value
            elif kind == mpb.MASTER_ENTRY:
                assert value is None or isinstance(value, mpb.SysMasterEntryPB)
                if value is None:
                    self.masters.pop(key, None)
                else:
                    self.masters[key] = value

    def _put_table(self, table_id: str, info: TableInfo | None) -> None:
        old = self._tables.pop(table_id, None)
        if old is not None and self._by_name.get(old.name) == table_id:
            del self._by_name[old.name]
        if info is None:
            return
        self._tables[table_id] = info
        if not info.removed:
            holder = self._by_name.get(info.name)
            if holder is not None and holder != table_id:
                raise AssertionError(f"two live tables named {info.name!r}: {holder} and {table_id}")
            self._by_name[info.name] = table_id

    def _put_tablet(self, tablet_id: str, info: TabletInfo | None) -> None:
        old = self._tablets.pop(tablet_id, None)
        if old is not None:
            siblings, keys = self._table_tablets[old.table_id], self._table_keys[old.table_id]
            i = bisect.bisect_left(keys, _sort_key(old))
            del siblings[i], keys[i]
            if not siblings:
                del self._table_tablets[old.table_id], self._table_keys[old.table_id]
        if info is None:
            return
        self._tablets[tablet_id] = info
        siblings = self._table_tablets.setdefault(info.table_id, [])
        keys = self._table_keys.setdefault(info.table_id, [])
        i = bisect.bisect_left(keys, _sort_key(info))
        siblings.insert(i, info)
        keys.insert(i, _sort_key(info))

    # -- tables -------------------------------------------------------------------------

    def table(self, table_id: str) -> TableInfo | None:
        """The table with this id, removed or not."""
        return self._tables.get(table_id)

    def table_by_name(self, name: str) -> TableInfo | None:
        """The live (not removed) table with this name."""
        table_id = self._by_name.get(name)
        return None if table_id is None else self._tables[table_id]

    def find_table(self, ident: common_pb2.TableIdentifierPB) -> TableInfo:
        """The live table named by id (preferred) or name; NotFound names what was asked for."""
        if ident.table_id:
            info = self._tables.get(ident.table_id)
            if info is None or info.removed:
                raise NotFound(f"table with id {ident.table_id!r} not found")
            return info
        if not ident.table_name:
            raise NotFound("no table named: give a table id or a table name")
        info = self.table_by_name(ident.table_name)
        if info is None:
            raise NotFound(f"table {ident.table_name!r} not found")
        return info

    def live_tables(self) -> list[TableInfo]:
        """Tables that are not removed, sorted by name."""
        return sorted((self._tables[i] for i in self._by_name.values()), key=lambda t: t.name)

    def all_tables(self) -> Iterator[TableInfo]:
        return iter(self._tables.values())

    # -- tablets ------------------------------------------------------------------------

    def tablet(self, tablet_id: str) -> TabletInfo | None:
        return self._tablets.get(tablet_id)

    def all_tablets(self) -> Iterator[TabletInfo]:
        return iter(self._tablets.values())

    def tablets_of(self, table_id: str, *, include_dead: bool = False) -> list[TabletInfo]:
        """The table's tablets in partition-key order; tombstones only when asked for."""
        tablets = self._table_tablets.get(table_id, [])
        return list(tablets) if include_dead else [t for t in tablets if not t.dead]

    def tablets_in_range(self, table_id: str, start: bytes, end: bytes) -> list[TabletInfo]:
        """Live tablets whose partition overlaps ``[start, end)`` (``b""`` end: unbounded)."""
        return list(self.iter_tablets_in_range(table_id, start, end))

    def iter_tablets_in_range(self, table_id: str, start: bytes, end: bytes) -> Iterator[TabletInfo]:
        """:meth:`tablets_in_range`, lazily, from the first overlapping tablet found by bisection
        (a lookup of a few tablets of a table with thousands costs a few, not thousands)."""
        tablets = self._table_tablets.get(table_id)
        if not tablets:
            return
        # Live tablets never overlap, so the only one starting before ``start`` that can overlap
        # it is the last live one starting at or before it; tombstones are skipped below.
        i = bisect.bisect_right(self._table_keys[table_id], (start, _MAX_ID)) - 1
        while i > 0 and tablets[i].dead:
            i -= 1
        for k in range(max(i, 0), len(tablets)):
            t = tablets[k]
            if t.dead:
                continue
            p = t.partition
            if end and p.partition_key_start >= end:
                break
            if not p.partition_key_end or p.partition_key_end > start:
                yield t

    # -- tablet servers ---------------------------------------------------------------------

    def tserver_state(self, uuid: str) -> int:
        """The server's ``TServerStatePB`` (``NONE`` when it has no state entry)."""
        entry = self._tserver_states.get(uuid)
        return mpb.NONE if entry is None else entry.state

    def in_maintenance(self, uuid: str) -> bool:
        return self.tserver_state(uuid) == mpb.MAINTENANCE_MODE

    def tserver_states(self) -> dict[str, mpb.SysTServerStateEntryPB]:
        """Every server with a state entry (a copy of the map; the entries are shared, do not change them)."""
        return dict(self._tserver_states)

    def tablets_on(self, uuid: str) -> list[TabletInfo]:
        """Live (not deleted) tablets whose committed config has a replica on the server, by tablet id."""
        return sorted(
            (t for t in self._tablets.values() if not t.dead and uuid in t.replicas), key=lambda t: t.tablet_id
        )

    def replica_counts(self) -> dict[str, int]:
        """Per tablet server uuid: replicas in the committed configs of live tablets (servers with none omitted)."""
        counts: dict[str, int] = {}
        for tablet in self._tablets.values():
            if not tablet.dead:
                for uuid in tablet.replicas:
                    counts[uuid] = counts.get(uuid, 0) + 1
        return counts

    def names_tserver(self, uuid: str) -> bool:
        """True when the catalog knows the server: a state entry, or a replica in any tablet's committed
        config (deleted tablets too)."""
        return uuid in self._tserver_states or any(uuid in t.replicas for t in self._tablets.values())

    def __len__(self) -> int:
        return (
            len(self._tables)
            + len(self._tablets)
            + len(self._tserver_states)
            + len(self.masters)
            + (1 if self.cluster_id else 0)
        )


#: Sorts after every tablet id (ids are hex), so (key, _MAX_ID) bisects past every tablet at key.
_MAX_ID = "\U0010ffff"


def _sort_key(tablet: TabletInfo) -> tuple[bytes, str]:
    return tablet.partition.partition_key_start, tablet.tablet_id


def _decode(
    m: mpb.CatalogMutationPB,
) -> tuple[int, str, TableInfo | TabletInfo | mpb.SysTServerStateEntryPB | mpb.SysMasterEntryPB | str | None]:
    """One mutation as (type, id, decoded value); an empty value deletes the entry."""
    kind, key = m.entry_type, m.entry_id
    if kind == mpb.TABLES_ENTRY:
        if not m.value:
            return kind, key, None
        table = mpb.SysTablesEntryPB()
        _parse(table, m.value, f"table {key}")
        return kind, key, TableInfo.of(key, table)
    if kind == mpb.TABLETS_ENTRY:
        if not m.value:
            return kind, key, None
        tablet = mpb.SysTabletsEntryPB()
        _parse(tablet, m.value, f"tablet {key}")
        return kind, key, TabletInfo.of(key, tablet)
    if kind == mpb.CLUSTER_ID:
        if not m.value:
            return kind, key, None
        cluster = mpb.SysClusterIdEntryPB()
        _parse(cluster, m.value, "cluster id")
        return kind, key, cluster.cluster_id
    if kind == mpb.TSERVER_STATE:
        if not m.value:
            return kind, key, None
        state = mpb.SysTServerStateEntryPB()
        _parse(state, m.value, f"tablet server {key}")
        return kind, key, state
    if kind == mpb.MASTER_ENTRY:
        if not m.value:
            return kind, key, None
        master = mpb.SysMasterEntryPB()
        _parse(master, m.value, f"master {key}")
        return kind, key, master
    raise Corruption(f"catalog mutation of unknown entry type {kind} (id {key!r})")


def _parse(
    message: mpb.SysTablesEntryPB
    | mpb.SysTabletsEntryPB
    | mpb.SysClusterIdEntryPB
    | mpb.SysTServerStateEntryPB
    | mpb.SysMasterEntryPB,
    data: bytes,
    what: str,
) -> None:
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise Corruption(f"catalog entry of {what} does not parse: {e}") from e


def state_from_entries(mutations: Iterable[mpb.CatalogMutationPB]) -> CatalogState:
    """A catalog built from stored entries (the sys catalog's rows), as one write."""
    state = CatalogState()
    state.apply(mpb.CatalogWritePB(mutations=list(mutations)))
    return state
