"""The planner of the columnar read path: what the JVM reader asks of Nyala's Python client.

The JVM source (``nyala.spark.columnar.Planner``, in the jar) starts this module once per
driver JVM as ``python -m nyala.spark.columnar_planner`` and sends it one JSON object a line
on stdin; each gets one JSON line back on stdout:

- ``{"op": "schema", "options": {...}}`` checks the options (:func:`parse_options`, the same
  errors as the Python source) and answers the table's Spark schema as Spark's JSON;
- ``{"op": "push", "options", "schema", "filters"}`` answers the indexes of the filters that
  become Nyala predicates (:func:`nyala.spark.filters.to_predicates`), the rest stay with Spark;
- ``{"op": "plan", "options", "schema", "columns", "filters"}`` asks the table for scan tokens
  with the projection and the pushed predicates (so partition pruning drops tablets that cannot
  match, and ``nyala.splitSizeBytes`` splits large ones), and answers one entry per token:
  the tablet, its replicas ``[uuid, address, role]`` and the serialized ``ScanRequestPB`` that
  opens the scan, which the JVM sends to a tablet server as it is; ``groups``, the Spark
  partitions as lists of entry indexes (small tablets share one, ``nyala.combineSizeBytes``,
  :mod:`nyala.spark.combine`); and every live tablet server's uuid and address, so a task can
  follow a leader hint to a replica added since.

An error answers ``{"error": message, "kind": exception class}``; the process goes on.
Filters arrive with typed literals (``{"t": "timestamp", "v": micros}``) and are rebuilt as the
``pyspark.sql.datasource`` filters PySpark hands a Python source, so both read paths push
exactly the same predicates.

Pushdown is on by default here: Spark plans each query of the JVM source afresh, so the reuse
that makes pushdown opt-in for the Python source (docs/spark.md) cannot happen;
``nyala.pushdown`` ``false`` turns it off.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import sys
from collections.abc import Mapping
from typing import IO, Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)
from pyspark.sql.types import StructType

from nyala.client import ReadMode, ReplicaSelection, Table
from nyala.client.scan_spec import ScanSpec
from nyala.errors import InvalidArgument
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import Predicate

from ._clients import client_for
from .combine import group_tokens
from .filters import to_predicates
from .options import NyalaOptions, parse_options
from .reader import check_read_schema
from .splits import split_tokens
from .typemap import spark_schema

__all__ = ["handle", "main"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_DEFAULT_TIMEOUT_MS = 30_000

_COMPARISONS: dict[str, type[Filter]] = {
    "EqualTo": EqualTo,
    "EqualNullSafe": EqualNullSafe,
    "GreaterThan": GreaterThan,
    "GreaterThanOrEqual": GreaterThanOrEqual,
    "LessThan": LessThan,
    "LessThanOrEqual": LessThanOrEqual,
    "StringStartsWith": StringStartsWith,
}


class _Unsupported(Exception):
    """A filter or literal the planner does not translate: Spark evaluates it."""


def _value(json_value: Mapping[str, Any]) -> Any:
    kind = json_value.get("t")
    value: Any = json_value.get("v")
    if kind == "null":
        return None
    if kind in ("str", "bool"):
        return value
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "decimal":
        return decimal.Decimal(value)
    if kind == "timestamp":
        return _EPOCH + datetime.timedelta(microseconds=int(value))
    if kind == "date":
        return datetime.date.fromordinal(_EPOCH_ORDINAL + int(value))
    if kind == "bytes":
        return base64.b64decode(value)
    raise _Unsupported(f"literal of type {kind!r}")


def to_filter(json_filter: Mapping[str, Any]) -> Filter:
    """The ``pyspark.sql.datasource`` filter a JSON filter from the JVM stands for."""
    kind = json_filter.get("kind")
    attribute = (str(json_filter.get("attribute")),)
    if kind in _COMPARISONS:
        return _COMPARISONS[kind](attribute, _value(json_filter["value"]))  # type: ignore[call-arg]
    if kind == "In":
        return In(attribute, tuple(_value(v) for v in json_filter["values"]))
    if kind == "IsNull":
        return IsNull(attribute)
    if kind == "IsNotNull":
        return IsNotNull(attribute)
    raise _Unsupported(f"filter {json_filter.get('text', kind)}")


def _pushdown(options: Mapping[str, str], parsed: NyalaOptions) -> bool:
    given = any(k.lower() == "nyala.pushdown" for k in options)
    return parsed.pushdown if given else True


def _predicates(request: Mapping[str, Any], table: Table, parsed: NyalaOptions) -> tuple[list[int], list[Predicate]]:
    if not _pushdown(request["options"], parsed):
        return [], []
    accepted: list[int] = []
    predicates: list[Predicate] = []
    for index, json_filter in enumerate(request.get("filters", [])):
        try:
            spark_filter = to_filter(json_filter)
        except (_Unsupported, KeyError, TypeError, ValueError, ArithmeticError):
            continue
        bound = to_predicates(spark_filter, table.schema)
        if bound is not None:
            accepted.append(index)
            predicates.extend(bound)
    return accepted, predicates


def _open_table(options: NyalaOptions) -> Table:
    return client_for(options.master, options.operation_timeout_ms, options.tls).open_table(options.table)


def _schema(request: Mapping[str, Any]) -> dict[str, Any]:
    parsed = parse_options(request["options"])
    return {"schema": spark_schema(_open_table(parsed).schema).json()}


def _push(request: Mapping[str, Any]) -> dict[str, Any]:
    parsed = parse_options(request["options"])
    accepted, _ = _predicates(request, _open_table(parsed), parsed)
    return {"accepted": accepted}


def _plan(request: Mapping[str, Any]) -> dict[str, Any]:
    parsed = parse_options(request["options"])
    client = client_for(parsed.master, parsed.operation_timeout_ms, parsed.tls)
    table = client.open_table(parsed.table)
    check_read_schema(StructType.fromJson(json.loads(request["schema"])), table.schema, parsed.table)
    columns = [str(c) for c in request.get("columns", [])]
    # count(): Spark needs no column, only row counts; the narrowest scan that still counts.
    projection = columns or [table.schema.key_names[0]]
    _, predicates = _predicates(request, table, parsed)
    timeout_ms = parsed.scan_request_timeout_ms or _DEFAULT_TIMEOUT_MS
    selection = ReplicaSelection.LEADER_ONLY if parsed.leader_only else ReplicaSelection.CLOSEST_REPLICA
    tokens = table.scan_tokens(
        projection,
        predicates,
        replica_selection=selection,
        ordered=parsed.fault_tolerant_scan,
        batch_size_bytes=parsed.batch_size_bytes,
        timeout_s=timeout_ms / 1000,
    )
    if parsed.split_size_bytes is not None:
        tokens = split_tokens(client, table.schema, tokens, parsed.split_size_bytes)
    grouped = group_tokens(client, tokens, parsed.combine_size_bytes)
    tokens = [token for group in grouped for token in group]
    groups, start = [], 0
    for group in grouped:
        groups.append(list(range(start, start + len(group))))
        start += len(group)
    partitions = []
    batch_size_bytes = 0
    for token in tokens:
        spec = ScanSpec.from_dict(token.spec, table.schema)
        batch_size_bytes = spec.batch_size_bytes
        lower, upper = spec.encoded_bounds(table.schema)
        new_scan = tpb.NewScanRequestPB(
            tablet_id=token.tablet_id,
            projected_columns=list(projection),
            predicates=spec.predicates_json(table.schema),
            lower_bound_primary_key=lower,
            exclusive_upper_bound_primary_key=upper,
            read_mode=spec.read_mode.name,
            min_applied_index=token.min_applied_index if spec.read_mode is ReadMode.READ_YOUR_WRITES else 0,
            order_by_primary_key=spec.ordered,
            schema_version=table.info.schema_version,
            leader_only=spec.replica_selection is ReplicaSelection.LEADER_ONLY,
        )
        opening = tpb.ScanRequestPB(new_scan_request=new_scan, call_seq_id=0, batch_size_bytes=spec.batch_size_bytes)
        partitions.append(
            {
                "tablet": token.tablet_id,
                "request": base64.b64encode(opening.SerializeToString()).decode(),
                "replicas": [[uuid, address, role] for uuid, address, _location, role in token.replicas],
            }
        )
    # Every live server, so a task can follow a leader hint to a replica added after planning
    # (the master re-replicates a dead server's tablets while queries run).
    servers = {
        info.uuid: info.rpc_addresses[0]
        for info in client.list_tablet_servers(timeout_s=timeout_ms / 1000)
        if info.live and info.rpc_addresses
    }
    return {
        "partitions": partitions,
        "groups": groups,
        "servers": servers,
        "leader_only": parsed.leader_only,
        "ordered": parsed.fault_tolerant_scan,
        "batch_size_bytes": batch_size_bytes,
        "timeout_ms": timeout_ms,
    }


_OPS = {"schema": _schema, "push": _push, "plan": _plan}


def handle(line: str) -> dict[str, Any]:
    """The answer to one request line; never raises."""
    try:
        request = json.loads(line)
        if not isinstance(request, dict) or request.get("op") not in _OPS:
            raise InvalidArgument(f"not a planner request: {line[:200]!r}")
        if not isinstance(request.get("options"), dict):
            raise InvalidArgument("a planner request needs an 'options' object")
        return _OPS[request["op"]](request)
    except Exception as exc:  # every failure goes back to the JVM, which raises it to the user
        return {"error": str(exc), "kind": type(exc).__name__}


def main(stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> None:
    """Answer requests until the JVM closes stdin."""
    for line in stdin:
        if line.strip():
            stdout.write(json.dumps(handle(line), separators=(",", ":")) + "\n")
            stdout.flush()


if __name__ == "__main__":
    main()
