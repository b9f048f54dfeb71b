"""The tablet copy RPCs: TabletCopyService (a source's sessions) and ConsensusService.StartTabletCopy.

Thin handlers: each validates its request in full before anything changes and hands it to
:class:`~.tablet_copy_source.TabletCopySourceManager` (BeginTabletCopySession, FetchData,
CheckSessionActive, EndTabletCopySession) or to :meth:`TabletManager.start_copy`
(StartTabletCopy, answered as soon as the copy has started).  FetchData's bytes go in sidecar
0, never in protobuf.  docs/tserver.md, "Tablet copy", tells the protocol.
"""

from __future__ import annotations

from nyala.errors import InvalidArgument
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.rpc import CallContext, RpcServer
from nyala.services import (
    BEGIN_TABLET_COPY_SESSION,
    CHECK_TABLET_COPY_SESSION_ACTIVE,
    END_TABLET_COPY_SESSION,
    FETCH_DATA,
    START_TABLET_COPY,
)
from nyala.tserver.manager import TabletManager
from nyala.tserver.metadata import TABLET_ID_PATTERN
from nyala.tserver.tablet_copy_client import parse_start_tablet_copy
from nyala.tserver.tablet_copy_source import TabletCopySourceManager

__all__ = ["TabletCopyService"]


class TabletCopyService:
    """Serves tablet copies to other servers and takes StartTabletCopy from leaders."""

    def __init__(self, uuid: str, sources: TabletCopySourceManager, tablets: TabletManager) -> None:
        self._uuid = uuid
        self._sources = sources
        self._tablets = tablets

    def register(self, rpc: RpcServer) -> None:
        rpc.add_method(BEGIN_TABLET_COPY_SESSION, self.begin_session)
        rpc.add_method(FETCH_DATA, self.fetch_data)
        rpc.add_method(CHECK_TABLET_COPY_SESSION_ACTIVE, self.check_session_active)
        rpc.add_method(END_TABLET_COPY_SESSION, self.end_session)
        rpc.add_method(START_TABLET_COPY, self.start_tablet_copy)

    async def begin_session(
        self, request: tcpb.BeginTabletCopySessionRequestPB, ctx: CallContext
    ) -> tcpb.BeginTabletCopySessionResponsePB:
        if not TABLET_ID_PATTERN.match(request.tablet_id):
            raise InvalidArgument(f"tablet id {request.tablet_id!r} must be 1-128 letters, digits, '_' or '-'")
        return await self._sources.begin(request.tablet_id, request.requestor_uuid)

    async def fetch_data(self, request: tcpb.FetchDataRequestPB, ctx: CallContext) -> tcpb.FetchDataResponsePB:
        response, data = await self._sources.fetch(
            request.session_id, request.file_id, request.offset, request.max_length
        )
        ctx.add_sidecar(data)
        return response

    def check_session_active(
        self, request: tcpb.CheckTabletCopySessionActiveRequestPB, ctx: CallContext
    ) -> tcpb.CheckTabletCopySessionActiveResponsePB:
        active = self._sources.check(request.session_id, request.keepalive)
        return tcpb.CheckTabletCopySessionActiveResponsePB(session_is_active=active)

    async def end_session(
        self, request: tcpb.EndTabletCopySessionRequestPB, ctx: CallContext
    ) -> tcpb.EndTabletCopySessionResponsePB:
        await self._sources.end(request.session_id, request.is_success)
        return tcpb.EndTabletCopySessionResponsePB()

    async def start_tablet_copy(
        self, request: tcpb.StartTabletCopyRequestPB, ctx: CallContext
    ) -> tcpb.StartTabletCopyResponsePB:
        await self._tablets.start_copy(parse_start_tablet_copy(request, self._uuid))
        return tcpb.StartTabletCopyResponsePB()
