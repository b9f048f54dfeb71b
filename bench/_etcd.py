"""etcd 3.4 as the reference of the write and failover benchmarks.

- :func:`ensure_etcd` finds the ``etcd`` binary, installing the Debian package
  ``etcd-server`` with apt-get when it is missing (the package starts no service).
- :class:`EtcdCluster` runs three members on their own loopback addresses (a random
  127.a.b.0/24 block, ports 2379/2380 as etcd's defaults, so nothing clashes with other
  clusters on the machine), data under a directory the caller owns, each member's output in
  ``<dir>/logs``.  It is a context manager and stops every member by PID, also on failure.
- :class:`GatewayClient` puts keys over etcd's grpc-gateway (``POST /v3/kv/put``, JSON with
  base64 key and value) on one keep-alive HTTP/1.1 connection, written on asyncio streams
  (standard library only).  One such client per concurrent writer mirrors one connection per
  client; the client side costs a few tens of microseconds of CPU per put, which the write
  benchmark reports.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

PACKAGE = "etcd-server"
CLIENT_PORT = 2379
PEER_PORT = 2380


def ensure_etcd() -> str:
    """The path of the etcd binary; installs the Debian package ``etcd-server`` if needed."""
    found = shutil.which("etcd") or ("/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else None)
    if found:
        return found
    if os.geteuid() != 0:
        raise RuntimeError(f"etcd is not installed; run `sudo apt-get install -y {PACKAGE}` (Debian) and retry")
    print(f"etcd not found: installing the Debian package {PACKAGE} with apt-get ...", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", PACKAGE]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
        result = subprocess.run(install, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"apt-get install {PACKAGE} failed:\n{result.stderr[-2000:]}")
    found = shutil.which("etcd") or "/usr/bin/etcd"
    if not os.access(found, os.X_OK):
        raise RuntimeError(f"{PACKAGE} is installed but no etcd binary was found")
    return found


def etcd_version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    first = out.splitlines()[0] if out else "etcd (unknown version)"
    return first.replace("etcd Version: ", "etcd ")


@dataclass
class EtcdMember:
    name: str
    host: str
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_url(self) -> str:
        return f"http://{self.host}:{CLIENT_PORT}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{PEER_PORT}"


class EtcdCluster:
    """Three (or ``size``) etcd members on loopback with etcd's default timings."""

    def __init__(self, root: Path, binary: str, size: int = 3) -> None:
        self.root = root
        self.binary = binary
        a, b = random.randrange(1, 255), random.randrange(1, 255)
        self.members = [EtcdMember(f"m{i + 1}", f"127.{a}.{b}.{i + 1}", root / f"m{i + 1}") for i in range(size)]

    def start(self, timeout_s: float = 60.0) -> EtcdCluster:
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        token = f"nyala-bench-{os.getpid()}-{random.randrange(1 << 30)}"
        try:
            for m in self.members:
                argv = [
                    self.binary, "--name", m.name, "--data-dir", str(m.data_dir),
                    "--listen-client-urls", m.client_url, "--advertise-client-urls", m.client_url,
                    "--listen-peer-urls", m.peer_url, "--initial-advertise-peer-urls", m.peer_url,
                    "--initial-cluster", initial, "--initial-cluster-state", "new",
                    "--initial-cluster-token", token,
                ]  # fmt: skip
                with open(self.root / "logs" / f"{m.name}.log", "wb") as log:
                    m.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            self._wait_healthy(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for m in self.members:
            while not _healthy(m):
                if m.process is not None and m.process.poll() is not None:
                    raise RuntimeError(f"etcd member {m.name} exited with {m.process.returncode}; see {self.root}/logs")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"etcd member {m.name} not healthy after {timeout_s} s; see {self.root}/logs")
                time.sleep(0.1)

    @property
    def pids(self) -> list[int]:
        return [m.process.pid for m in self.members if m.process is not None and m.process.poll() is None]

    def leader(self) -> EtcdMember:
        """The member that leads, as the members report it."""
        for m in self.members:
            with contextlib.suppress(OSError, ValueError, KeyError):
                status = _post(m.client_url + "/v3/maintenance/status", {})
                header = status["header"]
                if isinstance(header, dict) and status["leader"] == header["member_id"]:
                    return m
        raise RuntimeError("no etcd member reports itself the leader")

    def stop(self) -> None:
        """SIGTERM every member by PID, SIGKILL any that does not exit within 10 s."""
        running = [m.process for m in self.members if m.process is not None and m.process.poll() is None]
        for p in running:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        for p in running:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _post(url: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=2) as response:
        result: dict[str, object] = json.loads(response.read())
        return result


def _healthy(m: EtcdMember) -> bool:
    try:
        with urllib.request.urlopen(m.client_url + "/health", timeout=1) as response:
            return bool(json.loads(response.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


class GatewayClient:
    """One keep-alive HTTP/1.1 connection to a member's grpc-gateway, for puts."""

    def __init__(self, host: str, port: int = CLIENT_PORT) -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def put(self, key: bytes, value: bytes) -> None:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        body = json.dumps({"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()})
        head = (
            f"POST /v3/kv/put HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self._writer.write((head + body).encode())
        status, payload = await _read_response(self._reader)
        if status != 200:
            raise RuntimeError(f"etcd put answered HTTP {status}: {payload[:200]!r}")
        if b'"header"' not in payload:
            raise RuntimeError(f"etcd put answered without a header: {payload[:200]!r}")

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
            self._writer = None


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of one HTTP/1.1 response (Content-Length or chunked)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if "content-length" in headers:
        return status, await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")  # the empty trailer
        return status, bytes(body)
    raise RuntimeError(f"etcd answered without a length: {headers}")
