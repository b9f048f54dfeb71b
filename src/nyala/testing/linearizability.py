"""Linearizability checking: Wing and Gong's search with Lowe's memoisation, per key.

A history is a set of operations, each with the time it was called and the time it returned
(``None`` when the outcome is unknown: the client timed out or its server crashed).  It is
linearizable if the operations can be put in one sequential order that (a) respects real
time, an operation that returned before another was called comes first, and (b) is legal
for the sequential model (a register: a read returns the last value written).

The search walks a doubly linked list of call and return events in time order.  At a call
it tries to linearize that operation now: if the model accepts it, the operation's call and
return are lifted out of the list and the search restarts from the front; at a return
event, the operation that returns there was not linearized in time, so the search
backtracks.  Lowe's memoisation remembers every (set of linearized operations, model state)
already reached, stored as an int bitmask and the state, and never expands one twice, which
makes typical histories near linear.  An operation with an unknown outcome returns "at
infinity": it may be linearized anywhere after its call, including after everything else,
which is equivalent to it never having taken effect.

Histories are split by key first (P-compositionality: a key-value store is linearizable iff
each key is), which keeps every search small.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KeyResult",
    "Operation",
    "check_kv_history",
    "check_operations",
    "format_history",
    "register_step",
]

# A model's step: (state, input, output) -> (legal, next state).  States must be hashable.
Step = Callable[[Hashable, Any, Any], tuple[bool, Hashable]]


@dataclass(frozen=True, slots=True)
class Operation:
    """One client operation.  ``ret`` is None when the outcome is unknown."""

    client: int
    call: float
    ret: float | None
    input: Any
    output: Any = None


@dataclass(frozen=True, slots=True)
class KeyResult:
    """The verdict for one key, with its history when it failed."""

    key: str
    ok: bool
    operations: int
    history: tuple[Operation, ...] = ()


def register_step(state: Hashable, input: Any, output: Any) -> tuple[bool, Hashable]:
    """A read/write register: input ``("w", value)`` or ``("r",)``; a read's output is the value."""
    if input[0] == "w":
        return True, input[1]
    return output == state, state


class _Node:
    __slots__ = ("is_call", "match", "next", "op_id", "prev")

    def __init__(self, op_id: int, is_call: bool) -> None:
        self.op_id = op_id
        self.is_call = is_call
        self.match: _Node | None = None  # a call's return node
        self.prev: _Node | None = None
        self.next: _Node | None = None


def _build_list(ops: Sequence[Operation]) -> _Node:
    events: list[tuple[float, int, int]] = []  # (time, 0 for call / 1 for return, op id)
    for op_id, op in enumerate(ops):
        events.append((op.call, 0, op_id))
        events.append((math.inf if op.ret is None else op.ret, 1, op_id))
    # At equal times calls sort first, so touching operations count as concurrent (lenient).
    events.sort()
    head = _Node(-1, False)
    tail = head
    calls: dict[int, _Node] = {}
    for _, kind, op_id in events:
        node = _Node(op_id, kind == 0)
        if kind == 0:
            calls[op_id] = node
        else:
            calls[op_id].match = node
        node.prev = tail
        tail.next = node
        tail = node
    return head


def _lift(call: _Node) -> None:
    ret = call.match
    assert call.prev is not None
    assert ret is not None
    assert ret.prev is not None
    call.prev.next = call.next
    if call.next is not None:
        call.next.prev = call.prev
    ret.prev.next = ret.next
    if ret.next is not None:
        ret.next.prev = ret.prev


def _unlift(call: _Node) -> None:
    ret = call.match
    assert call.prev is not None
    assert ret is not None
    assert ret.prev is not None
    ret.prev.next = ret
    if ret.next is not None:
        ret.next.prev = ret
    call.prev.next = call
    if call.next is not None:
        call.next.prev = call


def check_operations(ops: Sequence[Operation], step: Step, initial: Hashable) -> bool:
    """Whether ``ops`` are linearizable for the model (``step``, ``initial``)."""
    head = _build_list(ops)
    state = initial
    linearized = 0
    seen: set[tuple[int, Hashable]] = set()
    stack: list[tuple[_Node, Hashable]] = []
    node = head.next
    while head.next is not None:
        assert node is not None
        if node.is_call:
            op = ops[node.op_id]
            legal, new_state = step(state, op.input, op.output)
            if legal:
                new_linearized = linearized | (1 << node.op_id)
                if (new_linearized, new_state) not in seen:
                    seen.add((new_linearized, new_state))
                    stack.append((node, state))
                    state, linearized = new_state, new_linearized
                    _lift(node)
                    node = head.next
                    continue
            node = node.next
        else:
            if not stack:
                return False
            node, state = stack.pop()
            linearized &= ~(1 << node.op_id)
            _unlift(node)
            node = node.next
    return True


def check_kv_history(ops_by_key: dict[str, list[Operation]], initial: Hashable = None) -> list[KeyResult]:
    """Check every key's register history on its own; returns one result per key, in key order.

    Reads with an unknown outcome are dropped first: they constrain nothing.
    """
    results = []
    for key in sorted(ops_by_key):
        ops = [op for op in ops_by_key[key] if op.ret is not None or op.input[0] != "r"]
        ok = check_operations(ops, register_step, initial)
        results.append(KeyResult(key, ok, len(ops), () if ok else tuple(sorted(ops, key=_by_call))))
    return results


def _by_call(op: Operation) -> float:
    return op.call


def format_history(ops: Iterable[Operation]) -> str:
    """A compact, human-readable listing of a history (for failure reports)."""
    lines = []
    for op in ops:
        ret = "?" if op.ret is None else f"{op.ret:.1f}"
        what = f"write {op.input[1]!r}" if op.input[0] == "w" else f"read -> {op.output!r}"
        lines.append(f"  client {op.client:>3} [{op.call:.1f} .. {ret}] {what}")
    return "\n".join(lines)
