"""The asyncio driver of the Raft core: WAL, consensus metadata, state machine and transport.

How it fits together:

- :class:`RaftReplica` owns one group's :class:`~nyala.consensus.core.RaftCore`, its WAL
  (:mod:`nyala.wal`) and its consensus metadata file, and runs the drive loop that carries
  out the core's driver contract: persist, then send, then apply, then advance.  Proposals
  wait for the state machine's result for their entry; read-index reads wait for their
  index to be applied.
- :class:`RaftTransport` is shared by every replica of a process.  It ticks them all from
  one timer and sends their messages as one ``ConsensusService.Deliver`` call per
  destination server, so idle tablets cost one heartbeat call per peer, not per tablet.
- :class:`StateMachine` is what a replica applies to: the tablet store on a tablet server,
  the catalog on a master.

Layer 2: it uses the WAL and the RPC layer and knows nothing of tablets or catalogs.
"""

from nyala.consensus.runtime.cmeta import ConsensusMetadata
from nyala.consensus.runtime.replica import RaftReplica, ReplicaOptions, StateMachine
from nyala.consensus.runtime.transport import PeerDirectory, RaftEndpoint, RaftTransport

__all__ = [
    "ConsensusMetadata",
    "PeerDirectory",
    "RaftEndpoint",
    "RaftReplica",
    "RaftTransport",
    "ReplicaOptions",
    "StateMachine",
]
