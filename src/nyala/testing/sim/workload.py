"""Clients of the replicated key-value store, recording a history for the linearizability check.

Each client runs one operation at a time: a write of a unique value or a read-index read of
a random key.  It sends to the replica it believes leads, follows NotTheLeader hints, and
retries refusals (they had no effect, so they are not in the history).  An accepted
operation is recorded with its call time and its return time, or with an unknown outcome
(return "at infinity") when the replica crashed or the client gave up waiting.  A write
whose index was taken by another term's entry definitely failed and is left out.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from nyala.consensus.core import OpId
from nyala.errors import NotTheLeader, NyalaError
from nyala.testing.linearizability import Operation
from nyala.testing.sim.cluster import Cluster
from nyala.testing.sim.kv import encode_put
from nyala.testing.sim.loop import MS
from nyala.testing.sim.node import PendingOp, SimNode

__all__ = ["Workload"]


@dataclass(slots=True)
class _Client:
    client_id: int
    target: str = ""
    token: int = 0  # identifies the current operation; late callbacks of older ones are ignored
    written: int = 0
    busy: bool = False


@dataclass(slots=True)
class _Request:
    client: _Client
    token: int
    key: str
    write: bool
    value: str
    attempts: int = 0
    call_us: int = 0
    op: PendingOp | None = field(default=None)


class Workload:
    def __init__(
        self,
        cluster: Cluster,
        rng: random.Random,
        clients: int = 4,
        keys: int = 6,
        think_ms: tuple[int, int] = (0, 150),
        timeout_ms: int = 3_000,
    ) -> None:
        self.cluster = cluster
        self._rng = rng
        self._keys = [f"k{i}" for i in range(keys)]
        self._think_us = (think_ms[0] * MS, think_ms[1] * MS)
        self._timeout_us = timeout_ms * MS
        self._clients = [_Client(i) for i in range(clients)]
        self.history: dict[str, list[Operation]] = {k: [] for k in self._keys}
        self.acked_writes: list[OpId] = []
        self.accepted = 0
        self.unknown = 0
        self.stopping = False

    def start(self) -> None:
        for client in self._clients:
            client.busy = True
            self.cluster.loop.call_later(self._rng.randint(*self._think_us), self._next_op, client)

    def stop(self) -> None:
        self.stopping = True

    @property
    def idle(self) -> bool:
        return not any(c.busy for c in self._clients)

    # ------------------------------------------------------------------ one operation

    def _next_op(self, client: _Client) -> None:
        if self.stopping:
            client.busy = False
            return
        client.token += 1
        key = self._rng.choice(self._keys)
        write = self._rng.random() < 0.5
        value = ""
        if write:
            client.written += 1
            value = f"{client.client_id}.{client.written}"
        self._attempt(_Request(client, client.token, key, write, value))

    def _attempt(self, req: _Request) -> None:
        if self.stopping:
            req.client.busy = False
            return
        req.attempts += 1
        if req.attempts > 60:
            self._schedule_next(req.client)  # nobody would take it: give up, it had no effect
            return
        node = self._pick(req.client)
        if node is None:
            self.cluster.loop.call_later(50 * MS, self._attempt, req)
            return
        req.call_us = self.cluster.loop.now
        op = PendingOp(lambda outcome, value: self._finished(req, outcome, value))
        try:
            if req.write:
                node.submit_write(encode_put(req.key, req.value), op)
            else:
                node.submit_read(req.key, op)
        except NotTheLeader as exc:
            hint = exc.leader_hint if exc.leader_hint != node.peer_id else ""
            req.client.target = hint
            if not hint:
                self._rotate(req.client, node)
            # Follow a hint at once; without one, an election is probably running: back off.
            self.cluster.loop.call_later((10 if hint else 50) * MS, self._attempt, req)
            return
        except NyalaError:
            self.cluster.loop.call_later(50 * MS, self._attempt, req)
            return
        req.op = op
        self.accepted += 1
        self.cluster.loop.call_later(self._timeout_us, self._timed_out, req)

    def _pick(self, client: _Client) -> SimNode | None:
        node = self.cluster.nodes.get(client.target)
        if node is not None and node.up and not node.paused:
            return node
        candidates = [n for n in self.cluster.nodes.values() if n.up and not n.paused]
        if not candidates:
            return None
        node = self._rng.choice(candidates)
        client.target = node.peer_id
        return node

    def _rotate(self, client: _Client, node: SimNode) -> None:
        ids = list(self.cluster.nodes)
        if node.peer_id in ids:
            client.target = ids[(ids.index(node.peer_id) + 1) % len(ids)]

    def _timed_out(self, req: _Request) -> None:
        if req.op is not None:
            req.op.finish("unknown")

    def _finished(self, req: _Request, outcome: str, value: Any) -> None:
        now = self.cluster.loop.now
        if outcome == "ok":
            if req.write:
                self.acked_writes.append(value)
                self._record(req, now / MS, ("w", req.value), None)
            else:
                self._record(req, now / MS, ("r",), value)
        elif outcome == "unknown" and req.write:
            self.unknown += 1
            self._record(req, None, ("w", req.value), None)
        # "fail" had no effect; an unanswered read constrains nothing.
        if req.token == req.client.token:
            self._schedule_next(req.client)

    def _record(self, req: _Request, ret_ms: float | None, input: tuple[str, ...], output: Any) -> None:
        self.history[req.key].append(Operation(req.client.client_id, req.call_us / MS, ret_ms, input, output))

    def _schedule_next(self, client: _Client) -> None:
        if self.stopping:
            client.busy = False
            return
        self.cluster.loop.call_later(self._rng.randint(*self._think_us), self._next_op, client)
