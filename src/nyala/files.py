"""Small files replaced atomically and durably: consensus metadata, tablet metadata, server state.

The classic sequence: write a temporary file beside the target, fsync it, rename it over the
target, then fsync the directory so the rename itself survives a crash.  A reader therefore
sees the old contents or the new, never a torn mix.  Layer 1: plain file I/O, no policy.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_dir", "write_atomically"]


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: all of it or none of it, durable when this returns."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path | str) -> None:
    """Make a directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
