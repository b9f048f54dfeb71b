"""The simulated network: per-message delay, drops, duplicates, reordering and partitions.

Every message is an event delivered after a random delay.  A profile sets the base delay
range, the drop and duplicate rates and how often a message is held back for a long time
(which reorders it behind later ones).  Partitions are a set of blocked (sender, recipient)
pairs, checked both when a message is sent and when it arrives, like a firewall rule that
also catches packets in flight.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from nyala.consensus.core import AppendRequest, Message
from nyala.testing.sim.loop import MS, EventLoop

__all__ = ["Network", "NetworkProfile"]


@dataclass(frozen=True, slots=True)
class NetworkProfile:
    """How unreliable the network is.  Delays are in microseconds."""

    min_delay_us: int = 200
    max_delay_us: int = 3 * MS
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0
    long_delay_rate: float = 0.0
    long_delay_max_us: int = 400 * MS

    @classmethod
    def reliable(cls) -> NetworkProfile:
        return cls()

    @classmethod
    def unreliable(cls) -> NetworkProfile:
        """Roughly MIT 6.5840's unreliable network: 10% loss, reordering by long delays."""
        return cls(
            min_delay_us=0,
            max_delay_us=27 * MS,
            drop_rate=0.1,
            duplicate_rate=0.03,
            long_delay_rate=0.05,
            long_delay_max_us=600 * MS,
        )


class Network:
    """Carries messages between simulated replicas."""

    def __init__(self, loop: EventLoop, rng: random.Random, deliver: Callable[[Message], None]) -> None:
        self._loop = loop
        self._rng = rng
        self._deliver = deliver
        self.profile = NetworkProfile()
        self.blocked: set[tuple[str, str]] = set()
        self.sent = 0
        self.delivered = 0
        self.entry_bytes = 0  # payload bytes of entries carried by AppendEntries
        self.sent_by_type: dict[str, int] = {}

    def send(self, m: Message) -> None:
        self.sent += 1
        name = type(m).__name__
        self.sent_by_type[name] = self.sent_by_type.get(name, 0) + 1
        if type(m) is AppendRequest:
            self.entry_bytes += sum(len(e.payload) for e in m.entries)
        if (m.sender, m.recipient) in self.blocked:
            return
        profile = self.profile
        rng = self._rng
        if profile.drop_rate and rng.random() < profile.drop_rate:
            return
        copies = 2 if profile.duplicate_rate and rng.random() < profile.duplicate_rate else 1
        for _ in range(copies):
            delay = rng.randint(profile.min_delay_us, profile.max_delay_us)
            if profile.long_delay_rate and rng.random() < profile.long_delay_rate:
                delay += rng.randint(0, profile.long_delay_max_us)
            self._loop.call_later(delay, self._arrive, m)

    def _arrive(self, m: Message) -> None:
        if (m.sender, m.recipient) in self.blocked:
            return
        self.delivered += 1
        self._deliver(m)

    # ------------------------------------------------------------------ partitions

    def partition(self, groups: Iterable[Iterable[str]]) -> None:
        """Let peers talk only within their group (peers in no group talk to everyone)."""
        groups = [list(g) for g in groups]
        blocked = set()
        for i, group in enumerate(groups):
            for other in groups[i + 1 :]:
                for a in group:
                    for b in other:
                        blocked.add((a, b))
                        blocked.add((b, a))
        self.blocked = blocked

    def isolate(self, peer_id: str, everyone: Iterable[str]) -> None:
        """Cut ``peer_id`` off from every other peer, keeping other partitions."""
        for other in everyone:
            if other != peer_id:
                self.blocked.add((peer_id, other))
                self.blocked.add((other, peer_id))

    def reconnect(self, peer_id: str) -> None:
        self.blocked = {pair for pair in self.blocked if peer_id not in pair}

    def allow_only(self, links: Iterable[tuple[str, str]], everyone: Iterable[str]) -> None:
        """Block every pair except the given (undirected) links."""
        allowed = set()
        for a, b in links:
            allowed.add((a, b))
            allowed.add((b, a))
        peers = list(everyone)
        self.blocked = {(a, b) for a in peers for b in peers if a != b and (a, b) not in allowed}

    def heal(self) -> None:
        self.blocked = set()
