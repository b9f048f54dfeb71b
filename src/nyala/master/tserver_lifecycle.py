"""ChangeTServerState and UnregisterTServer on the leader: maintenance mode and forgetting dead servers.

Both go through the catalog's one write path (:meth:`CatalogManager.exclusive` and
:meth:`CatalogManager.replicate`), validating against the committed view under the write
lock, so bad input or a refused request changes nothing.

Maintenance mode (Kudu's ``kudu tserver state enter_maintenance``): a ``TSERVER_STATE`` entry
in the sys catalog, so a new leader master knows it at once.  The server must be known, i.e.
registered with the leader or named by the catalog (a state entry, or a replica in any
tablet's committed config); otherwise NotFound.  Entering maintenance twice, or exiting when
not in it, succeeds without writing anything (as Kudu's ``SetTServerState``), and the answer
says nothing changed.  Leaving it asks every tablet server for a full tablet report, so that
the replicas left alone on a server that failed in maintenance are replaced now rather than
at the next change of their tablets.

Unregistering (Kudu 1.17's ``kudu tserver unregister``) forgets a dead server: it is refused
for a server the leader still hears from (it would register again at its next heartbeat), and
for one that still holds replicas (in a committed config of a live tablet, or reported) unless
``force``.  The write deletes the server's state entry and carries its uuid in
``unregistered_tservers``, so every master, followers included, forgets it as it applies the
write (see :mod:`nyala.master.sys_catalog`); a master that was down catches up from the log.
"""

from __future__ import annotations

import logging
import time

from nyala.catalog import check_tserver_uuid, maintenance_write, unregister_write
from nyala.errors import IllegalState, InvalidArgument, NotFound
from nyala.master.catalog_manager import CatalogManager
from nyala.master.leader import LeaderView
from nyala.master.ts_manager import TSManager
from nyala.proto import master_pb2 as mpb

__all__ = ["TServerLifecycle", "replicas_on"]

log = logging.getLogger("nyala.master")

CHANGE = mpb.TServerStateChangePB
_SHOWN_TABLETS = 5  # tablets named in a refusal; the count says how many there are in all


def replicas_on(view: LeaderView, uuid: str) -> list[str]:
    """Tablets the server holds a replica of: in the committed config of a live tablet, or reported
    (and not tombstoned), sorted."""
    tablets = {t.tablet_id for t in view.catalog.tablets_on(uuid)}
    for tablet_id in view.replicas.tablets_of(uuid):
        report = view.replicas.report(uuid, tablet_id)
        tablet = view.catalog.tablet(tablet_id)
        if report is not None and not report.tombstoned and tablet is not None and not tablet.dead:
            tablets.add(tablet_id)
    return sorted(tablets)


def _named(tablets: list[str]) -> str:
    shown = ", ".join(tablets[:_SHOWN_TABLETS])
    return shown + (f" and {len(tablets) - _SHOWN_TABLETS} more" if len(tablets) > _SHOWN_TABLETS else "")


class TServerLifecycle:
    """The leader's tablet-server state changes."""

    def __init__(self, manager: CatalogManager, ts_manager: TSManager) -> None:
        self._manager = manager
        self._ts = ts_manager

    def _known(self, view: LeaderView, uuid: str) -> bool:
        return self._ts.get(uuid) is not None or view.catalog.names_tserver(uuid)

    async def change_state(self, request: mpb.ChangeTServerStateRequestPB) -> bool:
        """Enter or exit maintenance mode; True when the catalog changed, False when already so."""
        uuid = request.change.uuid
        check_tserver_uuid(uuid)
        if request.change.change == CHANGE.ENTER_MAINTENANCE_MODE:
            enter = True
        elif request.change.change == CHANGE.EXIT_MAINTENANCE_MODE:
            enter = False
        else:
            raise InvalidArgument(
                f"unknown tablet server state change {request.change.change}: "
                "expected ENTER_MAINTENANCE_MODE or EXIT_MAINTENANCE_MODE"
            )

        async def write() -> bool:
            view = self._manager.leader()
            if not self._known(view, uuid):
                raise NotFound(f"tablet server {uuid} is not registered with the leader master and no tablet names it")
            if view.catalog.in_maintenance(uuid) == enter:
                return False
            await self._manager.replicate(view, maintenance_write(uuid, enter, time.time_ns() // 1000))
            if not enter:
                # Tablet leaders report a member's health only when it changes: the failures of
                # a server that stayed down in maintenance were reported (and left alone) long
                # ago.  Full reports bring them back so the master replaces its replicas now
                # (Kudu asks every tablet server for a full report here too).
                self._ts.request_full_reports()
            return True

        changed = await self._manager.exclusive(write)
        what = "entered" if enter else "exited"
        if changed:
            log.info("tablet server %s %s maintenance mode", uuid, what)
        return changed

    async def unregister(self, request: mpb.UnregisterTServerRequestPB) -> int:
        """Forget a dead tablet server on every master; returns the replicas it still held (force only)."""
        uuid = request.uuid
        check_tserver_uuid(uuid)

        async def write() -> int:
            view = self._manager.leader()
            descriptor = self._ts.get(uuid)
            if descriptor is None and not view.catalog.in_maintenance(uuid):
                raise NotFound(f"tablet server {uuid} is not registered with the leader master")
            if descriptor is not None and self._ts.is_live(descriptor):
                age = descriptor.since_heartbeat_s(self._ts.clock())
                raise IllegalState(
                    f"tablet server {uuid} is live (last heartbeat {age:.1f} s ago) and cannot be unregistered; "
                    f"stop it and wait until it is dead ({self._ts.unresponsive_timeout_s:g} s without a heartbeat)"
                )
            hosted = replicas_on(view, uuid)
            if hosted and not request.force:
                raise IllegalState(
                    f"tablet server {uuid} still holds {len(hosted)} replicas (tablets {_named(hosted)}); "
                    "move them away first, or force the unregistration"
                )
            await self._manager.replicate(view, unregister_write(uuid))
            # Every master forgets it as the write applies; the leader also does so now, so
            # that a listing right after this answer no longer shows it.
            self._ts.forget(uuid)
            view.forget_tserver(uuid)
            return len(hosted)

        held = await self._manager.exclusive(write)
        suffix = f", forced while it still held {held} replicas" if held else ""
        log.info("tablet server %s unregistered%s", uuid, suffix)
        return held
