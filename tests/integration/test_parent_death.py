"""Servers the test kit starts die with the process that started them, however it dies.

A small program starts a MiniCluster, stops one tablet server with SIGSTOP (a paused server
runs no code of its own, so only the kernel's parent-death signal can end it), writes the
servers' PIDs and waits.  The test kills that program outright and waits until every server
is gone.  Whatever happens, the test stops every server it can find by PID at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nyala.server.fs import ServerStatus
from nyala.testing.process import pid_alive
from nyala.testing.wait import wait_for

pytestmark = pytest.mark.timeout(180)

OWNER = """
import json, pathlib, sys, threading
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
root = pathlib.Path(sys.argv[1])
cluster = MiniCluster(root / "cluster", MiniClusterOptions(num_masters=1, num_tservers=2)).start()
cluster.pause(cluster.tservers[1])
pids = [s.process.pid for s in [*cluster.masters, *cluster.tservers]]
(root / "pids.tmp").write_text(json.dumps(pids))
(root / "pids.tmp").replace(root / "pids.json")
threading.Event().wait()
"""


def servers_on_disk(cluster_root: Path) -> list[int]:
    """PIDs from every server.json under the cluster, for cleaning up whatever was started."""
    pids = []
    for server_dir in cluster_root.glob("*-*"):
        status = ServerStatus.read(server_dir) if server_dir.is_dir() else None
        if status is not None:
            pids.append(status.pid)
    return pids


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_servers_die_with_the_process_that_started_them(tmp_path: Path, how: signal.Signals) -> None:
    log = open(tmp_path / "owner.log", "wb")  # noqa: SIM115 - closed in the finally below
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)], stdout=log, stderr=subprocess.STDOUT)
    pids: list[int] = []
    try:
        wait_for(
            lambda: (tmp_path / "pids.json").exists() or owner.poll() is not None,
            what="the owner to start its cluster",
            timeout_s=120,
        )
        assert owner.poll() is None, (tmp_path / "owner.log").read_text()
        pids = json.loads((tmp_path / "pids.json").read_text())
        assert len(pids) == 3
        assert all(pid_alive(pid) for pid in pids)

        os.kill(owner.pid, how)
        assert owner.wait(timeout=30) == -how  # killed outright: no exit handler ran

        wait_for(
            lambda: not [pid for pid in pids if pid_alive(pid)],
            what=f"servers {pids} of an owner killed by {how.name} to be gone",
            timeout_s=30,
        )
    finally:
        owner.kill()
        owner.wait()
        log.close()
        for pid in {*pids, *servers_on_disk(tmp_path / "cluster")}:
            if pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # works on a paused process too
