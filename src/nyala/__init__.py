"""Nyala: a distributed, replicated, columnar table store in the style of Apache Kudu.

Tables have a typed schema and a primary key and are split into tablets by hash and range
partitioning.  Each tablet is replicated by Raft across tablet servers; 2N+1 masters keep
the catalog in a Raft-replicated system tablet.  The layers and their dependency direction
are described in DESIGN.md and enforced by ``tests/unit/test_layers.py``.
"""

from nyala._version import __version__

__all__ = ["__version__"]
