"""A cluster of real Nyala processes on loopback: masters and tablet servers, each its own process.

Kudu's ExternalMiniCluster, for tests, benchmarks and ``nyala local-cluster``.  Every server
binds its own 127.x.y.z address so that many clusters (and many locations, later) can run
on one machine without port clashes: a cluster picks a random 127.<a>.<b>.0/24 block, masters
use .1 to .9 on port 7051 and tablet servers .10 and up on port 7050.  Servers are
:class:`~nyala.testing.process.ServerProcess` children; a server is ready once its
``server.json`` appears and it answers ``Ping``.

Always use it as a context manager (or call :meth:`stop`): every process it started is
stopped by PID, even when a test fails.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType

from nyala.common.errors import NotFound
from nyala.common.hostport import HostPort
from nyala.proto import rpc_pb2
from nyala.rpc import PING, Messenger
from nyala.rpc.loop import run
from nyala.server.fs import ServerStatus
from nyala.testing.process import ServerProcess, pid_alive, stop_pid

__all__ = ["ClusterServer", "MiniCluster", "MiniClusterOptions"]

CLUSTER_FILE = "cluster.json"
MASTER_PORT = 7051
TSERVER_PORT = 7050


@dataclass(frozen=True)
class MiniClusterOptions:
    """Shape and timing of a mini cluster.  Faster-than-default timings suit tests."""

    num_masters: int = 1
    num_tservers: int = 3
    raft_tick_interval_ms: int = 50
    raft_heartbeat_interval_ms: int = 250
    heartbeat_interval_ms: int = 250
    #: Extra flags for every master / every tablet server, e.g. ["--log-level", "DEBUG"].
    master_flags: tuple[str, ...] = ()
    tserver_flags: tuple[str, ...] = ()
    #: The 127.a.b.0/24 block; random when None.
    ip_block: tuple[int, int] | None = None
    start_timeout_s: float = 60.0
    env: dict[str, str] = field(default_factory=dict)
    #: Servers outlive this process (``nyala local-cluster``): not killed at exit, found again
    #: through cluster.json and each server's server.json.
    detached: bool = False


@dataclass
class ClusterServer:
    """One server of the cluster: its process, address and data directory."""

    kind: str
    index: int
    address: HostPort
    data_dir: Path
    process: ServerProcess

    @property
    def uuid(self) -> str:
        status = ServerStatus.read(self.data_dir)
        if status is None:
            raise RuntimeError(f"{self.kind} {self.index} has not started yet")
        return status.uuid


class MiniCluster:
    """Start, stop, kill, pause and restart the servers of a local cluster."""

    def __init__(self, root: Path, options: MiniClusterOptions | None = None) -> None:
        self.root = root
        self.options = options or MiniClusterOptions()
        a, b = self.options.ip_block or (random.randrange(1, 255), random.randrange(1, 255))
        self._ip_prefix = f"127.{a}.{b}"
        self.masters = [self._server("master", i) for i in range(self.options.num_masters)]
        self.tservers = [self._server("tserver", i) for i in range(self.options.num_tservers)]

    # -- building --------------------------------------------------------------------------

    def _server(self, kind: str, index: int) -> ClusterServer:
        if kind == "master":
            if index >= 9:
                raise ValueError("a mini cluster has at most 9 masters")
            address = HostPort(f"{self._ip_prefix}.{1 + index}", MASTER_PORT)
        else:
            if index >= 240:
                raise ValueError("a mini cluster has at most 240 tablet servers")
            address = HostPort(f"{self._ip_prefix}.{10 + index}", TSERVER_PORT)
        data_dir = self.root / f"{kind}-{index}"
        process = ServerProcess(
            f"{kind}-{index}", self._argv(kind, address, data_dir), self.root / "logs" / f"{kind}-{index}.log",
            env=self.options.env, owned=not self.options.detached,
        )  # fmt: skip
        return ClusterServer(kind, index, address, data_dir, process)

    @property
    def master_addresses(self) -> list[HostPort]:
        return [m.address for m in self.masters]

    @property
    def master_addresses_flag(self) -> str:
        return ",".join(str(a) for a in self.master_addresses)

    def _argv(self, kind: str, address: HostPort, data_dir: Path) -> list[str]:
        o = self.options
        argv = [
            sys.executable, "-m", "nyala", kind, "start",
            "--fs-data-dir", str(data_dir),
            "--rpc-bind-address", str(address),
            "--master-addresses", ",".join(f"{self._ip_prefix}.{1 + i}:{MASTER_PORT}" for i in range(o.num_masters)),
            "--heartbeat-interval-ms", str(o.heartbeat_interval_ms),
            "--raft-tick-interval-ms", str(o.raft_tick_interval_ms),
            "--raft-heartbeat-interval-ms", str(o.raft_heartbeat_interval_ms),
        ]  # fmt: skip
        return argv + list(o.master_flags if kind == "master" else o.tserver_flags)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> MiniCluster:
        """Start every server and wait until each is ready."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.save()
        try:
            for server in [*self.masters, *self.tservers]:
                server.process.start()
            for server in [*self.masters, *self.tservers]:
                self.wait_ready(server)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, server: ClusterServer) -> None:
        """Block until ``server`` announced itself in server.json and answers Ping."""

        def ready() -> bool:
            status = ServerStatus.read(server.data_dir)
            return status is not None and status.pid == server.process.pid and _pings(server.address)

        server.process.wait_ready(ready, timeout_s=self.options.start_timeout_s, poll_s=0.05)

    def stop(self) -> None:
        """Stop every server (SIGTERM, then SIGKILL for any that hang), also ones started by another process."""
        for server in [*self.tservers, *self.masters]:
            if server.process.running:
                server.process.stop()
            else:
                status = ServerStatus.read(server.data_dir)
                if status is not None:
                    stop_pid(status.pid)

    def running(self, server: ClusterServer) -> bool:
        """Whether ``server`` runs, whichever process started it."""
        if server.process.running:
            return True
        status = ServerStatus.read(server.data_dir)
        return status is not None and pid_alive(status.pid)

    # -- persistence (for clusters that outlive the process that started them) -------------

    def save(self) -> None:
        """Write cluster.json: enough to find, stop or restart this cluster from another process."""
        description = {
            "ip_prefix": self._ip_prefix,
            "options": {k: v for k, v in asdict(self.options).items() if k not in {"env"}},
            "masters": [str(m.address) for m in self.masters],
            "tservers": [str(t.address) for t in self.tservers],
        }
        (self.root / CLUSTER_FILE).write_text(json.dumps(description, indent=2) + "\n")

    @classmethod
    def load(cls, root: Path) -> MiniCluster:
        """The cluster described by ``root/cluster.json``; NotFound when there is none."""
        try:
            description = json.loads((root / CLUSTER_FILE).read_text())
        except FileNotFoundError:
            raise NotFound(f"no local cluster in {root} (no {CLUSTER_FILE})") from None
        options = description["options"]
        options["master_flags"] = tuple(options["master_flags"])
        options["tserver_flags"] = tuple(options["tserver_flags"])
        _, a, b = description["ip_prefix"].split(".")
        options["ip_block"] = (int(a), int(b))
        return cls(root, MiniClusterOptions(**options))

    def kill(self, server: ClusterServer) -> None:
        """SIGKILL, as in a crash or a power cut of that process."""
        server.process.kill()

    def restart(self, server: ClusterServer) -> None:
        """Start a stopped or killed server again from its data directory and wait until ready."""
        if server.process.running:
            server.process.stop()
        server.process.start()
        self.wait_ready(server)

    def pause(self, server: ClusterServer) -> None:
        server.process.pause()

    def resume(self, server: ClusterServer) -> None:
        server.process.resume()

    def add_tserver(self) -> ClusterServer:
        """Start one more tablet server."""
        server = self._server("tserver", len(self.tservers))
        self.tservers.append(server)
        server.process.start()
        self.wait_ready(server)
        return server

    def destroy(self) -> None:
        """Stop everything and delete the data."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> MiniCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def logs(self, servers: Sequence[ClusterServer] | None = None, lines: int = 30) -> str:
        """The tails of the servers' logs, for failure messages."""
        chosen = servers if servers is not None else [*self.masters, *self.tservers]
        return "\n".join(f"--- {s.process.name} ---\n{s.process.log_tail(lines)}" for s in chosen)


def _pings(address: HostPort) -> bool:
    async def ping() -> bool:
        messenger = Messenger()
        try:
            await messenger.call(address, PING, rpc_pb2.PingRequest(), timeout=1.0)
            return True
        except Exception:
            return False
        finally:
            await messenger.close()

    return run(ping())
