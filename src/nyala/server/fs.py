"""A server's data directory: an exclusive lock, its permanent identity, and its status file.

``instance`` holds the server's permanent uuid, created on first start and kept forever
(Kudu's instance file): the uuid names the server in every Raft config.  ``LOCK`` is held
with ``flock`` for the life of the process, so two servers can never share one directory.
``server.json`` is rewritten atomically once the server listens, telling supervisors (the
local cluster, MiniCluster) its uuid, address and pid.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid as uuid_module
from dataclasses import asdict, dataclass
from pathlib import Path

from nyala.errors import Corruption, IllegalState, InvalidArgument
from nyala.files import write_atomically

__all__ = ["DataDir", "ServerStatus"]

INSTANCE_FILE = "instance"
LOCK_FILE = "LOCK"
STATUS_FILE = "server.json"


@dataclass(frozen=True)
class ServerStatus:
    """What ``server.json`` says about a running server."""

    kind: str
    uuid: str
    rpc_address: str
    pid: int

    @classmethod
    def read(cls, directory: Path) -> ServerStatus | None:
        """The status of the server using ``directory``, or None before it has started listening."""
        try:
            data = json.loads((directory / STATUS_FILE).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return cls(**data)


class DataDir:
    """An opened, locked data directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidArgument(f"cannot create data directory {path}: {exc}") from exc
        self._lock_fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise IllegalState(f"data directory {path} is in use by another server") from None
        self.uuid = self._load_or_create_uuid()

    def _load_or_create_uuid(self) -> str:
        path = self.path / INSTANCE_FILE
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            new = uuid_module.uuid4().hex
            write_atomically(path, (new + "\n").encode())
            return new
        if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
            raise Corruption(f"instance file {path} does not hold a uuid: {text[:40]!r}")
        return text

    def write_status(self, kind: str, rpc_address: str) -> None:
        status = ServerStatus(kind, self.uuid, rpc_address, os.getpid())
        write_atomically(self.path / STATUS_FILE, json.dumps(asdict(status)).encode())

    def clear_status(self) -> None:
        (self.path / STATUS_FILE).unlink(missing_ok=True)

    def close(self) -> None:
        self.clear_status()
        os.close(self._lock_fd)
