"""A server's data directory: an exclusive lock, its permanent identity, and its status file.

``instance`` holds the server's permanent uuid, created on first start and kept forever
(Kudu's instance file): the uuid names the server in every Raft config.  ``LOCK`` is held
with ``flock`` for the life of the process, so two servers can never share one directory.
``server.json`` is rewritten atomically once the server listens, telling supervisors (the
local cluster, MiniCluster) its uuid, RPC and HTTP addresses and pid.

Offline tools (``nyala local-replica``) open a stopped server's directory with
:class:`OfflineDataDir`: it takes the same ``LOCK``, so it refuses a directory a running server
holds and no server can start on the directory while the tool changes it.  As a second check
(``flock`` can be a no-op on some network filesystems) it also refuses a directory whose
``server.json`` names a live process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid as uuid_module
from dataclasses import asdict, dataclass
from pathlib import Path

from nyala.errors import Corruption, IllegalState, InvalidArgument, NotFound
from nyala.files import write_atomically

__all__ = ["DataDir", "OfflineDataDir", "ServerStatus", "pid_alive"]

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
    #: host:port of the web server; "" when it is disabled (and in files of older servers).
    http_address: str = ""

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

    def write_status(self, kind: str, rpc_address: str, http_address: str = "") -> None:
        status = ServerStatus(kind, self.uuid, rpc_address, os.getpid(), http_address)
        write_atomically(self.path / STATUS_FILE, json.dumps(asdict(status)).encode())

    def clear_status(self) -> None:
        (self.path / STATUS_FILE).unlink(missing_ok=True)

    def close(self) -> None:
        self.clear_status()
        os.close(self._lock_fd)


class OfflineDataDir:
    """A stopped server's data directory, opened and locked by an offline tool.

    Refuses (IllegalState) a directory a running server holds; NotFound for a directory that
    is not a server's.  Use as a context manager: the lock is held until it closes.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        if not (path / INSTANCE_FILE).is_file():
            raise NotFound(f"{path} is not a Nyala server's data directory (it has no {INSTANCE_FILE} file)")
        try:
            self._lock_fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise IllegalState(f"cannot open the lock file of data directory {path}: {exc}") from exc
        try:
            self._check_unused()
            self.uuid = (path / INSTANCE_FILE).read_text().strip()
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _check_unused(self) -> None:
        status = _status_or_none(self.path)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = f" ({status.kind} pid {status.pid})" if status is not None else ""
            raise IllegalState(
                f"data directory {self.path} is in use by a running server{who}; stop the server first"
            ) from None
        if status is not None and pid_alive(status.pid):
            raise IllegalState(
                f"data directory {self.path}: its {STATUS_FILE} names running process {status.pid} "
                f"({status.kind} {status.uuid}); stop that server first. If process {status.pid} is not a Nyala "
                f"server (the server was killed and its pid reused), delete {self.path / STATUS_FILE}"
            )

    def close(self) -> None:
        os.close(self._lock_fd)  # releases the lock

    def __enter__(self) -> OfflineDataDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _status_or_none(directory: Path) -> ServerStatus | None:
    """server.json, or None when it is missing or not ours to read (a damaged file names no process)."""
    with contextlib.suppress(TypeError, ValueError, OSError):
        return ServerStatus.read(directory)
    return None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a killed server not yet reaped)."""
    if pid <= 0:
        return False
    if os.path.exists("/proc/self/stat"):  # Linux: also tells a zombie from a live process
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rpartition(")")[2].split()[0] not in {"Z", "X"}
        except FileNotFoundError:
            return False
        except (OSError, IndexError):
            pass  # unreadable: ask the kernel with signal 0
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True
