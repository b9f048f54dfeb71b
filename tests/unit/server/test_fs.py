"""A server's data directory: one owner at a time (server or offline tool), a permanent uuid, a status file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nyala.errors import Corruption, IllegalState, NotFound
from nyala.server import DataDir, OfflineDataDir, ServerStatus
from nyala.server.fs import pid_alive


def test_uuid_is_created_once_and_kept(tmp_path: Path) -> None:
    first = DataDir(tmp_path / "ts")
    uuid = first.uuid
    first.close()
    again = DataDir(tmp_path / "ts")
    assert again.uuid == uuid
    assert len(uuid) == 32
    again.close()


def test_two_servers_cannot_share_a_directory(tmp_path: Path) -> None:
    owner = DataDir(tmp_path / "ts")
    try:
        with pytest.raises(IllegalState, match="in use by another server"):
            DataDir(tmp_path / "ts")
    finally:
        owner.close()
    DataDir(tmp_path / "ts").close()  # free again once the owner closed


def test_status_file_announces_the_server_until_it_closes(tmp_path: Path) -> None:
    data_dir = DataDir(tmp_path / "m")
    assert ServerStatus.read(tmp_path / "m") is None
    data_dir.write_status("master", "127.0.0.1:7051")
    status = ServerStatus.read(tmp_path / "m")
    assert status is not None
    assert (status.kind, status.uuid, status.rpc_address) == ("master", data_dir.uuid, "127.0.0.1:7051")
    data_dir.close()
    assert ServerStatus.read(tmp_path / "m") is None


def test_a_damaged_instance_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ts").mkdir()
    (tmp_path / "ts" / "instance").write_text("not-a-uuid")
    with pytest.raises(Corruption, match="does not hold a uuid"):
        DataDir(tmp_path / "ts")


# --- offline tools: OfflineDataDir --------------------------------------------------------------


def test_an_offline_tool_is_refused_while_a_server_holds_the_lock(tmp_path: Path) -> None:
    server = DataDir(tmp_path / "ts")
    try:
        server.write_status("tserver", "127.0.0.1:7050")
        with pytest.raises(IllegalState, match=rf"in use by a running server \(tserver pid {os.getpid()}\)"):
            OfflineDataDir(tmp_path / "ts")
    finally:
        server.close()
    with OfflineDataDir(tmp_path / "ts") as offline:
        assert offline.uuid == server.uuid
        # ...and a server cannot start on the directory while the tool holds it.
        with pytest.raises(IllegalState, match="in use by another server"):
            DataDir(tmp_path / "ts")
    DataDir(tmp_path / "ts").close()


def test_an_offline_tool_is_refused_while_server_json_names_a_live_process(tmp_path: Path) -> None:
    # A server whose lock the tool could take anyway (flock is a no-op on some network
    # filesystems) is still recognised by the live pid in its status file.
    DataDir(tmp_path / "ts").close()
    # A process that lives until the test closes its stdin (or kills it).
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        status = {"kind": "tserver", "uuid": "u" * 32, "rpc_address": "127.0.0.1:7050", "pid": other.pid}
        (tmp_path / "ts" / "server.json").write_text(json.dumps(status))
        with pytest.raises(IllegalState, match=f"names running process {other.pid}"):
            OfflineDataDir(tmp_path / "ts")
    finally:
        other.kill()
        other.communicate(timeout=10)  # reaps it and closes its stdin pipe
    assert not pid_alive(other.pid)
    OfflineDataDir(tmp_path / "ts").close()  # a stale status file (a killed server) does not block the tool


def test_an_offline_tool_needs_a_server_data_directory(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="is not a Nyala server's data directory"):
        OfflineDataDir(tmp_path / "nothing-here")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound, match="has no instance file"):
        OfflineDataDir(tmp_path / "empty")
    assert not (tmp_path / "nothing-here").exists()  # looked at, never created


def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(0)
    assert not pid_alive(2**22 + 12345)  # above Linux's pid_max
