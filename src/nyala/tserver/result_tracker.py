"""Exactly-once writes: the answers a tablet has given, by client id and sequence number.

Kudu's ResultTracker, reduced to what Nyala's one retried RPC (Write) needs.  A client names
each write batch with a request id (client id, sequence number) that every retry repeats,
and tells the tablet the lowest sequence number it still waits for.

- Every replica records a tracked write's answer when it APPLIES the log entry (the request
  id travels in the entry), so after a leader change the new leader knows what the old one
  applied.  Recording never changes what apply does, so replicas that remember different
  things (one restarted and forgot) still reach the same data.
- The leader answers a retry from the record instead of replicating the write again.  Before
  it looks, it has applied every entry of earlier terms (:meth:`TabletReplica.write` waits
  once per term), so a write the previous leader committed is always found; a retry that
  arrives while the original is still replicating on this leader waits for the original,
  even when the original's RPC handler was cancelled at its deadline (the replication runs
  as a task of its own).
- Forgetting: a client's answers below its ``first_incomplete_seq_no`` are dropped when a
  later write of that client says so; answers older than ``remember_responses_ttl_ms`` and
  clients idle for ``remember_clients_ttl_ms`` are dropped by a sweep (Kudu's flags and
  defaults).  A retry of a forgotten answer below first_incomplete is refused (Aborted), as
  Kudu refuses a stale request.
- Records live in memory: a restarted replica has forgotten them (a retry that spans the
  restart of every replica of the tablet applies again, which is at-least-once).

``record`` runs on the apply thread, lookups on the event loop, hence the lock.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from nyala.errors import Aborted, InvalidArgument
from nyala.proto import tserver_pb2 as tpb
from nyala.tserver.envelope import RequestId

__all__ = ["ResultTracker", "request_id_from_pb"]

# A sweep for expired answers at most this often (seconds); they are few and small.
_SWEEP_INTERVAL_S = 10.0
MAX_CLIENT_ID_BYTES = 64


def request_id_from_pb(pb: tpb.RequestIdPB) -> RequestId:
    """Validate a request id from the wire; InvalidArgument names what is wrong."""
    client = pb.client_id
    if not client or len(client.encode()) > MAX_CLIENT_ID_BYTES:
        raise InvalidArgument(f"request id: client_id must be 1 to {MAX_CLIENT_ID_BYTES} bytes, got {client!r}")
    if pb.seq_no < 1:
        raise InvalidArgument(f"request id: seq_no must be at least 1, got {pb.seq_no}")
    if not 0 <= pb.first_incomplete_seq_no <= pb.seq_no:
        raise InvalidArgument(
            f"request id: first_incomplete_seq_no must be between 0 and seq_no ({pb.seq_no}), "
            f"got {pb.first_incomplete_seq_no}"
        )
    return RequestId(client, pb.seq_no, pb.first_incomplete_seq_no)


@dataclass(slots=True)
class _Client:
    first_incomplete: int = 0
    last_used: float = 0.0
    # seq_no -> (serialized WriteResponsePB, when recorded)
    answers: dict[int, tuple[bytes, float]] = field(default_factory=dict)


class ResultTracker:
    """The answers of one tablet's tracked writes."""

    def __init__(
        self,
        responses_ttl_s: float = 600.0,
        clients_ttl_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._responses_ttl_s = responses_ttl_s
        self._clients_ttl_s = clients_ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._clients: dict[str, _Client] = {}
        self._next_sweep = clock() + _SWEEP_INTERVAL_S
        # Writes this replica, as leader, is replicating now (event loop only).
        self._in_flight: dict[tuple[str, int], asyncio.Task[tpb.WriteResponsePB]] = {}

    def __len__(self) -> int:
        with self._lock:
            return sum(len(c.answers) for c in self._clients.values())

    def clients(self) -> list[str]:
        """The clients remembered, sorted."""
        with self._lock:
            return sorted(self._clients)

    def record(self, request_id: RequestId, response: tpb.WriteResponsePB) -> None:
        """Remember the answer of an applied write (any replica, apply thread)."""
        now = self._clock()
        with self._lock:
            client = self._clients.setdefault(request_id.client_id, _Client())
            client.last_used = now
            if request_id.first_incomplete_seq_no > client.first_incomplete:
                client.first_incomplete = request_id.first_incomplete_seq_no
                client.answers = {s: a for s, a in client.answers.items() if s >= client.first_incomplete}
            # The first answer is THE answer: a duplicate that reached the log is not re-recorded.
            client.answers.setdefault(request_id.seq_no, (response.SerializeToString(), now))
            if now >= self._next_sweep:
                self._sweep(now)

    def lookup(self, request_id: RequestId) -> tpb.WriteResponsePB | None:
        """The recorded answer; None when the write was never applied here; Aborted when forgotten."""
        with self._lock:
            client = self._clients.get(request_id.client_id)
            if client is None:
                return None
            client.last_used = self._clock()
            answer = client.answers.get(request_id.seq_no)
            if answer is None:
                if request_id.seq_no < client.first_incomplete:
                    raise Aborted(
                        f"write {request_id.seq_no} of client {request_id.client_id} was already completed and "
                        f"its answer is no longer kept (the client said everything below "
                        f"{client.first_incomplete} completed)"
                    )
                return None
        response = tpb.WriteResponsePB()
        response.ParseFromString(answer[0])
        return response

    def in_flight(self, request_id: RequestId) -> asyncio.Task[tpb.WriteResponsePB] | None:
        return self._in_flight.get((request_id.client_id, request_id.seq_no))

    def start(
        self, request_id: RequestId, write: Coroutine[Any, Any, tpb.WriteResponsePB]
    ) -> asyncio.Task[tpb.WriteResponsePB]:
        """Replicate a write as a task of its own, registered until it ends; retries wait on it.

        The task outlives the RPC handler that started it: a handler cancelled at its deadline
        leaves the entry replicating, and a retry must find it here rather than propose the
        write a second time."""
        key = (request_id.client_id, request_id.seq_no)
        task = asyncio.get_running_loop().create_task(write)
        self._in_flight[key] = task

        def done(finished: asyncio.Task[tpb.WriteResponsePB]) -> None:
            self._in_flight.pop(key, None)
            if not finished.cancelled():
                finished.exception()  # retrieved, so a failure nobody awaits is not logged as lost

        task.add_done_callback(done)
        return task

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + _SWEEP_INTERVAL_S
        for client_id in list(self._clients):
            client = self._clients[client_id]
            if now - client.last_used > self._clients_ttl_s:
                del self._clients[client_id]
                continue
            client.answers = {s: a for s, a in client.answers.items() if now - a[1] <= self._responses_ttl_s}
