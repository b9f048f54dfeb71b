"""``nyala.combineSizeBytes``: several small tablets of one table read by one Spark partition.

Every Spark task costs a fixed price before its first row (a Python worker's round trip on the
Python path, a task launch and a connection on both), which dwarfs the read of a tablet of a
few hundred rows: a query joining five small tables of two to four tablets each ran a dozen
such tasks.  Spark's file sources pack small files into one partition for the same reason
(``spark.sql.files.maxPartitionBytes``).

At planning, each tablet's scan is probed with its own projection and predicates and a limit of
:data:`PROBE_ROWS` rows (one Scan call per tablet, all at once).  A tablet that returns fewer
rows than that was read whole, so its size is known: it is *small*.  Small tablets are packed,
in token order, into groups of at most ``combine_size_bytes`` bytes of Arrow data; every other
tablet (and every key-range split of ``nyala.splitSizeBytes``, large by construction) keeps a
partition of its own.  A group is read tablet after tablet by one task, every row once.

Parallelism is not lost where it pays: only tablets whose rows all fit in the probe are
combined, and a group never exceeds ``combine_size_bytes``, so a table with real work in it
keeps a partition per tablet.  The probe costs one round trip per tablet at planning, bounded
by :data:`PROBE_ROWS` rows.
"""

from __future__ import annotations

import asyncio
import dataclasses

from nyala.client import Client, ScanToken

__all__ = ["PROBE_ROWS", "group_tokens"]

#: A tablet with fewer matching rows than this is small enough to share a partition.
PROBE_ROWS = 4096


def group_tokens(client: Client, tokens: list[ScanToken], combine_size_bytes: int) -> list[list[ScanToken]]:
    """``tokens`` grouped into Spark partitions: small tablets together, the rest one each."""
    if combine_size_bytes <= 0 or len(tokens) < 2:
        return [[token] for token in tokens]
    sizes = client.run(_probe_all(client, tokens))
    return pack(tokens, sizes, combine_size_bytes)


def pack(tokens: list[ScanToken], sizes: list[int | None], combine_size_bytes: int) -> list[list[ScanToken]]:
    """Small tokens (a known size) packed in order into groups of at most ``combine_size_bytes``;
    the groups ordered by their first token, as the tokens were."""
    groups: list[tuple[int, list[ScanToken]]] = []
    current: list[ScanToken] = []
    current_start = current_bytes = 0
    for index, (token, size) in enumerate(zip(tokens, sizes, strict=True)):
        if size is None or size > combine_size_bytes:
            groups.append((index, [token]))
            continue
        if current and current_bytes + size > combine_size_bytes:
            groups.append((current_start, current))
            current, current_bytes = [], 0
        if not current:
            current_start = index
        current.append(token)
        current_bytes += size
    if current:
        groups.append((current_start, current))
    return [group for _, group in sorted(groups, key=lambda g: g[0])]


async def _probe_all(client: Client, tokens: list[ScanToken]) -> list[int | None]:
    return list(await asyncio.gather(*(_probe(client, token) for token in tokens)))


async def _probe(client: Client, token: ScanToken) -> int | None:
    """The Arrow bytes of the tablet's matching rows, or None when it has PROBE_ROWS or more."""
    if token.spec.get("key_range") is not None or token.spec.get("limit") is not None:
        return None  # a split of a large tablet, or a scan with its own limit: leave it alone
    probe = dataclasses.replace(token, spec={**token.spec, "limit": PROBE_ROWS})
    rows = await (await client.aio.scanner_from_token(probe)).to_arrow()
    return rows.nbytes if rows.num_rows < PROBE_ROWS else None
