"""Scan requests become store scans; every bad field is refused by name."""

from __future__ import annotations

import json

import pytest

from nyala.errors import InvalidArgument
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import KeyRange, Predicate, encode_key
from nyala.tserver.scan_spec import plan_scan

from .conftest import SCHEMA

KEY_TYPES = [SCHEMA.column("id").type]


def key(value: int) -> bytes:
    return encode_key(KEY_TYPES, [value])


def test_defaults_read_every_column_unordered() -> None:
    planned = plan_scan(tpb.NewScanRequestPB(tablet_id="t"), SCHEMA)
    assert planned.output_columns == SCHEMA.names
    assert (planned.spec.key_range, planned.spec.limit, planned.spec.ordered) == (None, None, False)


def test_everything_is_pushed_down() -> None:
    predicates = [Predicate.compare("v", ">", 1.5).to_dict(SCHEMA)]
    request = tpb.NewScanRequestPB(
        projected_columns=["s"],
        predicates=json.dumps(predicates).encode(),
        lower_bound_primary_key=key(10),
        exclusive_upper_bound_primary_key=key(20),
        limit=5,
        order_by_primary_key=True,
    )
    planned = plan_scan(request, SCHEMA)
    assert planned.output_columns == ["s"]
    assert list(planned.spec.projection or []) == ["s", "id"]  # keys read for last_primary_key
    assert planned.spec.key_range == KeyRange((10,), (20,))
    assert list(planned.spec.predicates) == [Predicate.compare("v", ">", 1.5).bind(SCHEMA)]
    assert (planned.spec.limit, planned.spec.ordered) == (5, True)


def test_resuming_starts_just_after_the_last_key() -> None:
    request = tpb.NewScanRequestPB(lower_bound_primary_key=key(10), last_primary_key=key(15), order_by_primary_key=True)
    assert plan_scan(request, SCHEMA).spec.key_range == KeyRange((15,), None, lower_inclusive=False)


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        ({"projected_columns": ["nope"]}, "unknown column 'nope'"),
        ({"projected_columns": ["v", "v"]}, "twice"),
        ({"predicates": b"{oops"}, "not valid JSON"),
        ({"predicates": b'{"column": "v"}'}, "JSON list"),
        ({"predicates": b'[{"column": "zz", "op": "="}]'}, "unknown column 'zz'"),
        ({"lower_bound_primary_key": b"\x01"}, "lower_bound_primary_key is not an encoded primary key"),
        ({"limit": -1}, "limit must be >= 0"),
        ({"last_primary_key": b"\x80" + bytes(7)}, "order_by_primary_key"),
    ],
)
def test_bad_fields_are_refused_by_name(request_fields: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        plan_scan(tpb.NewScanRequestPB(**request_fields), SCHEMA)  # type: ignore[arg-type]
