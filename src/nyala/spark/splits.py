"""``nyala.splitSizeBytes``: several Spark partitions per tablet, split by primary-key range.

Kudu asks the tablet server for split points (its SplitKeyRange RPC, from per-rowset key
statistics).  Nyala has no such call yet, so the planner computes them from the data,
through the public client only:

1. read a sample (the first 1,000 matching rows) of the tablet to estimate the Arrow bytes
   of one row;
2. read the tablet's primary keys in key order (a key-only ordered scan with the query's
   predicates) and count them;
3. if ``rows x bytes per row`` exceeds the split size, cut the key list into that many equal
   pieces and make one token per ``[key_i, key_i+1)`` range (the first and last open-ended),
   so together they cover the tablet's matching rows exactly once.

The cost is one pass over the key columns of every tablet at planning time, which pays off
only when the scan itself is much more expensive (wide rows, slow consumers).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import pyarrow as pa

from nyala.client import Client, ScanToken
from nyala.schema import KeyRange, Schema

__all__ = ["split_tokens"]

SAMPLE_ROWS = 1_000


def split_tokens(client: Client, schema: Schema, tokens: list[ScanToken], split_size_bytes: int) -> list[ScanToken]:
    """``tokens`` with every tablet bigger than ``split_size_bytes`` cut into key ranges."""
    out: list[ScanToken] = []
    for token in tokens:
        out.extend(_split(client, schema, token, split_size_bytes))
    return out


def _split(client: Client, schema: Schema, token: ScanToken, split_size_bytes: int) -> list[ScanToken]:
    if token.spec.get("key_range") is not None or token.spec.get("limit") is not None:
        return [token]  # already bounded: leave it alone
    sample = client.scanner_from_token(_with_spec(token, limit=SAMPLE_ROWS)).to_arrow()
    if sample.num_rows == 0:
        return [token]
    bytes_per_row = sample.nbytes / sample.num_rows
    key_names = [c.name for c in schema.key_columns]
    keys = client.scanner_from_token(_with_spec(token, projection=key_names, ordered=True)).to_arrow()
    pieces = min(keys.num_rows, math.ceil(keys.num_rows * bytes_per_row / split_size_bytes))
    if pieces <= 1:
        return [token]
    cuts = [_key_at(keys, key_names, i * keys.num_rows // pieces) for i in range(1, pieces)]
    bounds = [None, *cuts, None]
    return [_with_range(token, schema, lower, upper) for lower, upper in itertools.pairwise(bounds)]


def _key_at(keys: pa.Table, names: list[str], row: int) -> tuple[Any, ...]:
    return tuple(keys.column(name)[row].as_py() for name in names)


def _with_spec(token: ScanToken, **changes: Any) -> ScanToken:
    return dataclasses.replace(token, spec={**token.spec, **changes})


def _with_range(
    token: ScanToken, schema: Schema, lower: tuple[Any, ...] | None, upper: tuple[Any, ...] | None
) -> ScanToken:
    key_range = KeyRange(lower, upper).bind(schema)
    return _with_spec(token, key_range=key_range.to_dict(schema))
