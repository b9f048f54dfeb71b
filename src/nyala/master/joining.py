"""A master started into a running cluster: find out, wait to be added, copy the catalog.

At first start (no consensus metadata yet) a master asks the other masters of
``--master-addresses`` ``ConnectToMaster``.  When one whose catalog is open answers with a set
of masters that does not include this master's address, the cluster exists already and this
master is new to it: it must not create a catalog of its own.  It then

1. with ``--master-auto-join`` (Kudu's ``master_auto_join_cluster``), asks the leader to add
   it (``AddMaster``), retrying while the leader is busy or changing; without it, waits for an
   operator's ``nyala master add``;
2. waits until the leader's committed config names it (ConnectToMaster lists its address);
3. copies the sys catalog from the leader by tablet copy (:func:`copy_catalog`), whose
   committed config names it as a NON_VOTER with ``promote``;

and then opens the copied catalog like a restart does.  The leader replicates the rest and
promotes it to VOTER once it has caught up.  Everything is retried with backoff; a master
stopped meanwhile simply starts over at its next start.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from pathlib import Path

from nyala.common.hostport import HostPort
from nyala.errors import IllegalState, NotTheLeader, NyalaError, RetriableError, ServiceUnavailable
from nyala.master.catalog_copy import copy_catalog
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger
from nyala.services import ADD_MASTER, CONNECT_TO_MASTER

__all__ = ["existing_masters", "join_cluster"]

log = logging.getLogger("nyala.master")

_CALL_TIMEOUT_S = 5.0
_MAX_PAUSE_S = 2.0


def _addresses(response: mpb.ConnectToMasterResponsePB) -> list[HostPort]:
    return [HostPort(a.host, a.port) for a in response.master_addresses]


async def _ask(messenger: Messenger, address: HostPort) -> mpb.ConnectToMasterResponsePB | None:
    try:
        return await messenger.call(address, CONNECT_TO_MASTER, mpb.ConnectToMasterRequestPB(), timeout=_CALL_TIMEOUT_S)
    except NyalaError as e:
        log.debug("master %s did not answer ConnectToMaster: %s", address, e)
        return None


async def existing_masters(messenger: Messenger, own: HostPort, others: Sequence[HostPort]) -> list[HostPort] | None:
    """The masters of a running cluster that does not count this master yet, or None when
    none of ``others`` says so (a new cluster, or one this master belongs to)."""
    answers = await asyncio.gather(*(_ask(messenger, a) for a in others))
    for answer in answers:
        if answer is None or answer.role == common_pb2.UNKNOWN_ROLE:
            continue  # its catalog is not open: it knows no more than its flags
        members = _addresses(answer)
        if members and own not in members:
            return members
    return None


async def _leader(messenger: Messenger, masters: Sequence[HostPort]) -> tuple[HostPort, list[HostPort]] | None:
    answers = await asyncio.gather(*(_ask(messenger, a) for a in masters))
    for address, answer in zip(masters, answers, strict=True):
        if answer is not None and answer.role == common_pb2.LEADER:
            return address, _addresses(answer)
    return None


async def join_cluster(
    messenger: Messenger,
    own_uuid: str,
    own: HostPort,
    masters: list[HostPort],
    *,
    auto_join: bool,
    catalog_dir: Path,
    store_dir: Path,
    raft_dir: Path,
    rng: random.Random | None = None,
) -> None:
    """Get this master into the cluster of ``masters`` and its catalog copied (see the module doc)."""
    rng = rng or random.Random()
    pause = 0.1
    waiting_logged = False
    while True:
        found = await _leader(messenger, masters)
        if found is not None:
            leader, members = found
            masters = list(dict.fromkeys([*members, *masters]))
            try:
                if own not in members:
                    if auto_join:
                        request = mpb.AddMasterRequestPB(address=common_pb2.HostPortPB(host=own.host, port=own.port))
                        answer = await messenger.call(leader, ADD_MASTER, request, timeout=4 * _CALL_TIMEOUT_S)
                        log.info("asked leader master %s to add this master: uuid %s", leader, answer.uuid)
                        continue
                    if not waiting_logged:
                        log.info(
                            "this master is not a member of the cluster of %s yet: waiting for "
                            "`nyala master add %s %s` (or start it with --master-auto-join)",
                            ", ".join(map(str, members)),
                            ",".join(map(str, members)),
                            own,
                        )
                        waiting_logged = True
                else:
                    await copy_catalog(messenger, leader, own_uuid, catalog_dir, store_dir, raft_dir)
                    return
            except (RetriableError, NotTheLeader, IllegalState, ServiceUnavailable) as e:
                log.info("joining the cluster through %s: %s; retrying", leader, e)
            except NyalaError as e:
                log.warning("joining the cluster through %s failed: %s: %s; retrying", leader, type(e).__name__, e)
        await asyncio.sleep(pause * (1 + rng.random()))
        pause = min(pause * 2, _MAX_PAUSE_S)
