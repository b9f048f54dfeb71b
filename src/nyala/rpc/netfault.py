"""Test-only network cuts between chosen servers, made in the RPC transport.

UNSAFE, for tests only.  A server started with the environment variable
``NYALA_UNSAFE_TEST_NETWORK_FAULTS`` naming a control file (the test kit does this; nothing
else should) treats the addresses listed in that file as unreachable, as if the network
between it and them had been cut:

- a new connection to such an address is never made: the attempt hangs, as when SYNs go
  unanswered, until ``connect_timeout_s`` fails it with ``NetworkError`` (or the cut heals
  first, and then it connects, as a retransmitted SYN would);
- a connection that is open when the cut starts stalls: nothing more is written to it or read
  from it, so calls on it time out at their deadlines, and the server at the other end sees
  silence.  Nothing is dropped: when the cut heals, the held bytes go out and the unread ones
  are read, as TCP delivers its retransmissions after a cut shorter than its own timeout.
  Late answers to calls that already timed out are dropped as usual.

The cut is made on the caller's side of each connection.  Every server's messenger is the
caller of all the traffic it starts (Raft, heartbeats, master-to-tablet-server requests,
tablet copy) and the answers come back on the same connection, so a pair cut in *both*
servers' files exchanges nothing in either direction.  Clients that do not carry the
variable (the test process itself, tools) are never cut.

The file is JSON: ``{"version": 3, "unreachable": ["127.0.0.2:7051", ...]}``.  A daemon
thread watches it (a ``stat`` every 10 ms), applies a new version on every event loop that
has connections, and only then writes the version to ``<file>.applied``, so that the writer
of the file knows when the cut is in effect.  A missing file means nothing is cut.

Off (the variable unset, the only production state), :func:`active_faults` is None and the
transport does no extra work besides one ``is None`` test per connection.  The variable is
read once, at startup, by ``nyala master start`` and ``nyala tserver start`` only, and taken
out of the environment so the server's children never see it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from nyala.common.hostport import HostPort, parse_address

__all__ = [
    "NETWORK_FAULTS_ENV",
    "CuttableConnection",
    "NetworkFaults",
    "active_faults",
    "applied_path",
    "install_from_environment",
    "read_applied",
]

log = logging.getLogger("nyala.rpc.netfault")

#: The environment variable naming the control file; its name says what it is.
NETWORK_FAULTS_ENV = "NYALA_UNSAFE_TEST_NETWORK_FAULTS"
#: How often the watcher looks at the control file.
POLL_INTERVAL_S = 0.01
#: How long the watcher waits for an event loop to apply a change before acknowledging anyway.
APPLY_TIMEOUT_S = 10.0

_active: NetworkFaults | None = None


class CuttableConnection(Protocol):
    """What the seam needs of a client connection."""

    @property
    def peer_address(self) -> HostPort: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def set_cut(self, cut: bool) -> None:
        """Stall (True) or resume (False) the connection; called on its own event loop."""


class NetworkFaults:
    """The set of unreachable addresses of this process, and the connections it governs.

    Thread-safe: the set is changed from any thread (the watcher's), and each event loop
    applies the change to its own connections.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unreachable: frozenset[HostPort] = frozenset()
        self._connections: weakref.WeakSet[CuttableConnection] = weakref.WeakSet()
        # One future per event loop with a connection attempt waiting for a cut to heal;
        # resolved (and replaced) on every change.
        self._changed: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future[None]] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def unreachable(self) -> frozenset[HostPort]:
        return self._unreachable

    def is_cut(self, address: HostPort) -> bool:
        return address in self._unreachable

    def set_unreachable(self, addresses: Iterable[str | HostPort]) -> list[concurrent.futures.Future[None]]:
        """Make exactly ``addresses`` unreachable; returns one future per event loop, done once
        that loop has applied the change to its connections (applied at once on the caller's
        own running loop)."""
        parsed = frozenset(parse_address(a) for a in addresses)
        with self._lock:
            self._unreachable = parsed
            loops = {conn.loop for conn in self._connections} | set(self._changed)
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        applied = []
        for loop in loops:
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            if loop is running:
                self._apply(loop, done)
            else:
                try:
                    loop.call_soon_threadsafe(self._apply, loop, done)
                except RuntimeError:  # that loop is closed: nothing of it is left to cut
                    done.set_result(None)
            applied.append(done)
        return applied

    def register(self, conn: CuttableConnection) -> None:
        """Govern a new connection (on its loop): cut at once if its peer is unreachable."""
        with self._lock:
            self._connections.add(conn)
        if self.is_cut(conn.peer_address):
            conn.set_cut(True)

    def forget(self, conn: CuttableConnection) -> None:
        with self._lock:
            self._connections.discard(conn)

    async def wait_reachable(self, address: HostPort) -> None:
        """Return once ``address`` is not cut; the caller bounds the wait (a connect timeout)."""
        loop = asyncio.get_running_loop()
        while True:
            # Take the loop's future before looking: a change made after the look resolves it.
            with self._lock:
                changed = self._changed.get(loop)
                if changed is None or changed.done():
                    changed = self._changed[loop] = loop.create_future()
            if not self.is_cut(address):
                return
            await asyncio.shield(changed)

    def _apply(self, loop: asyncio.AbstractEventLoop, done: concurrent.futures.Future[None]) -> None:
        with self._lock:
            mine = [conn for conn in self._connections if conn.loop is loop]
            changed = self._changed.pop(loop, None)
        for conn in mine:
            conn.set_cut(self.is_cut(conn.peer_address))
        if changed is not None and not changed.done():
            changed.set_result(None)
        done.set_result(None)


