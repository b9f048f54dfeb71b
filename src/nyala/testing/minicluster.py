"""A cluster of real Nyala processes on loopback: masters and tablet servers, each its own process.

Kudu's ExternalMiniCluster, for tests, benchmarks and ``nyala local-cluster``.  Every server
binds its own 127.x.y.z address so that many clusters can run on one machine without port
clashes: a cluster picks a random 127.<a>.<b>.0/24 block, masters use .1 to .9 on port 7051
and tablet servers .10 and up on port 7050.  Servers are
:class:`~nyala.testing.process.ServerProcess` children; a server is ready once its
``server.json`` appears and it answers ``Ping``.

**Web servers.**  Each server also serves HTTP on its own address, on its RPC port plus
:data:`WEB_PORT_OFFSET` (masters 8051, tablet servers 8050, 8051, ... beside RPC ports 7050,
7051, ...), so web ports never collide either; :attr:`ClusterServer.http_address` and
:attr:`ClusterServer.url` say where, and ``server.json`` records the bound address.
``MiniClusterOptions(webserver=False)`` starts every server with ``--webserver-port 0``.

**Locations.**  ``MiniCluster(root, locations={"/dc1/rack1": 2, "/dc1/rack2": 2})`` gives each
location one address of the block (.10, .11, ... in the order given) shared by its tablet
servers on ports 7050, 7051, ...; the masters run a generated mapping script
(``location-mapping.sh`` in the cluster directory, ``--location-mapping-cmd``) that maps each
address to its location, and ``client_location`` maps 127.0.0.1 -- where clients on this
machine connect from -- so that they read from that location with CLOSEST_REPLICA.  Any
other host is refused by the script (exit status 1).  :meth:`MiniCluster.tservers_in` names a
location's servers (to kill a whole location); :meth:`MiniCluster.add_location` starts the
servers of a new location in a running cluster.

**Network partitions.**  With ``MiniClusterOptions(network_faults=True)`` every server obeys
a control file of :mod:`nyala.testing.partitions` (the test-only seam of
:mod:`nyala.rpc.netfault`): :meth:`MiniCluster.partition`, :meth:`MiniCluster.isolate` and
:meth:`MiniCluster.heal` cut and restore links between masters and tablet servers while they
run, and return once every running server has the change in effect.  Clients in the test
process reach every server throughout.

Always use it as a context manager (or call :meth:`stop`): every process it started is
stopped by PID, even when a test fails.  Its servers also die with the process that started
them when that process is killed outright (the lifeline of :mod:`nyala.testing.process`),
except a ``detached`` cluster's, which ``nyala local-cluster`` leaves running on purpose.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import socket
import ssl
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import TracebackType

from nyala.common.hostport import HostPort
from nyala.errors import InvalidArgument, NotFound
from nyala.placement import validate_location
from nyala.proto import rpc_pb2
from nyala.rpc import PING, Messenger
from nyala.rpc.loop import run
from nyala.rpc.tls import client_context
from nyala.server.fs import ServerStatus
from nyala.testing.partitions import NetworkPartitions
from nyala.testing.process import ServerProcess, pid_alive, stop_all, stop_pids

__all__ = ["ClusterServer", "MiniCluster", "MiniClusterOptions", "parse_locations"]

CLUSTER_FILE = "cluster.json"
MAPPING_SCRIPT = "location-mapping.sh"
MASTER_PORT = 7051
TSERVER_PORT = 7050
#: The system's randomness, not the module's: a test that seeds ``random`` would give every
#: cluster started after it, in every test process, the same block.
_BLOCKS = random.SystemRandom()


def _free_block() -> tuple[int, int]:
    """A random 127.a.b block whose first master address is free.

    Two clusters on one block would not fail outright: the second's servers cannot bind, but
    its readiness pings reach the first's, and stopping either takes the other's servers away
    (seen with two test processes at once)."""
    for _ in range(32):
        a, b = _BLOCKS.randrange(1, 255), _BLOCKS.randrange(1, 255)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((f"127.{a}.{b}.1", MASTER_PORT))
            except OSError:
                continue  # a cluster (or anything else) holds it
        return a, b
    raise InvalidArgument("no free 127.a.b block for a mini cluster after 32 tries")


#: Where clients on this machine connect from (the kernel's source address on loopback).
CLIENT_HOST = "127.0.0.1"
MAX_TSERVERS_PER_LOCATION = 100
#: A server's web port is its RPC port plus this (7051 -> 8051, 7050 -> 8050: Kudu's defaults).
WEB_PORT_OFFSET = 1000

LocationsSpec = Mapping[str, int] | Sequence[str] | Sequence[tuple[str, int]] | str


def parse_locations(spec: LocationsSpec) -> tuple[tuple[str, int], ...]:
    """Locations and their tablet-server counts from ``{"/a": 2}``, ``["/a:2"]``, ``[("/a", 2)]`` or ``"/a:2,/b:2"``.

    InvalidArgument names a malformed location, a count that is not a positive integer, or a
    location given twice.
    """
    if isinstance(spec, str):
        spec = [part for part in spec.split(",") if part.strip()]
    items: list[tuple[str, int]] = []
    for item in spec.items() if isinstance(spec, Mapping) else spec:
        if isinstance(item, str):
            name, sep, count_text = item.strip().rpartition(":")
            if not sep or not count_text.strip().isdigit():
                raise InvalidArgument(f"location {item!r} must be written LOCATION:COUNT, like /dc1/rack1:2")
            item = (name, int(count_text))
        name, count = item
        validate_location(name)
        if not isinstance(count, int) or not 1 <= count <= MAX_TSERVERS_PER_LOCATION:
            raise InvalidArgument(
                f"location {name} needs 1 to {MAX_TSERVERS_PER_LOCATION} tablet servers, not {count!r}"
            )
        if any(name == known for known, _ in items):
            raise InvalidArgument(f"location {name} is given twice")
        items.append((name, count))
    if not items:
        raise InvalidArgument("no locations given")
    return tuple(items)


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
    #: (location, tablet servers) pairs; when given they replace ``num_tservers`` (see the module doc).
    locations: tuple[tuple[str, int], ...] = ()
    #: The location of clients on this machine (127.0.0.1); "" for none.
    client_location: str = ""
    #: DuckDB threads of each tablet server (``--storage-threads``).  None shares the machine's
    #: cores among the tablet servers: three servers on two cores that each ran a DuckDB thread
    #: per core contended for them, and used 17 to 46 % more CPU a row on scans and batched
    #: writes (alternated runs at 84b8ba2; docs/benchmarks.md).
    tserver_storage_threads: int | None = None
    #: False turns the leader master's re-replication, its tombstoning of evicted replicas and
    #: auto rebalancing off (Kudu's tests do the same around operator config changes, which it
    #: would otherwise answer with changes of its own).
    replica_management: bool = True
    #: The leader master's auto rebalancer (on in production).  Off by default here: a test that
    #: kills and restarts servers expects the layout to change only by re-replication, unless it
    #: tests the rebalancer itself.  ``nyala local-cluster`` turns it on.
    auto_rebalancing: bool = False
    #: Start every server obeying a network fault control file, so that tests can cut links
    #: (:meth:`MiniCluster.partition`).  Test clusters only: a detached cluster refuses it.
    network_faults: bool = False
    #: Serve the web pages and metrics (RPC port + WEB_PORT_OFFSET); False starts every
    #: server with ``--webserver-port 0``.
    webserver: bool = True
    #: TLS on every RPC connection (``--rpc-certificate-file`` and friends of every server): one
    #: PEM certificate and key for all the servers, valid for each of their addresses, and the
    #: CA that signed it.  Empty: plain TCP.  :meth:`MiniCluster.client_ssl_context` is what a
    #: client of such a cluster needs.  ``rpc_authentication`` "required" makes every server
    #: refuse peers without a certificate from that CA.
    rpc_certificate_file: str = ""
    rpc_private_key_file: str = ""
    rpc_ca_certificate_file: str = ""
    rpc_authentication: str = "optional"
    #: HTTPS for every server's web pages (``--webserver-certificate-file`` and its key); empty: HTTP.
    webserver_certificate_file: str = ""
    webserver_private_key_file: str = ""

    @property
    def storage_threads(self) -> int:
        """The ``--storage-threads`` each tablet server gets."""
        if self.tserver_storage_threads is not None:
            return self.tserver_storage_threads
        return max(1, (os.cpu_count() or 1) // max(1, self.num_tservers))


@dataclass
class ClusterServer:
    """One server of the cluster: its process, address and data directory."""

    kind: str
    index: int
    address: HostPort
    data_dir: Path
    process: ServerProcess
    #: The tablet server's location ("" without locations, and for masters).
    location: str = ""
    #: Where its web server listens (None when the cluster runs without web servers).
    http_address: HostPort | None = None
    #: Whether its web server serves HTTPS.
    https: bool = False

    @property
    def url(self) -> str:
        """The base URL of the server's web pages; RuntimeError when it has none."""
        if self.http_address is None:
            raise RuntimeError(f"{self.kind} {self.index} runs without a web server")
        return f"{'https' if self.https else 'http'}://{self.http_address}"

    @property
    def uuid(self) -> str:
        status = ServerStatus.read(self.data_dir)
        if status is None:
            raise RuntimeError(f"{self.kind} {self.index} has not started yet")
        return status.uuid


