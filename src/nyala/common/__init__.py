"""Layer 0 basics shared by every other package: settings declarations and addresses.

Nothing here does I/O, reads the clock or uses global randomness; it may be imported from
anywhere, including the pure Raft core and the placement algorithms.  The error tree, the
other layer-0 basic, has its own top-level home in :mod:`nyala.errors`.
"""

from nyala.common import config

__all__ = ["config"]
