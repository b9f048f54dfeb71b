"""Order-preserving key encoding (Kudu's) and the MurmurHash2 used for hash buckets.

A composite key is the concatenation of its columns' encodings, so that comparing the bytes
compares the tuples:

- integers, dates (days), timestamps (microseconds) and decimals (the unscaled integer in 4,
  8 or 16 bytes by precision, like Kudu) are big-endian with the sign bit flipped;
- strings (UTF-8) and binaries are written raw when they are the last column; otherwise
  every ``0x00`` becomes ``0x00 0x01`` and the value ends with ``0x00 0x00``, so a shorter
  value sorts before every longer value it is a prefix of.

:func:`encode_key` is injective and ``a < b`` exactly when ``encode(a) < encode(b)``.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from nyala.errors import Corruption

from .types import INT_BITS, ColumnType, DataType, micros_to_timestamp, timestamp_to_micros

__all__ = ["decode_key", "encode_key", "key_successor", "murmur2_64", "murmur2_64_fixed", "prefix_successor"]

_DATE_EPOCH = datetime.date(1970, 1, 1)
# Decimal arithmetic without rounding: the default context keeps only 28 digits, decimals have up to 38.
_EXACT = decimal.Context(prec=100)


def _decimal_bytes(precision: int) -> int:
    return 4 if precision <= 9 else 8 if precision <= 18 else 16


def _fixed_width(t: ColumnType) -> int:
    if t.type in INT_BITS:
        return INT_BITS[t.type] // 8
    if t.type is DataType.DATE:
        return 4
    if t.type is DataType.TIMESTAMP:
        return 8
    if t.type is DataType.DECIMAL:
        return _decimal_bytes(t.precision)
    return 0


def _as_int(t: ColumnType, value: Any) -> int:
    if t.type is DataType.DATE:
        return int((value - _DATE_EPOCH).days)
    if t.type is DataType.TIMESTAMP:
        return timestamp_to_micros(value)
    if t.type is DataType.DECIMAL:
        return int(value.scaleb(t.scale))
    return int(value)


def encode_value(t: ColumnType, value: Any, last: bool) -> bytes:
    """One column's contribution to a composite key; ``value`` must be canonical."""
    width = _fixed_width(t)
    if width:
        return (_as_int(t, value) + (1 << (8 * width - 1))).to_bytes(width, "big")
    raw = value.encode("utf-8") if t.type is DataType.STRING else bytes(value)
    if last:
        return raw
    return raw.replace(b"\x00", b"\x00\x01") + b"\x00\x00"


def encode_key(types: Sequence[ColumnType], values: Sequence[Any]) -> bytes:
    """Encode a full composite key (one value per type)."""
    last = len(types) - 1
    return b"".join(encode_value(t, v, i == last) for i, (t, v) in enumerate(zip(types, values, strict=True)))


def encode_prefix(types: Sequence[ColumnType], values: Sequence[Any]) -> bytes:
    """Encode the first ``len(values)`` columns of a longer key, as they appear inside it."""
    last = len(types) - 1
    return b"".join(encode_value(types[i], v, i == last) for i, v in enumerate(values))


def _from_int(t: ColumnType, n: int) -> Any:
    if t.type is DataType.DATE:
        return _DATE_EPOCH + datetime.timedelta(days=n)
    if t.type is DataType.TIMESTAMP:
        return micros_to_timestamp(n)
    if t.type is DataType.DECIMAL:
        return decimal.Decimal(n).scaleb(-t.scale)
    return n


def decode_key(types: Sequence[ColumnType], data: bytes) -> tuple[Any, ...]:
    """Invert :func:`encode_key`; raise Corruption on malformed bytes."""
    out: list[Any] = []
    pos = 0
    for i, t in enumerate(types):
        width = _fixed_width(t)
        if width:
            chunk = data[pos : pos + width]
            if len(chunk) != width:
                raise Corruption(f"encoded key {data!r} is truncated in column {i}")
            out.append(_from_int(t, int.from_bytes(chunk, "big") - (1 << (8 * width - 1))))
            pos += width
            continue
        if i == len(types) - 1:
            raw, pos = data[pos:], len(data)
        else:
            raw, pos = _unescape(data, pos)
        out.append(raw.decode("utf-8") if t.type is DataType.STRING else raw)
    if pos != len(data):
        raise Corruption(f"encoded key {data!r} has {len(data) - pos} trailing bytes")
    return tuple(out)


def _unescape(data: bytes, pos: int) -> tuple[bytes, int]:
    out = bytearray()
    while True:
        nul = data.find(b"\x00", pos)
        if nul < 0 or nul + 1 >= len(data):
            raise Corruption(f"encoded key {data!r} has an unterminated string")
        out += data[pos:nul]
        marker = data[nul + 1]
        if marker == 0:
            return bytes(out), nul + 2
        if marker != 1:
            raise Corruption(f"encoded key {data!r} has a bad escape at {nul}")
        out.append(0)
        pos = nul + 2


