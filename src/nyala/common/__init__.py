"""Layer 0 basics shared by every other package: the error tree and settings declarations.

Nothing here does I/O, reads the clock or uses global randomness; it may be imported from
anywhere, including the pure Raft core and the placement algorithms.
"""

from nyala.common import config, errors

__all__ = ["config", "errors"]
