"""Locations of hosts from the administrator's mapping command (seed 000's node labelling).

``--location-mapping-cmd`` names an executable (split like a shell command line, so it may
carry its own arguments).  The master runs it with one or more hosts or IP addresses appended
as arguments; it must exit 0 and print one location per host, in the same order, one per line
(blank lines are ignored).  Every location must be well formed (:func:`validate_location`:
begins with ``/``, components of ``[a-zA-Z0-9_.-]``); anything else -- a non-zero exit, a
timeout, too few or too many lines, a malformed location, a command that cannot be started --
is a :class:`LocationMappingError` naming the command, the hosts and the cause.

The command runs as an asyncio subprocess with a timeout (``location_mapping_timeout_ms``), so
the master's event loop never blocks on it; a command that overstays is killed.  Concurrent
lookups of the same host share one run.

Caching (by host): a tablet server's registration always runs the command again (re-resolve
on re-registration, as the seed says; Kudu only re-resolves after a master restart) and
refreshes the cache.  A client's location (``ConnectToMaster``) is served from the cache;
a miss runs the command, and a failure answers ``""`` (no location), is logged, and is
remembered for ``FAILURE_RETRY_S`` so that a broken command is not run on every connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import time
from collections.abc import Callable, Sequence

from nyala.errors import InvalidArgument
from nyala.placement import validate_location

__all__ = ["FAILURE_RETRY_S", "LocationMapper", "LocationMappingError", "parse_mapping_output"]

log = logging.getLogger("nyala.master")

#: How long a failed client lookup is remembered before the command is tried again.
FAILURE_RETRY_S = 60.0
_STDERR_TAIL_CHARS = 500


class LocationMappingError(InvalidArgument):
    """The location mapping command failed or printed something that is not a location."""


def parse_command(command: str) -> list[str]:
    """The argv of a mapping command line; InvalidArgument when it is empty or unbalanced."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InvalidArgument(f"location mapping command {command!r} cannot be parsed: {exc}") from None
    if not argv:
        raise InvalidArgument("location mapping command is empty")
    return argv


def parse_mapping_output(command: str, hosts: Sequence[str], stdout: str) -> dict[str, str]:
    """Map each host to the location on its line of ``stdout``; LocationMappingError otherwise."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if len(lines) != len(hosts):
        raise LocationMappingError(
            f"location mapping command {command!r} printed {len(lines)} locations for {len(hosts)} hosts "
            f"{list(hosts)}; it must print one location per host, one per line (output: {stdout.strip()[:200]!r})"
        )
    result: dict[str, str] = {}
    for host, line in zip(hosts, lines, strict=True):
        try:
            result[host] = validate_location(line)
        except InvalidArgument as exc:
            raise LocationMappingError(
                f"location mapping command {command!r} gave host {host} an invalid location: {exc}"
            ) from None
    return result


class LocationMapper:
    """Runs the mapping command and caches its answers by host; ``clock`` is monotonic seconds."""

    def __init__(self, command: str, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.command = command
        self.argv = parse_command(command)
        self.timeout_s = timeout_s
        self.clock = clock
        self._cache: dict[str, str] = {}
        self._failed_until: dict[str, float] = {}
        self._inflight: dict[str, asyncio.Future[dict[str, str]]] = {}

    def cached(self, host: str) -> str | None:
        return self._cache.get(host)

    async def location_of_tserver(self, host: str) -> str:
        """Resolve ``host`` now (a tablet server registers); LocationMappingError when it fails."""
        location = await self._lookup(host)
        self._failed_until.pop(host, None)
        return location

    async def location_of_client(self, host: str) -> str:
        """The cached location of a client's host, resolving it on a miss; ``""`` when that fails."""
        cached = self._cache.get(host)
        if cached is not None:
            return cached
        if self.clock() < self._failed_until.get(host, 0.0):
            return ""
        try:
            return await self._lookup(host)
        except LocationMappingError as exc:
            self._failed_until[host] = self.clock() + FAILURE_RETRY_S
            log.warning("client at %s gets no location (retried in %.0f s): %s", host, FAILURE_RETRY_S, exc)
            return ""

    async def _lookup(self, host: str) -> str:
        """One run of the command for ``host``, shared by concurrent callers; fills the cache."""
        running = self._inflight.get(host)
        if running is None:
            running = asyncio.ensure_future(self.resolve([host]))
            self._inflight[host] = running
            running.add_done_callback(lambda done: self._finished(host, done))
        location = (await asyncio.shield(running))[host]
        self._cache[host] = location
        return location

    def _finished(self, host: str, done: asyncio.Future[dict[str, str]]) -> None:
        self._inflight.pop(host, None)
        if not done.cancelled():
            done.exception()  # retrieved here too: every waiter may have been cancelled meanwhile

    async def resolve(self, hosts: Sequence[str]) -> dict[str, str]:
        """Run the command once for ``hosts`` (no cache); LocationMappingError on any failure."""
        if not hosts:
            return {}
        stdout = await self._run(hosts)
        return parse_mapping_output(self.command, hosts, stdout)

    async def _run(self, hosts: Sequence[str]) -> str:
        where = f"location mapping command {self.command!r} for {', '.join(hosts)}"
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv,
                *hosts,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise LocationMappingError(f"{where} cannot be started: {exc}") from None
        try:
            async with asyncio.timeout(self.timeout_s):
                out, err = await process.communicate()
        except TimeoutError:
            raise LocationMappingError(f"{where} did not finish within {self.timeout_s:g} s; killed it") from None
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if process.returncode != 0:
            detail = err.decode(errors="replace").strip()[-_STDERR_TAIL_CHARS:] or "no message on stderr"
            raise LocationMappingError(f"{where} exited with status {process.returncode}: {detail}")
        return out.decode(errors="replace")