def key_successor(types: Sequence[ColumnType], values: Sequence[Any]) -> list[Any] | None:
    """The smallest key greater than ``values`` (canonical values of key columns), or None when
    ``values`` is the largest key.

    Kudu's way of turning an exclusive lower bound or an inclusive upper bound into the
    half-open ``[lower, upper)`` ranges a table stores: the last column steps to its next value
    (integers, dates and timestamps by one unit, decimals by one unit of the scale, strings
    and binaries by appending a zero byte); at its largest value it wraps to the smallest one
    and the column before it steps instead.
    """
    out = list(values)
    for i in range(len(out) - 1, -1, -1):
        following = _next_value(types[i], out[i])
        if following is not None:
            out[i] = following
            return out
        out[i] = _smallest_value(types[i])
    return None


def _next_value(t: ColumnType, value: Any) -> Any:
    """The next value of a key column's type, or None at its largest value."""
    if t.type is DataType.STRING:
        return value + "\x00"
    if t.type is DataType.BINARY:
        return bytes(value) + b"\x00"
    if t.type is DataType.DECIMAL:
        following = _EXACT.add(value, _EXACT.scaleb(decimal.Decimal(1), -t.scale))
        return following if len(following.as_tuple().digits) <= t.precision else None
    try:
        if t.type is DataType.DATE:
            return value + datetime.timedelta(days=1)
        if t.type is DataType.TIMESTAMP:
            return value + datetime.timedelta(microseconds=1)
    except OverflowError:
        return None
    bits = INT_BITS[t.type]
    return value + 1 if value + 1 < 1 << (bits - 1) else None


def _smallest_value(t: ColumnType) -> Any:
    if t.type is DataType.STRING:
        return ""
    if t.type is DataType.BINARY:
        return b""
    if t.type is DataType.DECIMAL:
        return _EXACT.scaleb(decimal.Decimal(-(10**t.precision - 1)), -t.scale)
    if t.type is DataType.DATE:
        return datetime.date.min
    if t.type is DataType.TIMESTAMP:
        return datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return -(1 << (INT_BITS[t.type] - 1))


def prefix_successor(prefix: bytes) -> bytes:
    """The smallest byte string greater than every string that starts with ``prefix``.

    Returns ``b""`` (meaning "no upper bound") when there is none (``prefix`` is all 0xff).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b""
    return stripped[:-1] + bytes([stripped[-1] + 1])


_M = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1


def murmur2_64(data: bytes, seed: int) -> int:
    """MurmurHash64A, the hash Kudu uses for hash partitioning."""
    length = len(data)
    h = (seed ^ (length * _M)) & _MASK
    whole = length - length % 8
    for pos in range(0, whole, 8):
        k = (int.from_bytes(data[pos : pos + 8], "little") * _M) & _MASK
        k ^= k >> 47
        k = (k * _M) & _MASK
        h = ((h ^ k) * _M) & _MASK
    if length % 8:
        h = ((h ^ int.from_bytes(data[whole:], "little")) * _M) & _MASK
    h ^= h >> 47
    h = (h * _M) & _MASK
    return h ^ (h >> 47)


def murmur2_64_fixed(values: npt.NDArray[Any], seed: int) -> npt.NDArray[np.uint64]:
    """:func:`murmur2_64` of each value's key encoding, vectorised, for integer-like columns.

    ``values`` is a signed integer array (1, 2, 4 or 8 bytes per value); each is hashed
    exactly as ``murmur2_64(encode_value(...))`` hashes its big-endian, sign-flipped encoding.
    In numpy, whose fixed-width arithmetic wraps like the C original and costs about a
    microsecond a call (Arrow's compute functions cost tens): batches are often small.
    """
    width = values.dtype.itemsize
    unsigned = values.view(f"u{width}") ^ np.array(1 << (8 * width - 1), f"u{width}")
    # Murmur reads the big-endian bytes as a little-endian word: swap each value's bytes.
    word = unsigned.byteswap().astype(np.uint64)
    m = np.uint64(_M)
    shift = np.uint64(47)
    h = np.uint64((seed ^ (width * _M)) & _MASK)
    if width == 8:
        k = word * m
        k = (k ^ (k >> shift)) * m
        hashed = (k ^ h) * m
    else:
        hashed = (word ^ h) * m
    hashed = (hashed ^ (hashed >> shift)) * m
    out: npt.NDArray[np.uint64] = hashed ^ (hashed >> shift)
    return out
