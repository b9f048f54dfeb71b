"""The one place where wire status codes and ``nyala.errors`` classes meet.

A server turns an exception into ``(code, message, leader_hint)`` with :func:`error_to_status`;
a client turns a non-OK status back into an exception with :func:`status_to_error`.  Every
code maps to exactly one class and back, so an error keeps its meaning across the wire.
"""

from __future__ import annotations

from nyala import errors
from nyala.proto import rpc_pb2

__all__ = ["StatusCode", "error_to_status", "status_to_error"]

StatusCode = rpc_pb2.StatusCode

_CODE_TO_ERROR: dict[int, type[errors.NyalaError]] = {
    rpc_pb2.NOT_FOUND: errors.NotFound,
    rpc_pb2.ALREADY_PRESENT: errors.AlreadyPresent,
    rpc_pb2.INVALID_ARGUMENT: errors.InvalidArgument,
    rpc_pb2.ILLEGAL_STATE: errors.IllegalState,
    rpc_pb2.SERVICE_UNAVAILABLE: errors.ServiceUnavailable,
    rpc_pb2.TIMED_OUT: errors.TimedOut,
    rpc_pb2.NOT_THE_LEADER: errors.NotTheLeader,
    rpc_pb2.CORRUPTION: errors.Corruption,
    rpc_pb2.IO_ERROR: errors.IOFailure,
    rpc_pb2.ABORTED: errors.Aborted,
    rpc_pb2.NETWORK_ERROR: errors.NetworkError,
    rpc_pb2.INTERNAL: errors.InternalError,
}

# Most specific class first, so a subclass never hides behind its parent's code.
_ERROR_TO_CODE: list[tuple[type[errors.NyalaError], int]] = sorted(
    ((cls, code) for code, cls in _CODE_TO_ERROR.items()),
    key=lambda pair: -len(pair[0].__mro__),
)


def error_to_status(exc: BaseException) -> tuple[int, str, str]:
    """The wire form of an exception raised by a handler: (code, message, leader hint)."""
    if isinstance(exc, errors.NyalaError):
        for cls, code in _ERROR_TO_CODE:
            if isinstance(exc, cls):
                hint = exc.leader_hint if isinstance(exc, errors.NotTheLeader) else ""
                return code, str(exc), hint
        # A NyalaError subclass outside the table (e.g. RetriableError itself).
        return rpc_pb2.SERVICE_UNAVAILABLE if exc.retriable else rpc_pb2.INTERNAL, str(exc), ""
    return rpc_pb2.INTERNAL, f"{type(exc).__name__}: {exc}", ""


def status_to_error(code: int, message: str, leader_hint: str = "") -> errors.NyalaError:
    """The exception a caller sees for a non-OK status."""
    cls = _CODE_TO_ERROR.get(code)
    if cls is None:
        return errors.InternalError(f"unknown status code {code}: {message}")
    if cls is errors.NotTheLeader:
        return errors.NotTheLeader(message, leader_hint=leader_hint)
    return cls(message)
