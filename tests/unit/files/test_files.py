"""Durable files: atomic replacement, durable copies, directory syncs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nyala.files import copy_durably, fsync_dir, write_atomically


def test_write_atomically_replaces_the_whole_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old contents that are longer than the new ones")
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    big = bytes(range(256)) * 40_000  # 10 MB: more than one write() may take
    write_atomically(target, big)
    assert target.read_bytes() == big
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_missing_directory_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "absent" / "state.json", b"x")
    with pytest.raises(FileNotFoundError):
        fsync_dir(tmp_path / "absent")
    assert list(tmp_path.iterdir()) == []


def test_copy_durably_copies_the_bytes(tmp_path: Path) -> None:
    source = tmp_path / "a.duckdb"
    source.write_bytes(bytes(range(256)) * 1000)
    copy_durably(source, tmp_path / "b.duckdb")
    copy_durably(str(source), str(tmp_path / "c.duckdb"))
    assert (tmp_path / "b.duckdb").read_bytes() == (tmp_path / "c.duckdb").read_bytes() == source.read_bytes()


def test_fsync_dir_takes_a_path_or_an_open_descriptor_it_leaves_open(tmp_path: Path) -> None:
    fsync_dir(tmp_path)
    fsync_dir(str(tmp_path))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync_dir(fd)
        os.fstat(fd)  # still open
    finally:
        os.close(fd)
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotADirectoryError):
        fsync_dir(tmp_path / "file")
