"""ksck's checksum scan: do the replicas of every tablet hold the same rows?

Per tablet, ksck asks its leader for a checksum with the tablet server's ``Checksum`` call
and no marker index: the leader replicates a checksum marker through Raft and answers with
its own checksum there and the marker's index.  Then every other replica is asked for its
checksum at that index: it answers once it has applied the marker, from a snapshot of its
rows taken exactly when it applied it (docs/tserver.md).  All replicas so checksum the same
prefix of the log, while writes go on.  A replica whose checksum differs from the others'
holds different rows; one that cannot answer (unreachable, still copying, restarted since
the marker) is reported as such, never as a mismatch.

:data:`CONCURRENCY` tablets are checksummed at a time, so a large cluster is not asked to scan
every tablet at once (Kudu's ``--checksum_scan_concurrency``).  Judging the answers
(:func:`judge_checksums`) is pure.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence

from nyala.client.async_client import AsyncClient
from nyala.client.info import TabletInfo
from nyala.errors import NotTheLeader, NyalaError
from nyala.proto import tserver_pb2 as tpb
from nyala.services import CHECKSUM

__all__ = ["CONCURRENCY", "ReplicaChecksum", "TabletChecksum", "checksum_tablets", "judge_checksums"]

#: Tablets checksummed at the same time.
CONCURRENCY = 4


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaChecksum:
    """One replica's answer: its checksum and row count at the marker, or why it has none."""

    uuid: str
    address: str
    checksum: int | None = None
    rows: int | None = None
    error: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class TabletChecksum:
    """The checksums of one tablet's replicas at one marker (``error``: no marker was placed)."""

    table: str
    tablet_id: str
    marker_index: int
    replicas: tuple[ReplicaChecksum, ...]
    error: str = ""

    @property
    def mismatch(self) -> bool:
        return len({r.checksum for r in self.replicas if r.checksum is not None}) > 1

    @property
    def result(self) -> str:
        """MISMATCH when replicas differ, else ERROR when one could not answer, else OK."""
        if self.mismatch:
            return "MISMATCH"
        return "ERROR" if self.error or any(r.error for r in self.replicas) else "OK"


def judge_checksums(results: Sequence[TabletChecksum]) -> list[str]:
    """A problem for every tablet whose replicas differ, and every replica that could not answer."""
    problems = []
    for t in results:
        where = f"tablet {t.tablet_id} of table {t.table!r}"
        if t.error:
            problems.append(f"{where}: no checksum scan: {t.error}")
            continue
        if t.mismatch:
            answered = [r for r in t.replicas if r.checksum is not None]
            answers = ", ".join(f"{r.address or r.uuid} has {r.checksum:#018x} ({r.rows} rows)" for r in answered)
            problems.append(f"{where}: CHECKSUM MISMATCH at index {t.marker_index}: {answers}")
        for r in t.replicas:
            if r.error:
                problems.append(f"{where}: replica on {r.address or r.uuid} could not be checksummed: {r.error}")
    return problems


async def checksum_tablets(
    client: AsyncClient,
    tablets: Sequence[tuple[str, TabletInfo, str]],
    *,
    timeout_s: float,
    concurrency: int = CONCURRENCY,
) -> list[TabletChecksum]:
    """Checksum every replica of each ``(table, tablet, leader uuid)``, the leader's marker first."""
    if concurrency < 1:
        raise ValueError(f"checksum concurrency must be >= 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)

    async def one(table: str, tablet: TabletInfo, leader: str) -> TabletChecksum:
        async with gate:
            return await _checksum_tablet(client, table, tablet, leader, timeout_s)

    return list(await asyncio.gather(*(one(*t) for t in tablets)))


async def _checksum_tablet(
    client: AsyncClient, table: str, tablet: TabletInfo, leader: str, timeout_s: float
) -> TabletChecksum:
    addresses = {r.uuid: r.address for r in tablet.replicas}
    if not leader:
        return TabletChecksum(table, tablet.tablet_id, 0, (), "no replica leads it")
    try:
        first, leader = await _start(client, tablet.tablet_id, leader, addresses, timeout_s)
    except NyalaError as exc:
        return TabletChecksum(table, tablet.tablet_id, 0, (), f"its leader could not place a marker: {_text(exc)}")
    index = first.marker_index
    own = ReplicaChecksum(leader, addresses.get(leader, ""), first.checksum, first.rows_checksummed)
    others = [u for u in addresses if u != leader]
    answers = await asyncio.gather(*(_at(client, tablet.tablet_id, u, addresses[u], index, timeout_s) for u in others))
    by_uuid = {own.uuid: own, **{a.uuid: a for a in answers}}
    replicas = tuple(by_uuid[u] for u in [*addresses] if u in by_uuid)
    return TabletChecksum(table, tablet.tablet_id, index, replicas)


async def _start(
    client: AsyncClient, tablet_id: str, leader: str, addresses: Mapping[str, str], timeout_s: float
) -> tuple[tpb.ChecksumResponsePB, str]:
    """The leader's answer and uuid; follows one NOT_THE_LEADER hint (leadership just moved)."""
    request = tpb.ChecksumRequestPB(tablet_id=tablet_id)
    try:
        return await client.messenger.call(addresses[leader], CHECKSUM, request, timeout=timeout_s), leader
    except NotTheLeader as exc:
        hint = exc.leader_hint
        if not hint or hint not in addresses or hint == leader:
            raise
        return await client.messenger.call(addresses[hint], CHECKSUM, request, timeout=timeout_s), hint


async def _at(
    client: AsyncClient, tablet_id: str, uuid: str, address: str, index: int, timeout_s: float
) -> ReplicaChecksum:
    request = tpb.ChecksumRequestPB(tablet_id=tablet_id, marker_index=index)
    try:
        response = await client.messenger.call(address, CHECKSUM, request, timeout=timeout_s)
    except NyalaError as exc:
        return ReplicaChecksum(uuid, address, error=_text(exc))
    return ReplicaChecksum(uuid, address, response.checksum, response.rows_checksummed)


def _text(exc: NyalaError) -> str:
    return f"{type(exc).__name__}: {exc}"