def applied_path(control: Path) -> Path:
    """Where a server acknowledges the version of ``control`` it has put in effect."""
    return control.with_name(control.name + ".applied")


def read_applied(control: Path) -> int | None:
    """The version a server last acknowledged, or None before its first."""
    try:
        return int(applied_path(control).read_text())
    except (FileNotFoundError, ValueError):
        return None


class _ControlFileWatcher:
    """Applies each new version of the control file, then acknowledges it."""

    def __init__(self, faults: NetworkFaults, control: Path) -> None:
        self._faults = faults
        self._control = control
        self._seen: tuple[int, int, int] | None = None
        self._version: int | None = None

    def check(self) -> None:
        """Read the file if it changed and apply a new version (the first call always applies)."""
        try:
            st = os.stat(self._control)
            stamp: tuple[int, int, int] = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = (0, 0, 0)
        if stamp == self._seen:
            return
        self._seen = stamp
        if stamp == (0, 0, 0):
            version, unreachable = 0, []
        else:
            try:
                document = json.loads(self._control.read_text())
                version = int(document["version"])
                unreachable = [str(a) for a in document["unreachable"]]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("ignoring unreadable network fault control file %s: %s", self._control, exc)
                return
        if version == self._version:
            return
        for done in self._faults.set_unreachable(unreachable):
            try:
                done.result(APPLY_TIMEOUT_S)
            except concurrent.futures.TimeoutError:
                log.error("an event loop did not apply network faults within %s s", APPLY_TIMEOUT_S)
        self._version = version
        log.warning("UNSAFE test network faults, version %d: unreachable %s", version, sorted(map(str, unreachable)))
        _write_atomically(applied_path(self._control), f"{version}\n")

    def run(self) -> None:
        stop = threading.Event()  # never set: the thread is a daemon and ends with the process
        while not stop.wait(POLL_INTERVAL_S):
            try:
                self.check()
            except Exception:
                log.exception("network fault watcher failed; retrying")


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    temporary.replace(path)


def active_faults() -> NetworkFaults | None:
    """This process's network faults, or None (always, unless the test kit started it)."""
    return _active


def install_from_environment() -> NetworkFaults | None:
    """Turn the seam on if ``NYALA_UNSAFE_TEST_NETWORK_FAULTS`` names a control file.

    Call it first thing in a server's main, before any messenger exists.  The file's current
    contents are in effect when this returns; later versions are applied by a daemon thread.
    """
    global _active
    value = os.environ.pop(NETWORK_FAULTS_ENV, None)
    if not value:
        return None
    if _active is not None:
        return _active
    log.warning("UNSAFE: test-only network fault injection is on, controlled by %s", value)
    faults = NetworkFaults()
    watcher = _ControlFileWatcher(faults, Path(value))
    watcher.check()
    threading.Thread(target=watcher.run, name="network-faults", daemon=True).start()
    _active = faults
    return faults
