"""Nyala: a distributed, replicated, columnar table store in the style of Apache Kudu.

Tables have a typed schema and a primary key and are split into tablets by hash and range
partitioning.  Each tablet is replicated by Raft across tablet servers; 2N+1 masters keep
the catalog in a Raft-replicated system tablet.  The layers and their dependency direction
are listed in README.md and enforced by ``tests/unit/test_layers.py``.

``nyala.connect("host:7051")`` returns a client (see :mod:`nyala.client`); it is imported on
first use so that ``import nyala`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nyala._version import __version__

if TYPE_CHECKING:
    from nyala.client import connect

__all__ = ["__version__", "connect"]


def __getattr__(name: str) -> Any:
    if name == "connect":
        from nyala.client import connect

        return connect
    raise AttributeError(f"module 'nyala' has no attribute {name!r}")
