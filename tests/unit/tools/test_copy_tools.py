"""``remote-replica copy``'s RPC side against two tablet servers in this process: a copy that
fails on the destination (its source stops mid-download) is reported with the destination's
own error, and leaves nothing there.  The good paths and the refusals run on real processes in
tests/integration/test_copy_tools.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nyala.errors import Aborted
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.testing.wait import wait_for_async
from nyala.tools.replica_ops import copy_remote_replica
from nyala.tserver import TabletServer
from tests.unit.tserver.test_tablet_copy_destination import leading_tablet, options, write

pytestmark = pytest.mark.timeout(60)


def test_a_copy_that_fails_on_the_destination_is_reported_with_its_error(tmp_path: Path) -> None:
    async def main() -> None:
        source = TabletServer(options(tmp_path, "a"))
        # Throttled: a few hundred KB take seconds, long enough to stop the source midway.
        dest = TabletServer(
            options(tmp_path, "b", tablet_copy_throttler_bytes_per_sec=100_000, tablet_copy_fetch_max_retries=0)
        )
        messenger = Messenger()
        await source.start()
        await dest.start()
        stopped = False
        try:
            tablet = await leading_tablet(source)
            await write(tablet, range(3000))
            seen: list[tuple[int, int]] = []
            copy = asyncio.ensure_future(
                copy_remote_replica(
                    messenger,
                    "t1",
                    source.address,
                    dest.address,
                    force=False,
                    timeout_s=30,
                    progress=lambda done, total: seen.append((done, total)),
                )
            )
            await wait_for_async(lambda: bool(seen) and seen[-1][0] > 0, what="bytes to arrive", timeout_s=20)
            assert dest.tablets.get("t1").state == tpb.COPYING
            await source.stop()
            stopped = True
            with pytest.raises(Aborted, match=r"the tablet copy of t1 to .* failed there: tablet copy failed: "):
                await copy
            assert dest.tablets.find("t1") is None  # nothing half-copied is left
            assert not (dest.data_dir.path / "tablets" / "t1.copy-tmp").exists()
            assert seen[-1][1] > 0
        finally:
            await dest.stop()
            if not stopped:
                await source.stop()
            await messenger.close()

    run(main())
