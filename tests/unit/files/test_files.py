"""Atomic, durable replacement of small files."""

from __future__ import annotations

from pathlib import Path

import pytest

from nyala.files import fsync_dir, write_atomically


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
