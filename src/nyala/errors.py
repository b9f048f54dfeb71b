"""The public home of Nyala's exception tree; see :mod:`nyala.common.errors` for the diagram."""

from nyala.common.errors import (
    Aborted,
    AlreadyPresent,
    Corruption,
    IllegalState,
    InternalError,
    InvalidArgument,
    IOFailure,
    NetworkError,
    NotFound,
    NotTheLeader,
    NyalaError,
    RetriableError,
    ServiceUnavailable,
    StorageError,
    TimedOut,
)

__all__ = [
    "Aborted",
    "AlreadyPresent",
    "Corruption",
    "IOFailure",
    "IllegalState",
    "InternalError",
    "InvalidArgument",
    "NetworkError",
    "NotFound",
    "NotTheLeader",
    "NyalaError",
    "RetriableError",
    "ServiceUnavailable",
    "StorageError",
    "TimedOut",
]
