"""Tablet copy of the sys catalog against an in-process master: a complete install, the
refusal to copy to a master the config does not name, and the input checks of every call."""

from __future__ import annotations

from pathlib import Path

import pytest

from nyala.consensus.runtime import ConsensusMetadata
from nyala.errors import IllegalState, InvalidArgument, NotFound
from nyala.master.catalog_copy import copy_catalog
from nyala.master.sys_catalog import SYS_CATALOG_ID, SysCatalogStore
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.rpc.loop import run
from nyala.services import BEGIN_TABLET_COPY_SESSION, CREATE_TABLE, END_TABLET_COPY_SESSION, FETCH_DATA

from .helpers import cluster, create_request


def test_a_copy_installs_the_catalog_with_its_term_and_config(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "m", num_tservers=1) as c:
            await c.call(CREATE_TABLE, create_request("copied", rf=1, wait=False))
            replica = c.master.catalog_manager.replica
            assert replica is not None
            target = tmp_path / "copy"
            # The requestor must be named by the config: the master itself is.
            config = await copy_catalog(
                c.messenger, c.master.address, c.master.uuid, target, target / "store", target / "raft"
            )
            assert [p.permanent_uuid for p in config.peers] == [c.master.uuid]
            assert not c.master.catalog_copy._sessions  # ended
            store = SysCatalogStore.open(target / "store")
            try:
                assert [t.name for t in store.load().live_tables()] == ["copied"]
            finally:
                store.close()
            cmeta = ConsensusMetadata.load(target / "raft")
            assert cmeta.hard_state.term == replica.term
            assert cmeta.committed_config.peer_ids == (c.master.uuid,)
            assert list((target / "raft" / "wal").iterdir())

    run(main())


def test_a_master_the_config_does_not_name_gets_no_copy(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "m", num_tservers=0) as c:
            target = tmp_path / "copy"
            with pytest.raises(IllegalState, match="does not name this master"):
                await copy_catalog(c.messenger, c.master.address, "stranger", target, target / "store", target / "raft")
            assert not target.exists()
            assert not c.master.catalog_copy._sessions

    run(main())


def test_bad_copy_calls_get_clear_errors(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "m", num_tservers=0) as c:
            with pytest.raises(NotFound, match="sys catalog"):
                await c.call(
                    BEGIN_TABLET_COPY_SESSION, tcpb.BeginTabletCopySessionRequestPB(requestor_uuid="x", tablet_id="t1")
                )
            with pytest.raises(InvalidArgument, match="requestor_uuid"):
                await c.call(BEGIN_TABLET_COPY_SESSION, tcpb.BeginTabletCopySessionRequestPB(tablet_id=SYS_CATALOG_ID))
            with pytest.raises(NotFound, match="not active"):
                await c.call(FETCH_DATA, tcpb.FetchDataRequestPB(session_id=b"nope", file_id=0))
            begin = await c.call(
                BEGIN_TABLET_COPY_SESSION,
                tcpb.BeginTabletCopySessionRequestPB(requestor_uuid="x", tablet_id=SYS_CATALOG_ID),
            )
            files = len(begin.files)
            assert {f.kind for f in begin.files} == {tcpb.STORE_FILE, tcpb.WAL_SEGMENT}
            with pytest.raises(InvalidArgument, match="file id"):
                await c.call(FETCH_DATA, tcpb.FetchDataRequestPB(session_id=begin.session_id, file_id=files))
            with pytest.raises(InvalidArgument, match="offset"):
                await c.call(
                    FETCH_DATA,
                    tcpb.FetchDataRequestPB(
                        session_id=begin.session_id, file_id=0, offset=begin.files[0].size_bytes + 1
                    ),
                )
            with pytest.raises(InvalidArgument, match="max_length"):
                await c.call(FETCH_DATA, tcpb.FetchDataRequestPB(session_id=begin.session_id, file_id=0, max_length=-1))
            await c.call(END_TABLET_COPY_SESSION, tcpb.EndTabletCopySessionRequestPB(session_id=begin.session_id))
            assert not c.master.catalog_copy._sessions

    run(main())