class MiniCluster:
    """Start, stop, kill, pause and restart the servers of a local cluster."""

    def __init__(
        self,
        root: Path,
        options: MiniClusterOptions | None = None,
        *,
        locations: LocationsSpec | None = None,
        client_location: str | None = None,
    ) -> None:
        """``locations`` and ``client_location``, when given, override the options' fields."""
        self.root = root
        options = options or MiniClusterOptions()
        if locations is not None:
            parsed = parse_locations(locations)
            options = replace(options, locations=parsed, num_tservers=sum(n for _, n in parsed))
        if client_location is not None:
            options = replace(options, client_location=client_location)
        if options.client_location:
            validate_location(options.client_location)
            if not options.locations:
                raise InvalidArgument("a client location needs tablet-server locations too")
        if options.network_faults and options.detached:
            raise InvalidArgument("network faults are for test clusters only, not detached ones")
        if options.tserver_storage_threads is not None and options.tserver_storage_threads < 0:
            raise InvalidArgument(f"tserver_storage_threads must be >= 0, got {options.tserver_storage_threads}")
        if options.locations:
            parse_locations(options.locations)
            if len(options.locations) > 240:
                raise InvalidArgument("a mini cluster has at most 240 locations")
            options = replace(options, num_tservers=sum(n for _, n in options.locations))
        self.options = options
        a, b = self.options.ip_block or _free_block()
        self._ip_prefix = f"127.{a}.{b}"
        #: Extra host -> location entries of the mapping script (see :meth:`map_host`).
        self.extra_mappings: dict[str, str] = {}
        self._partitions = NetworkPartitions(root / "network-faults") if options.network_faults else None
        self.masters = [self._server("master", i) for i in range(self.options.num_masters)]
        self.tservers: list[ClusterServer] = []
        for location, count in self.options.locations or [("", self.options.num_tservers)]:
            for _ in range(count):
                self.tservers.append(self._server("tserver", len(self.tservers), location))

    # -- building --------------------------------------------------------------------------

    def _server(self, kind: str, index: int, location: str = "", extra_flags: tuple[str, ...] = ()) -> ClusterServer:
        if kind == "master":
            if index >= 9:
                raise ValueError("a mini cluster has at most 9 masters")
            address = HostPort(f"{self._ip_prefix}.{1 + index}", MASTER_PORT)
        elif location:
            slot = [name for name, _ in self.options.locations].index(location)
            port = TSERVER_PORT + sum(1 for t in self.tservers if t.location == location)
            if port - TSERVER_PORT >= MAX_TSERVERS_PER_LOCATION:
                raise ValueError(f"a mini cluster has at most {MAX_TSERVERS_PER_LOCATION} tablet servers per location")
            address = HostPort(self.location_host(slot), port)
        else:
            if index >= 240:
                raise ValueError("a mini cluster has at most 240 tablet servers")
            address = HostPort(f"{self._ip_prefix}.{10 + index}", TSERVER_PORT)
        data_dir = self.root / f"{kind}-{index}"
        env = dict(self.options.env)
        if self._partitions is not None:
            env.update(self._partitions.add_server(f"{kind}-{index}", address))
        http = HostPort(address.host, address.port + WEB_PORT_OFFSET) if self.options.webserver else None
        process = ServerProcess(
            f"{kind}-{index}", [*self._argv(kind, address, data_dir, http), *extra_flags],
            self.root / "logs" / f"{kind}-{index}.log",
            env=env, owned=not self.options.detached,
        )  # fmt: skip
        https = bool(self.options.webserver_certificate_file)
        return ClusterServer(kind, index, address, data_dir, process, location, http, https)

    def location_host(self, slot: int) -> str:
        """The address shared by the tablet servers of the ``slot``-th location."""
        return f"{self._ip_prefix}.{10 + slot}"

    # -- locations ---------------------------------------------------------------------------

    @property
    def locations(self) -> list[str]:
        """The locations, in the order given (empty without locations)."""
        return [name for name, _ in self.options.locations]

    def tservers_in(self, location: str) -> list[ClusterServer]:
        """The tablet servers of ``location`` (NotFound for a location this cluster does not have)."""
        if location not in self.locations:
            raise NotFound(f"this cluster has no location {location!r}; it has {self.locations}")
        return [t for t in self.tservers if t.location == location]

    @property
    def mapping_script(self) -> Path:
        return self.root / MAPPING_SCRIPT

    def host_locations(self) -> dict[str, str]:
        """What the mapping script answers: every location's address, the client host, extras."""
        mapping = {self.location_host(slot): name for slot, name in enumerate(self.locations)}
        if self.options.client_location:
            mapping[CLIENT_HOST] = self.options.client_location
        mapping.update(self.extra_mappings)
        return mapping

    def map_host(self, host: str, location: str) -> None:
        """Make the mapping script answer ``location`` for ``host`` from now on (masters re-run it)."""
        validate_location(location)
        self.extra_mappings[host] = location
        self._write_mapping_script()

    def _write_mapping_script(self) -> None:
        cases = "".join(f"    {host}) echo {loc} ;;\n" for host, loc in self.host_locations().items())
        script = (
            "#!/bin/sh\n"
            "# Generated by nyala.testing.MiniCluster: the location of each address of this cluster.\n"
            'for host in "$@"; do\n'
            '  case "$host" in\n'
            f"{cases}"
            '    *) echo "no location for host $host" >&2; exit 1 ;;\n'
            "  esac\n"
            "done\n"
        )
        path = self.mapping_script
        temporary = path.with_suffix(".tmp")
        temporary.write_text(script)
        temporary.chmod(0o755)
        temporary.replace(path)  # atomic: a master never runs a half-written script

    def urls(self) -> dict[str, str]:
        """Each server's RPC address and the base URL of its web pages (servers with one)."""
        return {str(s.address): s.url for s in self._all() if s.http_address is not None}

    @property
    def master_addresses(self) -> list[HostPort]:
        return [m.address for m in self.masters]

    @property
    def master_addresses_flag(self) -> str:
        return ",".join(str(a) for a in self.master_addresses)

    def _argv(self, kind: str, address: HostPort, data_dir: Path, http: HostPort | None = None) -> list[str]:
        o = self.options
        argv = [
            sys.executable, "-m", "nyala", kind, "start",
            "--fs-data-dir", str(data_dir),
            "--rpc-bind-address", str(address),
            "--master-addresses", ",".join(f"{self._ip_prefix}.{1 + i}:{MASTER_PORT}" for i in range(o.num_masters)),
            "--heartbeat-interval-ms", str(o.heartbeat_interval_ms),
            "--raft-tick-interval-ms", str(o.raft_tick_interval_ms),
            "--raft-heartbeat-interval-ms", str(o.raft_heartbeat_interval_ms),
            "--webserver-port", str(http.port if http is not None else 0),
        ]  # fmt: skip
        if kind == "master" and o.locations:
            argv += ["--location-mapping-cmd", shlex.quote(str(self.mapping_script))]
        if kind == "master" and not o.replica_management:
            argv += [
                "--no-master-add-server-when-underreplicated",
                "--no-catalog-manager-evict-excess-replicas",
                "--no-master-tombstone-evicted-tablet-replicas",
            ]
        if kind == "master" and not (o.replica_management and o.auto_rebalancing):
            argv += ["--no-auto-rebalancing-enabled"]
        if kind == "tserver":
            argv += ["--storage-threads", str(o.storage_threads)]
        if o.rpc_certificate_file:
            argv += ["--rpc-certificate-file", o.rpc_certificate_file, "--rpc-private-key-file", o.rpc_private_key_file]
        if o.rpc_ca_certificate_file:
            argv += ["--rpc-ca-certificate-file", o.rpc_ca_certificate_file]
        if o.rpc_authentication != "optional":
            argv += ["--rpc-authentication", o.rpc_authentication]
        if o.webserver_certificate_file:
            argv += ["--webserver-certificate-file", o.webserver_certificate_file]
            argv += ["--webserver-private-key-file", o.webserver_private_key_file]
        return argv + list(o.master_flags if kind == "master" else o.tserver_flags)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> MiniCluster:
        """Start every server and wait until each is ready."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self._partitions is not None:
            self._partitions.directory.mkdir(exist_ok=True)  # where servers acknowledge changes
        self.save()
        if self.options.locations:
            self._write_mapping_script()
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
            return (
                status is not None
                and status.pid == server.process.pid
                and _pings(server.address, self.client_ssl_context())
            )

        server.process.wait_ready(ready, timeout_s=self.options.start_timeout_s, poll_s=0.05)

    def client_ssl_context(self) -> ssl.SSLContext | None:
        """What a client of this cluster passes as ``ssl_context``: None unless its RPC is TLS."""
        o = self.options
        if not o.rpc_certificate_file:
            return None
        if o.rpc_authentication == "required":
            # The servers' own certificate is one a server accepts from its peers: the test kit's
            # client (readiness checks, the tests' clients) presents it too.
            return client_context(
                o.rpc_ca_certificate_file, cert_file=o.rpc_certificate_file, key_file=o.rpc_private_key_file
            )
        return client_context(o.rpc_ca_certificate_file or None)

    def stop(self) -> None:
        """Stop every server (SIGTERM, then SIGKILL for any that hang), also ones started by another process.

        Every server is asked at once and then waited for, so stopping a cluster takes about as
        long as its slowest server's stop, not the sum of them.
        """
        servers = [*self.tservers, *self.masters]
        others = [ServerStatus.read(s.data_dir) for s in servers if not s.process.running]
        stop_all([s.process for s in servers])
        stop_pids([status.pid for status in others if status is not None])

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
            "http": self.urls(),
            "locations": {name: [str(t.address) for t in self.tservers_in(name)] for name in self.locations},
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
        options["locations"] = tuple((name, count) for name, count in options.get("locations", ()))
        _, a, b = description["ip_prefix"].split(".")
        options["ip_block"] = (int(a), int(b))
        return cls(root, MiniClusterOptions(**options))

    def kill(self, server: ClusterServer) -> None:
        """SIGKILL, as in a crash or a power cut of that process."""
        server.process.kill()

    def restart(self, *servers: ClusterServer) -> None:
        """Start stopped or killed servers again from their data directories and wait until ready.

        Several servers (a whole location back from an outage, a cluster after a power cut) are
        all stopped and started first and waited for afterwards, as they would come back
        together, and in about the time of one start.
        """
        stop_all([s.process for s in servers if s.process.running])
        for server in servers:
            server.process.start()
        for server in servers:
            self.wait_ready(server)

    def pause(self, server: ClusterServer) -> None:
        server.process.pause()

    def resume(self, server: ClusterServer) -> None:
        server.process.resume()

    def add_tserver(self, location: str = "") -> ClusterServer:
        """Start one more tablet server (in ``location``, which a cluster with locations needs)."""
        if bool(location) != bool(self.options.locations):
            raise InvalidArgument(
                f"add_tserver needs one of the locations {self.locations}"
                if self.options.locations
                else "this cluster has no locations"
            )
        if location:
            self.tservers_in(location)  # NotFound for an unknown location
        server = self._server("tserver", len(self.tservers), location)
        self.tservers.append(server)
        server.process.start()
        self.wait_ready(server)
        return server

    def add_master(self, *, auto_join: bool = False) -> ClusterServer:
        """Start one more master, with --master-addresses naming the running masters and itself.

        It joins the cluster once added (``nyala master add``), or by itself with
        ``auto_join``.  It is listed in :attr:`masters` at once; tablet servers started later
        get every master in theirs.
        """
        index = len(self.masters)
        address = HostPort(f"{self._ip_prefix}.{1 + index}", MASTER_PORT)
        flag = ",".join(str(a) for a in [*self.master_addresses, address])
        flags = ("--master-addresses", flag, *(("--master-auto-join",) if auto_join else ()))
        server = self._server("master", index, extra_flags=flags)
        self.masters.append(server)
        self.options = replace(self.options, num_masters=len(self.masters))
        self.save()
        server.process.start()
        self.wait_ready(server)
        return server

    def add_location(self, location: str, count: int) -> list[ClusterServer]:
        """Start ``count`` tablet servers in a location this cluster does not have yet.

        The mapping script learns the location's address first, so the masters place the new
        servers there when they register (a new rack or zone joining a running cluster).
        """
        if not self.options.locations:
            raise InvalidArgument("this cluster has no locations")
        if location in self.locations:
            raise InvalidArgument(f"this cluster already has location {location}")
        added = parse_locations([(location, count)])
        if len(self.options.locations) + 1 > 240:
            raise InvalidArgument("a mini cluster has at most 240 locations")
        self.options = replace(
            self.options,
            locations=(*self.options.locations, *added),
            num_tservers=self.options.num_tservers + count,
        )
        self._write_mapping_script()
        servers = []
        for _ in range(count):
            server = self._server("tserver", len(self.tservers), location)
            self.tservers.append(server)
            servers.append(server)
        for server in servers:
            server.process.start()
        for server in servers:
            self.wait_ready(server)
        return servers

    # -- network partitions (MiniClusterOptions.network_faults) ------------------------------

    def partition(
        self,
        group_a: ClusterServer | Sequence[ClusterServer],
        group_b: ClusterServer | Sequence[ClusterServer] | None = None,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        """Cut every link between a server of ``group_a`` and one of ``group_b`` (by default every
        other server), in both directions, on top of the links already cut.

        Returns once every running server has the cut in effect.  A paused server applies it
        when resumed, a stopped one when it starts again: a cut outlives restarts, as a
        network's would.  Clients in the test process are never cut.
        """
        partitions = self._require_partitions()
        a = _names(group_a)
        b = _names(group_b) if group_b is not None else [s.process.name for s in self._all() if s.process.name not in a]
        partitions.partition(a, b, running=self._applies_now, timeout_s=timeout_s)

    def isolate(self, server: ClusterServer, *, timeout_s: float = 30.0) -> None:
        """Cut ``server`` off from every other master and tablet server."""
        self.partition(server, timeout_s=timeout_s)

    def heal(self, *, timeout_s: float = 30.0) -> None:
        """Restore every cut link; returns once every running server has them back."""
        self._require_partitions().heal(running=self._applies_now, timeout_s=timeout_s)

    def reachable(self, a: ClusterServer, b: ClusterServer) -> bool:
        """Whether the link between two servers is up (always, without network faults)."""
        return self._partitions is None or self._partitions.reachable(a.process.name, b.process.name)

    def _require_partitions(self) -> NetworkPartitions:
        if self._partitions is None:
            raise InvalidArgument("this cluster was started without MiniClusterOptions(network_faults=True)")
        return self._partitions

    def _applies_now(self, name: str) -> bool:
        """Whether the server named ``name`` runs and can apply a change at once (not paused)."""
        server = next(s for s in self._all() if s.process.name == name)
        return server.process.running and not server.process.paused

    def _all(self) -> list[ClusterServer]:
        return [*self.masters, *self.tservers]

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


def _names(servers: ClusterServer | Sequence[ClusterServer]) -> list[str]:
    chosen = [servers] if isinstance(servers, ClusterServer) else list(servers)
    return [s.process.name for s in chosen]


def _pings(address: HostPort, ssl_context: ssl.SSLContext | None = None) -> bool:
    async def ping() -> bool:
        messenger = Messenger(ssl_context=ssl_context)
        try:
            await messenger.call(address, PING, rpc_pb2.PingRequest(), timeout=1.0)
            return True
        except Exception:
            return False
        finally:
            await messenger.close()

    return run(ping())
