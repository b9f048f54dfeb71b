"""Typed descriptors naming one RPC method, shared by the server that serves it and its callers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from google.protobuf.message import Message

from nyala.proto import rpc_pb2

__all__ = ["PING", "RpcMethod"]

RequestT = TypeVar("RequestT", bound=Message)
ResponseT = TypeVar("ResponseT", bound=Message)


@dataclass(frozen=True, slots=True)
class RpcMethod(Generic[RequestT, ResponseT]):
    """``service.name`` with its request and response message types."""

    service: str
    name: str
    request_type: type[RequestT]
    response_type: type[ResponseT]
    #: ``Service.Method``, as logs and errors print it.
    full_name: str = field(init=False, repr=False)
    #: How a request frame names the method (computed once, not per call).
    wire_name: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for part in (self.service, self.name):
            if not part or "." in part:
                raise ValueError(f"RPC service and method names must be non-empty without dots: {part!r}")
        object.__setattr__(self, "full_name", f"{self.service}.{self.name}")
        object.__setattr__(self, "wire_name", self.full_name.encode())


# Every server answers Ping (Kudu's GenericService.Ping): health checks and round-trip times.
PING = RpcMethod("GenericService", "Ping", rpc_pb2.PingRequest, rpc_pb2.PingResponse)
