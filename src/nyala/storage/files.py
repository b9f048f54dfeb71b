"""File helpers for tablet files: durable copies and removal."""

from __future__ import annotations

import os
import shutil

from nyala.files import fsync_dir

__all__ = ["copy_durably", "fsync_dir", "remove_tablet_files"]


def copy_durably(src: str, dst: str) -> None:
    shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_tablet_files(path: str) -> None:
    for p in (path, path + ".wal", path + ".copying", path + ".wal.copying"):
        if os.path.exists(p):
            os.remove(p)
