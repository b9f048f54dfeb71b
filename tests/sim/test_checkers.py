"""The checkers themselves: they accept correct histories and reject broken ones."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nyala.consensus.core import EntryType, LogEntry
from nyala.testing.linearizability import Operation, check_kv_history, check_operations, register_step
from nyala.testing.sim import SafetyChecker, SafetyViolation
from nyala.testing.sim.disk import chain_hash


def w(client: int, call: float, ret: float | None, value: str) -> Operation:
    return Operation(client, call, ret, ("w", value))


def r(client: int, call: float, ret: float, value: str | None) -> Operation:
    return Operation(client, call, ret, ("r",), value)


def linearizable(ops: list[Operation]) -> bool:
    return check_operations(ops, register_step, None)


def test_a_sequential_history_is_linearizable() -> None:
    assert linearizable([w(1, 0, 1, "a"), r(2, 2, 3, "a"), w(1, 4, 5, "b"), r(2, 6, 7, "b")])


def test_a_stale_read_is_not() -> None:
    assert not linearizable([w(1, 0, 1, "a"), w(1, 2, 3, "b"), r(2, 4, 5, "a")])


def test_a_read_of_a_value_never_written_is_not() -> None:
    assert not linearizable([w(1, 0, 1, "a"), r(2, 2, 3, "zz")])


def test_overlapping_operations_may_take_effect_in_either_order() -> None:
    assert linearizable([w(1, 0, 10, "a"), r(2, 1, 2, None), r(3, 3, 4, "a"), r(2, 5, 6, "a")])
    # ...but not both orders at once: once "a" is seen, the old value cannot come back.
    assert not linearizable([w(1, 0, 10, "a"), r(3, 3, 4, "a"), r(2, 5, 6, None)])


def test_a_write_with_unknown_outcome_may_or_may_not_have_happened() -> None:
    assert linearizable([w(1, 0, None, "a"), r(2, 5, 6, None), r(2, 7, 8, "a")])
    assert linearizable([w(1, 0, None, "a"), r(2, 5, 6, None)])
    assert not linearizable([w(1, 0, None, "a"), r(2, 5, 6, "a"), r(2, 7, 8, None)])


def test_histories_are_checked_key_by_key() -> None:
    results = check_kv_history({"x": [w(1, 0, 1, "a"), r(2, 2, 3, "a")], "y": [w(1, 0, 1, "b"), r(2, 2, 3, "c")]})
    assert [(res.key, res.ok) for res in results] == [("x", True), ("y", False)]
    assert results[1].history, "a failing key reports its history"


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32))
def test_any_history_produced_by_a_real_register_is_linearizable(seed: int) -> None:
    # Simulate clients against an atomic register whose effects happen at random instants
    # inside each operation's interval: the result must always be accepted.
    rng = random.Random(seed)
    value: str | None = None
    ops = []
    events = []
    for client in range(4):
        t = 0.0
        for k in range(8):
            call = t + rng.random()
            ret = call + rng.random() * 3
            events.append((rng.uniform(call, ret), client, k, call, ret))
            t = ret
    for at, client, k, call, ret in sorted(events):
        if rng.random() < 0.5:
            value = f"{client}.{k}"
            ops.append(w(client, call, ret if rng.random() < 0.9 else None, value))
        else:
            ops.append(r(client, call, ret, value))
        del at
    assert linearizable(ops)


def entry(index: int, term: int, payload: bytes = b"x") -> LogEntry:
    return LogEntry(term, index, EntryType.WRITE, payload)


def test_two_leaders_in_one_term_are_caught() -> None:
    from tests.unit.consensus.helpers import make_core

    checker = SafetyChecker()
    a, b = make_core("a"), make_core("b")
    a.campaign()
    b.campaign()
    checker.on_leader("a", a)
    with pytest.raises(SafetyViolation, match="election safety"):
        checker.on_leader("b", b)


def test_diverging_histories_under_one_index_and_term_are_caught() -> None:
    checker = SafetyChecker()
    first, other = entry(1, 1, b"p"), entry(1, 1, b"q")
    checker.on_append("a", entry(2, 1), chain_hash(chain_hash(0, first), entry(2, 1)))
    with pytest.raises(SafetyViolation, match="log matching"):
        checker.on_append("b", entry(2, 1), chain_hash(chain_hash(0, other), entry(2, 1)))


def test_different_entries_applied_at_one_index_are_caught() -> None:
    checker = SafetyChecker()
    checker.on_apply("a", entry(3, 1, b"p"))
    with pytest.raises(SafetyViolation, match="state machine safety"):
        checker.on_apply("b", entry(3, 2, b"q"))


def test_truncating_an_applied_entry_is_caught() -> None:
    checker = SafetyChecker()
    checker.on_apply("a", entry(3, 1))
    checker.on_truncate("b", [entry(4, 1)])
    with pytest.raises(SafetyViolation, match="committed entry lost"):
        checker.on_truncate("b", [entry(3, 1)])
