"""Nyala's RPC layer: protobuf messages over Nyala's own framing on asyncio.

How it works:

- A client connection opens with an 8-byte preamble, then both directions carry frames:
  a 4-byte length (checked against ``max_frame_bytes`` before anything is allocated), a
  4-byte header length, a protobuf header (call id, service and method, the caller's
  remaining timeout, or the response status), one protobuf body and raw sidecars.  See
  :mod:`nyala.rpc.framing` for the byte layout.
- :class:`Messenger` keeps one connection per peer and multiplexes any number of calls on
  it by call id; each call has a deadline enforced on both sides: the caller stops waiting,
  and the server cancels the handler and answers TIMED_OUT.
- :class:`RpcServer` dispatches by service and method to ``async`` handlers that take the
  request and a :class:`CallContext`.  Errors cross the wire as status codes mapped to and
  from ``nyala.errors`` in :mod:`nyala.rpc.status` only.
- Sidecars carry bulk bytes (Arrow IPC, tablet-copy chunks) beside the body, never
  re-encoded; large frames are received straight into their own buffer.
- TLS and mutual TLS come from :mod:`nyala.rpc.tls`; :func:`nyala.rpc.loop.run` uses uvloop
  when it is installed.

Measured on a 2-core machine: see ``bench/rpc_bench.py`` and docs/rpc.md.
"""

from nyala.rpc.client import Messenger
from nyala.rpc.framing import Buffer, Sidecar, SplitSidecar
from nyala.rpc.method import PING, RpcMethod
from nyala.rpc.options import RpcOptions
from nyala.rpc.server import AsyncHandler, CallContext, InlineHandler, RpcServer

__all__ = [
    "PING",
    "AsyncHandler",
    "Buffer",
    "CallContext",
    "InlineHandler",
    "Messenger",
    "RpcMethod",
    "RpcOptions",
    "RpcServer",
    "Sidecar",
    "SplitSidecar",
]
