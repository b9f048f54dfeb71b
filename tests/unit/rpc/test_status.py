"""Every wire status code maps to one exception class and back."""

from __future__ import annotations

import pytest

from nyala import errors
from nyala.proto import rpc_pb2
from nyala.rpc.status import error_to_status, status_to_error

ERROR_CODES = [v.number for v in rpc_pb2.StatusCode.DESCRIPTOR.values if v.number != rpc_pb2.OK]


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: rpc_pb2.StatusCode.Name(c))
def test_each_code_round_trips_through_its_exception(code: int) -> None:
    exc = status_to_error(code, "what happened", "leader-1")
    assert isinstance(exc, errors.NyalaError)
    assert str(exc) == "what happened"
    assert error_to_status(exc)[:2] == (code, "what happened")


def test_codes_map_to_distinct_classes() -> None:
    classes = [type(status_to_error(code, "")) for code in ERROR_CODES]
    assert len(set(classes)) == len(classes)


def test_not_the_leader_keeps_its_hint_both_ways() -> None:
    exc = status_to_error(rpc_pb2.NOT_THE_LEADER, "ask elsewhere", "127.0.0.2:7050")
    assert isinstance(exc, errors.NotTheLeader)
    assert exc.leader_hint == "127.0.0.2:7050"
    assert exc.retriable
    assert error_to_status(exc) == (rpc_pb2.NOT_THE_LEADER, "ask elsewhere", "127.0.0.2:7050")


def test_an_unexpected_exception_is_internal_and_names_its_type() -> None:
    code, message, _ = error_to_status(KeyError("tablet-7"))
    assert code == rpc_pb2.INTERNAL
    assert message == "KeyError: 'tablet-7'"


def test_an_unknown_code_from_a_newer_peer_is_an_internal_error() -> None:
    exc = status_to_error(999, "from the future")
    assert isinstance(exc, errors.InternalError)
    assert "999" in str(exc)
