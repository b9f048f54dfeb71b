"""CreateTable validation: every bad request gets InvalidArgument naming the problem."""

from __future__ import annotations

import dataclasses

import pytest

from nyala.catalog import (
    MAX_ENTRY_VALUE_BYTES,
    CatalogOptions,
    NewTablet,
    create_table_write,
    validate_create_table,
)
from nyala.errors import InvalidArgument
from nyala.proto import master_pb2 as mpb
from nyala.schema import ColumnSchema

from .helpers import OPTIONS, create_request, partitioner, schema, servers


def test_a_good_request_is_validated_with_the_default_replication_factor() -> None:
    request = create_request(num_replicas=0)
    new = validate_create_table(request, 3, OPTIONS)
    assert (new.name, new.num_replicas, len(new.partitioner.partitions)) == ("t", 3, 4)
    assert new.schema == schema()


def test_no_partitioner_means_one_unbounded_tablet() -> None:
    request = mpb.CreateTableRequestPB(name="t", schema=schema().to_json(), num_replicas=1)
    new = validate_create_table(request, 1, OPTIONS)
    assert len(new.partitioner.partitions) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": ""}, "table name must not be empty"),
        ({"name": "x" * 257}, "longer than 256 bytes"),
        ({"name": "a\nb"}, "non-printable"),
        ({"schema": b"{not json"}, "schema is not valid JSON"),
        ({"schema": b""}, "a table needs a schema"),
        ({"schema": b'{"columns": [], "key_column_count": 1}'}, "at least one column"),
        ({"partitioner": b"[1, 2"}, "malformed partitioning description"),
        ({"num_replicas": 2}, "replication factor 2: the replication factor must be odd"),
        ({"num_replicas": 7}, "replication factor 7: the maximum is 5"),
        ({"num_replicas": -1}, "at least 1"),
    ],
)
def test_bad_requests_name_the_problem(change: dict[str, object], message: str) -> None:
    request = create_request()
    for field, value in change.items():
        setattr(request, field, value)
    with pytest.raises(InvalidArgument, match=message):
        validate_create_table(request, 5, OPTIONS)


def test_nullable_key_column_is_refused() -> None:
    request = create_request()
    request.schema = request.schema.replace(b'"name":"id","nullable":false', b'"name":"id","nullable":true')
    with pytest.raises(InvalidArgument, match="primary key column 'id' must not be nullable"):
        validate_create_table(request, 3, OPTIONS)


def test_more_replicas_than_live_tablet_servers_names_both_numbers() -> None:
    with pytest.raises(InvalidArgument, match=r"replication factor 3; 2 tablet servers are alive"):
        validate_create_table(create_request(num_replicas=3), 2, OPTIONS)


def test_too_many_tablets_at_creation_names_the_limit() -> None:
    options = CatalogOptions(max_create_tablets_per_ts=2)
    # 4 tablets x 3 replicas = 12 > 2 per server x 3 servers = 6.
    with pytest.raises(InvalidArgument, match=r"12\) is over the maximum permitted at creation time \(6"):
        validate_create_table(create_request(num_replicas=3), 3, options)
    validate_create_table(create_request(num_replicas=1, buckets=3, ranges=[(0, 1)]), 3, options)


def test_partitioner_of_another_schema_and_no_ranges_are_refused() -> None:
    request = create_request()
    other = schema().add_column(ColumnSchema.of("x", "int8"))
    request.partitioner = partitioner(other).to_json()
    with pytest.raises(InvalidArgument, match="not the table's schema"):
        validate_create_table(request, 3, OPTIONS)
    request.partitioner = partitioner(ranges=[]).to_json()
    with pytest.raises(InvalidArgument, match="no range partitions"):
        validate_create_table(request, 3, OPTIONS)


def test_catalog_options_are_checked() -> None:
    with pytest.raises(InvalidArgument, match="odd"):
        CatalogOptions(max_num_replicas=4)
    with pytest.raises(InvalidArgument, match="default_num_replicas"):
        CatalogOptions(default_num_replicas=7)


def test_an_entry_too_large_for_the_sys_catalog_is_refused() -> None:
    new = validate_create_table(create_request(), 3, OPTIONS)
    tablets = [NewTablet(f"{i:032x}", p, servers()) for i, p in enumerate(new.partitioner.partitions)]
    create_table_write("a" * 32, new, tablets, now_us=0)  # fits
    huge = dataclasses.replace(new, name="y" * (MAX_ENTRY_VALUE_BYTES + 1))
    with pytest.raises(InvalidArgument, match="over the limit of 65536 bytes"):
        create_table_write("a" * 32, huge, tablets, now_us=0)


def test_even_replication_factors_need_the_unsafe_option() -> None:
    with pytest.raises(InvalidArgument, match="even factors need the master's --allow-unsafe-replication-factor"):
        validate_create_table(create_request(num_replicas=4), 4, OPTIONS)
    unsafe = CatalogOptions(allow_unsafe_replication_factor=True)
    assert validate_create_table(create_request(num_replicas=4), 4, unsafe).num_replicas == 4
    assert validate_create_table(create_request(num_replicas=2), 4, unsafe).num_replicas == 2
    with pytest.raises(InvalidArgument, match="the maximum is 5"):
        validate_create_table(create_request(num_replicas=6), 6, unsafe)
    with pytest.raises(InvalidArgument, match="replication factor 4; 3 tablet servers are alive"):
        validate_create_table(create_request(num_replicas=4), 3, unsafe)
    with pytest.raises(InvalidArgument, match="default_num_replicas 4 is even"):
        CatalogOptions(default_num_replicas=4)
    assert CatalogOptions(default_num_replicas=4, allow_unsafe_replication_factor=True).default_num_replicas == 4
    assert CatalogOptions(max_num_replicas=6, allow_unsafe_replication_factor=True).max_num_replicas == 6
