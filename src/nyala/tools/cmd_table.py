"""``nyala table list|describe|create|delete|scan|count|rename-table|rename-column|delete-column|
add-range-partition|drop-range-partition|set-placement MASTER_ADDRESSES ...``.

Values on the command line are read against the column's type: a SQL string literal
(``'text'``, with ``''`` for a quote inside) stands for the text between the quotes, taken as
is by string columns and read like unquoted text by the others; otherwise JSON where it
parses (``5``, ``"text"``), else the raw text; dates and timestamps in ISO 8601
(``2024-05-01``, ``'2024-05-01T12:00:00+00:00'``, UTC when no zone is given), decimals as
written.  A predicate is ``"COLUMN OP VALUE"`` with OP one of = != < <= > >= in, or
``"COLUMN is null"`` / ``"COLUMN is not null"``; an IN list is ``[v1, v2]`` or ``(v1, v2)``,
its items split at commas outside quotes.  A range bound is a list of one value per range
column, ``[]`` for unbounded (``[2024-01-01]``, ``["a", 5]``, ``['a', 5]``).

The alter verbs are Kudu's ``kudu table rename_table`` and friends; Kudu's underscore
spellings work as hidden aliases.  A placement policy (``--placement /eu,/eu2`` and
``--leader-location /eu/dc1`` on ``create``, or ``set-placement``) lists comma-separated
location subtrees.
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import click

from nyala.client import (
    Partitioning,
    PlacementPolicy,
    Predicate,
    RangePartition,
    RangePartitionBound,
    ReplicaSelection,
    Scanner,
    Table,
    predicate,
    schema,
)
from nyala.client.async_client import show_range
from nyala.errors import InvalidArgument
from nyala.schema import ColumnSchema, ColumnType, DataType, Schema
from nyala.tools._format import (
    UnderscoreGroup,
    columns_option,
    connect_cli,
    emit_json,
    emit_rows,
    format_option,
    handle_errors,
    masters_argument,
    progress,
    timeout_option,
    to_jsonable,
)

__all__ = ["parse_predicate", "parse_range_bound", "parse_value", "split_list", "sql_string_literal", "table"]

LIST_COLUMNS = ("name", "id", "num_tablets", "num_replicas")

P = ParamSpec("P")
R = TypeVar("R")


@click.group(cls=UnderscoreGroup)
def table() -> None:
    """Create, inspect, alter, scan and delete tables."""


# --- values -------------------------------------------------------------------------------


def parse_value(column: ColumnSchema, text: str) -> Any:
    """A command-line value for ``column``; InvalidArgument names the column when it does not fit."""
    kind = column.type.type
    literal = sql_string_literal(text)
    value: Any
    if literal is not None:
        # A SQL string literal is text, read against the column type like unquoted text (so
        # '2024-05-01' is a date and '5' an int), except that strings keep it verbatim.
        text = literal
        value = literal if kind in (DataType.STRING, DataType.BINARY) else _json_or_text(literal)
    else:
        value = _json_or_text(text)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        value = _convert(column.type, kind, value, text)
    return column.type.check(value, f"value {text!r} for column {column.name!r}")


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


_SQL_LITERAL = re.compile(r"'((?:[^']|'')*)'")


def sql_string_literal(text: str) -> str | None:
    """The text of a SQL string literal (``'it''s'`` is ``it's``), or None when ``text`` is not quoted
    that way.  A value that starts with a single quote but is not such a literal is refused, rather
    than read with its quotes as part of the value."""
    stripped = text.strip()
    if not stripped.startswith("'"):
        return None
    match = _SQL_LITERAL.fullmatch(stripped)
    if match is None:
        raise InvalidArgument(
            f"cannot read {text!r}: write a quoted string as 'text', with '' for a quote inside (e.g. 'it''s')"
        )
    return match[1].replace("''", "'")


def split_list(text: str) -> list[str]:
    """The items of ``[a, b]``, ``(a, b)`` or ``a, b``, split at commas outside quoted strings.

    Single-quoted strings take ``''`` for a quote, double-quoted (JSON) strings a backslash
    escape; items keep their quotes, for :func:`parse_value`.
    """
    stripped = text.strip()
    if len(stripped) >= 2 and (stripped[0], stripped[-1]) in (("[", "]"), ("(", ")")):
        stripped = stripped[1:-1]
    items: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(stripped):
        char = stripped[i]
        current.append(char)
        if quote == "'":
            if char == "'":
                if stripped[i + 1 : i + 2] == "'":  # '' inside a literal: an escaped quote
                    current.append("'")
                    i += 1
                else:
                    quote = ""
        elif quote == '"':
            if char == "\\" and i + 1 < len(stripped):
                current.append(stripped[i + 1])
                i += 1
            elif char == '"':
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == ",":
            current.pop()
            items.append("".join(current).strip())
            current = []
        i += 1
    if quote:
        raise InvalidArgument(f"cannot read list {text!r}: a {quote}-quoted string is not closed")
    items.append("".join(current).strip())
    return [item for item in items if item]


def _convert(column_type: ColumnType, kind: DataType, value: str | int | float, text: str) -> Any:
    try:
        if kind is DataType.DATE:
            return datetime.date.fromisoformat(str(value))
        if kind is DataType.TIMESTAMP:
            moment = datetime.datetime.fromisoformat(str(value))
            return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)
        if kind is DataType.DECIMAL:
            return decimal.Decimal(text.strip().strip('"'))
        if kind is DataType.STRING:
            return str(value)
        if kind is DataType.BINARY:
            return str(value).encode()
    except (ValueError, decimal.InvalidOperation) as exc:
        raise InvalidArgument(f"cannot read {text!r} as {column_type}: {exc}") from None
    return value


_OPERATORS = r"is\s+not\s+null|is\s+null|in|==|!=|<>|<=|>=|=|<|>"
_PREDICATE = re.compile(rf"^\s*(?P<column>[^\s!<>=]+)\s*(?P<op>{_OPERATORS})\s*(?P<value>.*?)\s*$", re.IGNORECASE)


def parse_predicate(table_schema: Schema, text: str) -> Predicate:
    """``"price >= 10"``, ``"id in [1,2,3]"``, ``"note is null"`` against ``table_schema``."""
    match = _PREDICATE.match(text)
    if match is None:
        raise InvalidArgument(f"cannot read predicate {text!r}; write it as 'COLUMN OP VALUE', e.g. 'id >= 10'")
    name, op, raw = match["column"], " ".join(match["op"].lower().split()), match["value"]
    column = table_schema.column(name)
    if op in ("is null", "is not null"):
        if raw:
            raise InvalidArgument(f"predicate {text!r}: {op.upper()} takes no value")
        return predicate(name, op).bind(table_schema)
    if not raw:
        raise InvalidArgument(f"predicate {text!r} needs a value")
    if op == "in":
        values = [parse_value(column, item) for item in split_list(raw)]
        return predicate(name, "in", values).bind(table_schema)
    return predicate(name, op, parse_value(column, raw)).bind(table_schema)


# --- list, describe, delete --------------------------------------------------------------------


@table.command("list")
@masters_argument
@click.option("--filter", "name_filter", default="", help="Only tables whose name contains this text.")
@columns_option(LIST_COLUMNS, ("name", "num_tablets", "num_replicas"))
@format_option
@timeout_option
@handle_errors
def list_tables(
    master_addresses: str, name_filter: str, columns: list[str], output_format: str, timeout_s: float
) -> None:
    """List the tables of the cluster."""
    with connect_cli(master_addresses, timeout_s) as client:
        tables = client.list_table_summaries(name_filter, timeout_s=timeout_s)
    emit_rows([t.as_dict() for t in tables], columns, output_format, title=f"{len(tables)} tables")


@table.command()
@masters_argument
@click.argument("table_name")
@click.option("--tablets/--no-tablets", default=False, help="Also list every tablet with its replicas.")
@format_option
@timeout_option
@handle_errors
def describe(master_addresses: str, table_name: str, tablets: bool, output_format: str, timeout_s: float) -> None:
    """Show a table's schema, partitioning and replication."""
    with connect_cli(master_addresses, timeout_s) as client:
        opened = client.open_table(table_name, timeout_s=timeout_s)
        layout = client.table_tablets(table_name, timeout_s=timeout_s) if tablets or output_format == "json" else []
    description = _description(opened)
    if output_format == "json":
        emit_json({**description, "tablets": [t.as_dict() for t in layout]})
        return
    click.echo(f"Table {opened.name} (id {opened.id}), schema version {opened.schema_version}, "
               f"{opened.num_replicas} replicas")  # fmt: skip
    emit_rows(description["columns"], ["name", "type", "nullable", "key", "default"], "table", title="Columns")
    click.echo(f"Partitioning: {description['partitioning']}")
    click.echo(f"Placement policy: {opened.placement}")
    for item in opened.range_placements:
        click.echo(f"  range {item.range}: {item.policy}")
    if tablets:
        rows = [
            {"tablet": t.tablet_id, "partition": t.partition, "replicas": [f"{r.address} {r.role}" for r in t.replicas]}
            for t in layout
        ]
        emit_rows(rows, ["tablet", "partition", "replicas"], "table", title=f"{len(rows)} tablets")


def _description(opened: Table) -> dict[str, Any]:
    table_schema = opened.schema
    columns = [
        {
            "name": c.name,
            "type": str(c.type),
            "nullable": c.nullable,
            "key": table_schema.is_key(c.name),
            "default": to_jsonable(c.default),
        }
        for c in table_schema.columns
    ]
    ps = opened.partitioner.partition_schema
    parts = [f"HASH ({', '.join(d.columns)}) PARTITIONS {d.num_buckets} SEED {d.seed}" for d in ps.hash_dimensions]
    if ps.range_columns:
        ranges = [show_range(opened.partitioner, r.lower, r.upper) for r in opened.partitioner.ranges]
        parts.append(f"RANGE ({', '.join(ps.range_columns)}) {', '.join(ranges)}")
    return {
        "name": opened.name,
        "id": opened.id,
        "schema_version": opened.schema_version,
        "num_replicas": opened.num_replicas,
        "columns": columns,
        "partitioning": "; ".join(parts) or "a single tablet",
        "num_tablets": len(opened.partitioner.partitions),
        "placement": _policy_dict(opened.placement),
        "range_placements": [{"range": r.range, **_policy_dict(r.policy)} for r in opened.range_placements],
    }


def _policy_dict(policy: PlacementPolicy) -> dict[str, Any]:
    return {"locations": list(policy.locations), "leader_location": policy.leader_location}


def parse_locations(text: str) -> tuple[str, ...]:
    """``/eu,/eu2`` -> ("/eu", "/eu2"); the master checks each location's syntax."""
    items = tuple(item.strip() for item in text.split(","))
    if not text.strip() or any(not item for item in items):
        raise InvalidArgument(f"--placement takes comma-separated locations like /eu,/eu2, got {text!r}")
    return items


@table.command()
@masters_argument
@click.argument("table_name")
@timeout_option
@handle_errors
def delete(master_addresses: str, table_name: str, timeout_s: float) -> None:
    """Delete a table and all its data."""
    with connect_cli(master_addresses, timeout_s) as client:
        client.delete_table(table_name, timeout_s=timeout_s)
    click.echo(f"deleted table {table_name}")


# --- alter (Kudu's rename_table, rename_column, delete_column, add/drop_range_partition) -------

_BOUND_TYPES = [t.value for t in RangePartitionBound]


def _wait_option(function: Callable[P, R]) -> Callable[P, R]:
    return click.option(
        "--wait/--no-wait", default=True, show_default=True,
        help="Return only once every tablet has the new schema (or every new tablet exists).",
    )(function)  # fmt: skip


@table.command("rename-table")
@masters_argument
@click.argument("table_name")
@click.argument("new_table_name")
@_wait_option
@timeout_option
@handle_errors
def rename_table(master_addresses: str, table_name: str, new_table_name: str, wait: bool, timeout_s: float) -> None:
    """Rename a table (Kudu: rename_table)."""
    with connect_cli(master_addresses, timeout_s) as client:
        client.alter_table(table_name, rename_to=new_table_name, wait=wait, timeout_s=timeout_s)
    click.echo(f"renamed table {table_name} to {new_table_name}")


@table.command("rename-column")
@masters_argument
@click.argument("table_name")
@click.argument("column_name")
@click.argument("new_column_name")
@_wait_option
@timeout_option
@handle_errors
def rename_column(
    master_addresses: str, table_name: str, column_name: str, new_column_name: str, wait: bool, timeout_s: float
) -> None:
    """Rename a column that is not part of the primary key (Kudu: rename_column)."""
    with connect_cli(master_addresses, timeout_s) as client:
        client.alter_table(table_name, rename_columns={column_name: new_column_name}, wait=wait, timeout_s=timeout_s)
    click.echo(f"renamed column {column_name} of table {table_name} to {new_column_name}")


@table.command("delete-column")
@masters_argument
@click.argument("table_name")
@click.argument("column_name")
@_wait_option
@timeout_option
@handle_errors
def delete_column(master_addresses: str, table_name: str, column_name: str, wait: bool, timeout_s: float) -> None:
    """Delete a column and its data; key columns cannot be deleted (Kudu: delete_column)."""
    with connect_cli(master_addresses, timeout_s) as client:
        client.alter_table(table_name, drop_columns=[column_name], wait=wait, timeout_s=timeout_s)
    click.echo(f"deleted column {column_name} of table {table_name}")


def _range_options(function: Callable[P, R]) -> Callable[P, R]:
    function = click.option(
        "--upper-bound-type", "--upper_bound_type", "upper_bound_type",
        type=click.Choice(_BOUND_TYPES, case_sensitive=False), default="EXCLUSIVE_BOUND", show_default=True,
        metavar="[INCLUSIVE_BOUND|EXCLUSIVE_BOUND]",
        help="Whether UPPER itself is in the range.",
    )(function)  # fmt: skip
    return click.option(
        "--lower-bound-type", "--lower_bound_type", "lower_bound_type",
        type=click.Choice(_BOUND_TYPES, case_sensitive=False), default="INCLUSIVE_BOUND", show_default=True,
        metavar="[INCLUSIVE_BOUND|EXCLUSIVE_BOUND]",
        help="Whether LOWER itself is in the range.",
    )(function)  # fmt: skip


def _range_partition(opened: Table, lower: str, upper: str, lower_type: str, upper_type: str) -> RangePartition:
    names = opened.partitioner.partition_schema.range_columns
    if not names:
        raise InvalidArgument(f"table {opened.name!r} has no range partition columns")
    return RangePartition(
        parse_range_bound(opened.schema, names, lower),
        parse_range_bound(opened.schema, names, upper),
        RangePartitionBound(lower_type.upper()),
        RangePartitionBound(upper_type.upper()),
    )


def _show_partition(opened: Table, spec: RangePartition) -> str:
    bounds = spec.bounds(opened.partitioner)
    return show_range(opened.partitioner, bounds.lower, bounds.upper)


_RANGE_HELP = """

    \b
    LOWER and UPPER list one value per range column, '[]' for unbounded:
    nyala table {verb} 127.0.0.1:7051 metrics '[2025-01-01]' '[2026-01-01]'
    nyala table {verb} 127.0.0.1:7051 events '["a", 0]' '[]'
    """


@table.command("add-range-partition", help="Add a range partition [LOWER, UPPER) (Kudu: add_range_partition)."
               + _RANGE_HELP.format(verb="add-range-partition"))  # fmt: skip
@masters_argument
@click.argument("table_name")
@click.argument("lower")
@click.argument("upper")
@_range_options
@_wait_option
@timeout_option
@handle_errors
def add_range_partition(
    master_addresses: str,
    table_name: str,
    lower: str,
    upper: str,
    lower_bound_type: str,
    upper_bound_type: str,
    wait: bool,
    timeout_s: float,
) -> None:
    shown = _alter_range_partition(
        master_addresses, table_name, (lower, lower_bound_type), (upper, upper_bound_type), wait, timeout_s, add=True
    )
    click.echo(f"added range partition {shown} to table {table_name}")


@table.command("drop-range-partition", help="Drop the range partition [LOWER, UPPER) and its rows "
               "(Kudu: drop_range_partition)." + _RANGE_HELP.format(verb="drop-range-partition"))  # fmt: skip
@masters_argument
@click.argument("table_name")
@click.argument("lower")
@click.argument("upper")
@_range_options
@_wait_option
@timeout_option
@handle_errors
def drop_range_partition(
    master_addresses: str,
    table_name: str,
    lower: str,
    upper: str,
    lower_bound_type: str,
    upper_bound_type: str,
    wait: bool,
    timeout_s: float,
) -> None:
    shown = _alter_range_partition(
        master_addresses, table_name, (lower, lower_bound_type), (upper, upper_bound_type), wait, timeout_s, add=False
    )
    click.echo(f"dropped range partition {shown} of table {table_name}")


def _alter_range_partition(
    master_addresses: str,
    table_name: str,
    lower: tuple[str, str],
    upper: tuple[str, str],
    wait: bool,
    timeout_s: float,
    *,
    add: bool,
) -> str:
    """Add or drop the range partition between ``lower`` and ``upper`` (each a bound and its
    type); returns the partition as shown to the user."""
    with connect_cli(master_addresses, timeout_s) as client:
        opened = client.open_table(table_name, timeout_s=timeout_s)
        spec = _range_partition(opened, lower[0], upper[0], lower[1], upper[1])
        added, dropped = ([spec], []) if add else ([], [spec])
        client.alter_table(
            table_name, add_range_partitions=added, drop_range_partitions=dropped, wait=wait, timeout_s=timeout_s
        )
        return _show_partition(opened, spec)


@table.command("set-placement")
@masters_argument
@click.argument("table_name")
@click.option(
    "--placement", default="", metavar="LOCATIONS",
    help="Comma-separated location subtrees the replicas must stay in, e.g. /eu.",
)  # fmt: skip
@click.option("--leader-location", default="", metavar="LOCATION", help="Where the tablets' leaders should be.")
@click.option("--clear", is_flag=True, help="Remove the policy (a range then follows the table's again).")
@click.option(
    "--range", "range_bounds", nargs=2, default=None, metavar="LOWER UPPER",
    help="Set the policy of this range partition only (bounds as for add-range-partition).",
)  # fmt: skip
@_range_options
@_wait_option
@timeout_option
@handle_errors
def set_placement(
    master_addresses: str,
    table_name: str,
    placement: str,
    leader_location: str,
    clear: bool,
    range_bounds: tuple[str, str] | None,
    lower_bound_type: str,
    upper_bound_type: str,
    wait: bool,
    timeout_s: float,
) -> None:
    """Replace the placement policy of a table, or of one of its range partitions.

    
    nyala table set-placement 127.0.0.1:7051 users --placement /eu --leader-location /eu/dc1
    nyala table set-placement 127.0.0.1:7051 events --range '[2025-01-01]' '[2026-01-01]' --placement /eu
    nyala table set-placement 127.0.0.1:7051 users --clear

    Replicas outside the new policy are moved by the rebalancer's policy fixer (the leader
    master's, when auto rebalancing is on, or nyala cluster rebalance).
    """
    if clear and (placement or leader_location):
        raise InvalidArgument("--clear removes the policy: give it without --placement or --leader-location")
    if not clear and not placement and not leader_location:
        raise InvalidArgument("give --placement, --leader-location, or --clear")
    policy = PlacementPolicy(parse_locations(placement) if placement else (), leader_location)
    with connect_cli(master_addresses, timeout_s) as client:
        if range_bounds is None:
            client.alter_table(table_name, set_placement=policy, wait=wait, timeout_s=timeout_s)
            where = f"table {table_name}"
        else:
            opened = client.open_table(table_name, timeout_s=timeout_s)
            spec = _range_partition(opened, range_bounds[0], range_bounds[1], lower_bound_type, upper_bound_type)
            client.alter_table(table_name, set_range_placements=[(spec, policy)], wait=wait, timeout_s=timeout_s)
            where = f"range {_show_partition(opened, spec)} of table {table_name}"
    click.echo(f"placement policy of {where}: {policy}")


# --- create ------------------------------------------------------------------------------


@table.command()
@masters_argument
@click.argument("table_name")
@click.option(
    "-c", "--column", "columns", multiple=True, required=True,
    help="NAME:TYPE[:not-null][:default=VALUE], e.g. id:int64 or price:decimal(10,2). Repeat for each column.",
)  # fmt: skip
@click.option("-k", "--primary-key", required=True, help="Comma-separated key columns, e.g. id or host,ts.")
@click.option("--hash", "hashes", multiple=True, help="COLUMNS:BUCKETS[:SEED], e.g. id:4. Repeat for more levels.")
@click.option("--range-columns", default="", help="Comma-separated range partition columns.")
@click.option(
    "--range", "ranges", multiple=True, nargs=2, metavar="LOWER UPPER",
    help="A range partition [LOWER, UPPER); comma-separated values per range column, '' for unbounded.",
)  # fmt: skip
@click.option("--num-replicas", type=click.IntRange(1), default=3, show_default=True)
@click.option(
    "--placement", default="", metavar="LOCATIONS",
    help="Comma-separated location subtrees the table's replicas must stay in, e.g. /eu.",
)  # fmt: skip
@click.option("--leader-location", default="", metavar="LOCATION", help="Where the tablets' leaders should be.")
@click.option(
    "--range-placement", "range_placements", multiple=True, nargs=3, metavar="LOWER UPPER LOCATIONS",
    help="A range partition's own placement policy, replacing the table's for it; bounds as for --range.",
)  # fmt: skip
@click.option("--wait/--no-wait", default=True, help="Return only once every tablet has a leader.")
@timeout_option
@handle_errors
def create(
    master_addresses: str,
    table_name: str,
    columns: tuple[str, ...],
    primary_key: str,
    hashes: tuple[str, ...],
    range_columns: str,
    ranges: tuple[tuple[str, str], ...],
    num_replicas: int,
    placement: str,
    leader_location: str,
    range_placements: tuple[tuple[str, str, str], ...],
    wait: bool,
    timeout_s: float,
) -> None:
    """Create a table.

    \b
    nyala table create 127.0.0.1:7051 metrics -c host:string -c ts:timestamp -c value:double \\
        -k host,ts --hash host:4 --range-columns ts --range 2024-01-01 2025-01-01
    """
    table_schema = schema([_column(c) for c in columns], primary_key=[k.strip() for k in primary_key.split(",")])
    partitioning = _partitioning(table_schema, hashes, range_columns, ranges)
    policy = PlacementPolicy(parse_locations(placement) if placement else (), leader_location)
    names = [c.strip() for c in range_columns.split(",") if c.strip()]
    if range_placements and not names:
        raise InvalidArgument("--range-placement needs --range-columns")
    per_range = [
        ((_bound(table_schema, names, lower), _bound(table_schema, names, upper)), parse_locations(locations))
        for lower, upper, locations in range_placements
    ]
    with connect_cli(master_addresses, timeout_s) as client, progress(f"creating table {table_name}"):
        created = client.create_table(
            table_name,
            table_schema,
            partitioning,
            num_replicas=num_replicas,
            placement=None if policy.empty else policy,
            range_placements=per_range,
            wait=wait,
            timeout_s=timeout_s,
        )
        count = len(created.partitioner.partitions)
    click.echo(f"created table {table_name} with {count} tablets of {num_replicas} replicas")


def _column(spec: str) -> ColumnSchema:
    # Types may contain ':'-free commas, e.g. decimal(10,2); split on ':' only.
    parts = spec.split(":")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise InvalidArgument(f"column {spec!r}: expected NAME:TYPE[:not-null][:default=VALUE]")
    name, type_text, flags = parts[0], parts[1], parts[2:]
    nullable, default_text = True, None
    for flag in flags:
        if flag.lower() in ("not-null", "notnull"):
            nullable = False
        elif flag.lower() in ("null", "nullable"):
            nullable = True
        elif flag.startswith("default="):
            default_text = flag[len("default=") :]
        else:
            raise InvalidArgument(f"column {spec!r}: unknown flag {flag!r} (not-null, nullable, default=VALUE)")
    column = ColumnSchema.of(name, type_text, nullable=nullable)
    if default_text is not None:
        column = ColumnSchema.of(name, type_text, nullable=nullable, default=parse_value(column, default_text))
    return column


def _partitioning(
    table_schema: Schema, hashes: tuple[str, ...], range_columns: str, ranges: tuple[tuple[str, str], ...]
) -> Partitioning:
    partitioning = Partitioning()
    for spec in hashes:
        parts = spec.split(":")
        if len(parts) not in (2, 3) or not all(p.strip().lstrip("-").isdigit() for p in parts[1:]):
            raise InvalidArgument(f"--hash {spec!r}: expected COLUMNS:BUCKETS[:SEED], e.g. id:4")
        seed = int(parts[2]) if len(parts) == 3 else 0
        partitioning.add_hash_partitions([c.strip() for c in parts[0].split(",")], int(parts[1]), seed)
    names = [c.strip() for c in range_columns.split(",") if c.strip()]
    if names:
        partitioning.set_range_partition_columns(names)
    elif ranges:
        raise InvalidArgument("--range needs --range-columns")
    for lower, upper in ranges:
        partitioning.add_range_partition(_bound(table_schema, names, lower), _bound(table_schema, names, upper))
    return partitioning


def _bound(table_schema: Schema, names: list[str], text: str) -> list[Any] | None:
    if not text.strip():
        return None
    values = split_list(text) if len(names) > 1 else [text.strip()]
    if len(values) != len(names):
        raise InvalidArgument(f"range bound {text!r} needs one value for each range column {names}")
    return [parse_value(table_schema.column(n), v) for n, v in zip(names, values, strict=True)]


def parse_range_bound(table_schema: Schema, names: tuple[str, ...], text: str) -> list[Any] | None:
    """A range bound of the alter verbs: ``[v1, v2, ...]`` with one value per range column in
    ``names``, ``[]`` for unbounded; a lone value needs no brackets when there is one range column."""
    stripped = text.strip()
    if stripped in ("[]", ""):
        return None
    if not stripped.startswith("["):
        if len(names) != 1:
            raise InvalidArgument(
                f"range bound {text!r}: write a list of one value per range column {list(names)}, "
                f"e.g. '[{', '.join('...' for _ in names)}]', or '[]' for unbounded"
            )
        stripped = f"[{stripped}]"
    if not stripped.endswith("]"):
        raise InvalidArgument(f"range bound {text!r} has no closing ']'")
    values = split_list(stripped)
    if len(values) != len(names):
        raise InvalidArgument(
            f"range bound {text!r} has {len(values)} values; the range columns are {list(names)}, "
            "one value each ('[]' for unbounded)"
        )
    return [parse_value(table_schema.column(n), v) for n, v in zip(names, values, strict=True)]


# --- scan and count ------------------------------------------------------------------------


def _predicates(opened: Table, where: tuple[str, ...]) -> list[Predicate]:
    return [parse_predicate(opened.schema, w) for w in where]


@table.command()
@masters_argument
@click.argument("table_name")
@click.option("--columns", "projection", default="", help="Comma-separated columns to read (default: all).")
@click.option("-w", "--where", multiple=True, help="A predicate such as 'id >= 10'; several are ANDed.")
@click.option("--limit", type=click.IntRange(0), default=None, help="At most this many rows.")
@click.option("--ordered", is_flag=True, help="Rows of each tablet in primary-key order (resumable).")
@click.option("--replica-selection", type=click.Choice(["leader", "closest"]), default="leader", show_default=True)
@format_option
@timeout_option
@handle_errors
def scan(
    master_addresses: str,
    table_name: str,
    projection: str,
    where: tuple[str, ...],
    limit: int | None,
    ordered: bool,
    replica_selection: str,
    output_format: str,
    timeout_s: float,
) -> None:
    """Print the rows of a table (JSON: one object per line)."""
    selection = ReplicaSelection.CLOSEST_REPLICA if replica_selection == "closest" else ReplicaSelection.LEADER_ONLY
    with connect_cli(master_addresses, timeout_s) as client:
        opened = client.open_table(table_name, timeout_s=timeout_s)
        names = [c.strip() for c in projection.split(",") if c.strip()] or None
        scanner = opened.scanner(
            names, _predicates(opened, where), limit=limit, ordered=ordered, replica_selection=selection,
            timeout_s=timeout_s,
        )  # fmt: skip
        _print_scan(scanner, output_format)


def _print_scan(scanner: Scanner, output_format: str) -> None:
    if output_format == "json":
        for batch in scanner:
            for row in batch.to_pylist():
                click.echo(json.dumps(to_jsonable(row)))
        return
    result = scanner.to_arrow()
    rows = result.to_pylist()
    emit_rows(rows, result.column_names, "table", title=f"{len(rows)} rows")


@table.command()
@masters_argument
@click.argument("table_name")
@click.option("-w", "--where", multiple=True, help="A predicate such as 'id >= 10'; several are ANDed.")
@format_option
@timeout_option
@handle_errors
def count(master_addresses: str, table_name: str, where: tuple[str, ...], output_format: str, timeout_s: float) -> None:
    """Count the rows of a table (that match the predicates)."""
    with connect_cli(master_addresses, timeout_s) as client:
        opened = client.open_table(table_name, timeout_s=timeout_s)
        rows = opened.count(_predicates(opened, where), timeout_s=timeout_s)
    if output_format == "json":
        emit_json({"table": table_name, "rows": rows})
    else:
        click.echo(rows)
