"""A server's data directory: one owner at a time, a permanent uuid, an atomic status file."""

from __future__ import annotations

from pathlib import Path

import pytest

from nyala.errors import Corruption, IllegalState
from nyala.server import DataDir, ServerStatus


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
