"""Network partitions between a test's server processes: which links are cut, and telling the servers.

Each server started for partition tests carries ``NYALA_UNSAFE_TEST_NETWORK_FAULTS`` naming
its own control file (:meth:`NetworkPartitions.env_for`), and obeys the addresses listed
there as cut (:mod:`nyala.rpc.netfault`).  This class keeps the set of cut links between
named servers, rewrites every server's file when it changes, and returns only once every
running server has acknowledged the new version, so a test's next step already sees the cut.

A link is cut in both directions: both servers list each other.  Clients in the test process
carry no variable and reach every server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from nyala.common.hostport import HostPort
from nyala.errors import InvalidArgument
from nyala.rpc.netfault import NETWORK_FAULTS_ENV, read_applied
from nyala.testing.wait import WaitTimeout, wait_for

__all__ = ["NetworkPartitions"]


class NetworkPartitions:
    """Cut links between servers named by strings, each with an address and a control file."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._addresses: dict[str, HostPort] = {}
        self._cut: set[frozenset[str]] = set()
        self._version = 0

    def add_server(self, name: str, address: HostPort) -> dict[str, str]:
        """Know one more server; returns the environment it must be started with."""
        self._addresses[name] = address
        return {NETWORK_FAULTS_ENV: str(self.control_file(name))}

    def control_file(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    @property
    def cut_links(self) -> set[frozenset[str]]:
        """The cut links, each the pair of server names."""
        return set(self._cut)

    def reachable(self, a: str, b: str) -> bool:
        return frozenset((a, b)) not in self._cut

    def partition(
        self, group_a: Iterable[str], group_b: Iterable[str], *, running: Callable[[str], bool], timeout_s: float
    ) -> None:
        """Cut every link between a server of ``group_a`` and one of ``group_b`` (on top of the
        links already cut)."""
        a, b = self._known(group_a), self._known(group_b)
        if a & b:
            raise InvalidArgument(f"servers {sorted(a & b)} are on both sides of the partition")
        self._cut |= {frozenset((x, y)) for x in a for y in b}
        self._publish(running, timeout_s)

    def heal(self, *, running: Callable[[str], bool], timeout_s: float) -> None:
        """Restore every link."""
        self._cut.clear()
        self._publish(running, timeout_s)

    def unreachable_from(self, name: str) -> list[HostPort]:
        return sorted(self._addresses[other] for link in self._cut if name in link for other in link - {name})

    def _known(self, names: Iterable[str]) -> set[str]:
        chosen = set(names)
        unknown = chosen - set(self._addresses)
        if unknown:
            raise InvalidArgument(f"no servers named {sorted(unknown)}; known: {sorted(self._addresses)}")
        if not chosen:
            raise InvalidArgument("a side of a partition needs at least one server")
        return chosen

    def _publish(self, running: Callable[[str], bool], timeout_s: float) -> None:
        """Write every server's file with a new version; wait until each running server applied it."""
        self._version += 1
        version = self._version
        self.directory.mkdir(parents=True, exist_ok=True)
        for name in self._addresses:
            document = {"version": version, "unreachable": [str(a) for a in self.unreachable_from(name)]}
            path = self.control_file(name)
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_text(json.dumps(document) + "\n")
            temporary.replace(path)  # atomic: a server never reads half a file

        def lagging() -> Mapping[str, int | None]:
            return {
                name: seen
                for name in self._addresses
                if running(name) and ((seen := read_applied(self.control_file(name))) is None or seen < version)
            }

        try:
            wait_for(lambda: not lagging(), what=f"servers to apply network faults {version}", timeout_s=timeout_s)
        except WaitTimeout as exc:
            raise AssertionError(f"{exc}; still behind (server: version applied): {dict(lagging())}") from None
