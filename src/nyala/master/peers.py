"""The other masters: their addresses (from ``--master-addresses``) and uuids (asked, then remembered).

At first start a master asks every address in ``--master-addresses`` for
``GetMasterRegistration`` (its own is answered locally), retrying with backoff until all have
answered, because the sys catalog's Raft config names masters by uuid.  The uuid -> address
map is then written atomically to ``masters.json`` in the data directory, so a restarted
master rejoins even while other masters are down.

Masters are added and removed online (``nyala.master.membership``): each time the sys
catalog's committed config changes, :meth:`MasterPeers.set_members` replaces the map with the
config's members and rewrites ``masters.json``.  At a restart the remembered map therefore
rules; ``--master-addresses`` naming the same set (the new one after a change) or the set the
master was created with is accepted, and any other set is refused, since it would point this
master at masters it never knew (another cluster, or a typo).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from pathlib import Path

from nyala.common.hostport import HostPort, parse_address, parse_address_list
from nyala.errors import IllegalState, InvalidArgument, NyalaError
from nyala.files import write_atomically
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger
from nyala.services import GET_MASTER_REGISTRATION

__all__ = ["MasterPeers", "own_and_all_addresses"]

log = logging.getLogger("nyala.master")

MASTERS_FILE = "masters.json"


def own_and_all_addresses(master_addresses: str, bind_address: HostPort) -> list[HostPort]:
    """Every master's address, checked to include this master's own bind address."""
    if not master_addresses.strip():
        return [bind_address]
    addresses = parse_address_list(master_addresses)
    if len(set(addresses)) != len(addresses):
        raise InvalidArgument(f"--master-addresses lists a master twice: {master_addresses}")
    if bind_address not in addresses:
        raise InvalidArgument(
            f"--master-addresses ({master_addresses}) must include this master's own address {bind_address}"
        )
    return addresses


class MasterPeers:
    """uuid <-> address of every master, this one included."""

    def __init__(self, self_uuid: str, self_address: HostPort, addresses: list[HostPort], data_dir: Path) -> None:
        self.self_uuid = self_uuid
        self.self_address = self_address
        self.addresses = addresses
        self._path = data_dir / MASTERS_FILE
        self.by_uuid: dict[str, HostPort] = {}
        #: The --master-addresses this master was first started with (kept in masters.json).
        self._created_with: list[HostPort] = list(addresses)

    def address_of(self, uuid: str) -> HostPort | None:
        return self.by_uuid.get(uuid)

    def uuid_of(self, address: HostPort) -> str | None:
        return next((u for u, a in self.by_uuid.items() if a == address), None)

    def load(self) -> bool:
        """Read the remembered map; False when there is none (first start)."""
        try:
            data = json.loads(self._path.read_text())
        except FileNotFoundError:
            return False
        except ValueError as e:
            raise IllegalState(f"{self._path} is not valid JSON: {e}") from e
        if "masters" not in data:  # the first format: the uuid -> address map alone
            data = {"masters": data, "created_with": list(data.values())}
        remembered = {str(u): parse_address(a) for u, a in data["masters"].items()}
        created_with = {parse_address(a) for a in data.get("created_with", [])}
        flags = set(self.addresses)
        if flags not in (set(remembered.values()), created_with) and not flags <= set(remembered.values()):
            raise InvalidArgument(
                f"--master-addresses {sorted(map(str, self.addresses))} differ from this master's masters "
                f"{sorted(map(str, remembered.values()))}; change masters with `nyala master add` and "
                "`nyala master remove`, not by editing the flag"
            )
        if remembered.get(self.self_uuid) != self.self_address:
            raise IllegalState(f"{self._path} does not list this master ({self.self_uuid} at {self.self_address})")
        self.by_uuid = remembered
        self.addresses = sorted(remembered.values(), key=str)
        self._created_with = sorted(created_with, key=str)
        return True

    def set_members(self, members: dict[str, HostPort]) -> None:
        """The sys catalog's committed config changed: these are the masters now (in memory;
        :meth:`save` writes ``masters.json``)."""
        self.by_uuid = dict(members)
        self.addresses = sorted(members.values(), key=str)

    def save(self) -> None:
        """Write the map to ``masters.json`` atomically (blocking: call off the event loop)."""
        self._save()

    async def discover(self, messenger: Messenger, timeout_s: float, rng: random.Random | None = None) -> None:
        """Ask every other master for its uuid until all have answered, then remember the map."""
        rng = rng or random.Random()
        found: dict[str, HostPort] = {self.self_uuid: self.self_address}
        missing = [a for a in self.addresses if a != self.self_address]
        delay = 0.05
        while missing:
            answers = await asyncio.gather(*(self._ask(messenger, a, timeout_s) for a in missing))
            for address, uuid in zip(missing, answers, strict=True):
                if uuid is None:
                    continue
                if uuid in found:
                    raise InvalidArgument(f"masters at {found[uuid]} and {address} have the same uuid {uuid}")
                found[uuid] = address
            missing = [a for a in missing if a not in found.values()]
            if missing:
                log.info("waiting for masters %s to answer GetMasterRegistration", ", ".join(map(str, missing)))
                await asyncio.sleep(delay * (1 + rng.random()))
                delay = min(delay * 2, 1.0)
        self.by_uuid = found
        await asyncio.to_thread(self._save)

    async def _ask(self, messenger: Messenger, address: HostPort, timeout_s: float) -> str | None:
        try:
            response = await messenger.call(
                address, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB(), timeout=timeout_s
            )
        except NyalaError as e:
            log.debug("master %s did not answer GetMasterRegistration: %s", address, e)
            return None
        return response.instance.permanent_uuid or None

    def _save(self) -> None:
        data = {
            "masters": {u: str(a) for u, a in sorted(self.by_uuid.items())},
            "created_with": [str(a) for a in self._created_with],
        }
        text = json.dumps(data, indent=1)
        write_atomically(self._path, text.encode())
