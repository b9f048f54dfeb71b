"""Sans-IO Raft: one replica of one Raft group as a pure, deterministic state machine.

Theory of operation
-------------------
:class:`RaftCore` is driven by three kinds of input: ``step(message)`` for every message from
a peer, ``tick()`` every ``raft_tick_interval_ms`` of real (or simulated) time, and client
calls (``propose``, ``read_index``, ``change_config``, ``transfer_leadership``,
``step_down``, ``unsafe_change_config``, ``campaign``, ``compact``).  It never performs I/O:
everything it wants done collects in a :class:`Ready` that the driver takes with ``ready()``
and confirms with ``advance()``, in the manner of etcd's RawNode.  Randomness (election
jitter) comes from an injected ``random.Random``, so a seed replays a run exactly; the
production driver (``nyala.consensus.runtime``) and the simulator (``nyala.testing.sim``)
drive the very same class.

- Roles: LEADER, CANDIDATE, FOLLOWER (a voter), LEARNER (a NON_VOTER) and NON_PARTICIPANT
  (not in the active config).  Members are VOTER or NON_VOTER with Kudu's ``promote`` and
  ``replace`` attributes.  Only voters campaign, vote in tallies and count for commits.
- Elections: a follower that hears nothing from a leader for a randomized election timeout
  (3 missed 500 ms heartbeats, stretched by Kudu's exponential backoff after failed
  elections) first runs a pre-election for ``term + 1`` that changes no state anywhere; only
  a pre-vote majority starts the real election.  A replica that heard from a leader within
  the election timeout refuses both kinds of vote (seed 003's rule against disruptive
  servers), unless the candidate is a leadership-transfer target.  Votes are part of the
  hard state, so they are durable before the answer is sent.  A leader that has not heard
  from a majority for an election timeout steps down (check quorum).
- Replication: AppendEntries with the log-matching check and conflict truncation, fast
  backtracking by term hints, batches bounded in bytes, a bounded number of batches in
  flight per follower, periodic heartbeats.  Commit follows Raft section 5.4.2: only an
  entry of the current term is committed by counting voters.  Every new leader appends a
  NO_OP and is CONFIGURING until it commits, then RUNNING; only a RUNNING leader accepts
  writes, reads and config changes.
- Membership (seed 003): see ``_membership.py``: effective on append, rolled back on
  truncation, one voter change at a time with compare-and-set on the committed config's op
  index, automatic promotion of caught-up non-voters, transfer before the leader's own
  removal, graceful and abrupt step-down, and the operator's unsafe forced config.
- Log: the core keeps its own in-memory log (``log.py``); the driver persists what the
  Readies hand out and compacts the applied prefix with ``compact(index)`` to bound memory.
  A follower that needs compacted entries is listed in ``Ready.tablet_copy_targets``.

Reads: read-index, not leases
-----------------------------
A linearizable read asks ``read_index(request_id)``: the leader notes its commit index,
confirms with one heartbeat round that a majority still follows it, and returns
``ReadState(request_id, index)``; the read is served once ``index`` is applied.  Leases
would save that round trip but make safety depend on bounded clock drift and on ticks
arriving on time, which a paused process (GC, SIGSTOP, an overloaded 2-core machine) breaks;
read-index depends on nothing but messages, costs one heartbeat that many reads share, and
needs no extra state.  Reads are the one place where Nyala prefers being slower to being
subtly wrong.

Driver contract
---------------
1. Build a replica with ``RaftCore(group_id, peer_id, state, rng, options)`` where ``state``
   is a :class:`PersistentState`: :meth:`PersistentState.bootstrap` for a new replica, or
   the persisted hard state, committed config, log (base and entries) and the state
   machine's applied index after a restart or a tablet copy.
2. Call ``tick()`` every ``raft_tick_interval_ms`` and ``step()`` for each message addressed
   to this replica.  After any input, if ``has_ready()``, take ``ready()``.
3. Persist ``Ready.entries`` (each entry replaces any persisted entry at the same or a
   higher index) and ``Ready.hard_state`` (term, vote, commit); write
   ``Ready.committed_config`` to the consensus metadata.  Sync when ``Ready.must_sync``.
4. Only after step 3 is durable, send ``Ready.messages``, including those of later Readies:
   a vote or an acknowledgement must never leave before the term, vote and entries behind
   it are on disk.  Messages may be dropped, delayed, duplicated or reordered; Raft
   tolerates all of it.  The driver may coalesce messages of many groups per destination.
5. Apply ``Ready.committed_entries`` to the state machine in order, only after step 3, and
   never an entry not handed out here.  WRITE entries carry the application's payload;
   NO_OP and CHANGE_CONFIG entries carry nothing for the state machine (decode a config
   with :func:`decode_config` if needed).  A proposal succeeded iff its (term, index) comes
   back committed with the same term.
6. Serve each ``ReadState`` once the state machine has applied its index; fail the reads in
   ``dropped_reads``.  Start a tablet copy for each peer in ``tablet_copy_targets``; when it
   completes, restart that replica from the copied state (rule 1).
7. Call ``advance(ready)`` when steps 3 to 6 are done; only then call ``ready()`` again.
   The core may be stepped and ticked while a Ready is being persisted (group commit): new
   work simply waits for the next Ready.
8. Compact with ``compact(index)`` only up to what the state machine has durably applied,
   and keep enough log for lagging peers where possible (``peer_progress()``).
9. Client calls that refuse raise from ``nyala.common.errors``: NotTheLeader (with a
   leader hint), ServiceUnavailable (retry soon), IllegalState, Aborted (CAS failed),
   InvalidArgument, NotFound, AlreadyPresent.  A broken internal invariant raises
   AssertionError, which must stop the replica.

Time: the default tick is 100 ms, so a heartbeat is 5 ticks and the minimum election
timeout 15 ticks; see :class:`RaftOptions` for the settings (Kudu's names).
"""

from nyala.consensus.core.config import (
    ChangeKind,
    ConfigChange,
    Member,
    MemberType,
    RaftConfig,
    apply_changes,
    decode_config,
    encode_config,
)
from nyala.consensus.core.messages import (
    AppendRequest,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from nyala.consensus.core.options import RaftOptions, TickTiming
from nyala.consensus.core.raft import PeerProgress, RaftCore
from nyala.consensus.core.ready import PersistentState, ReadState, Ready, SoftState
from nyala.consensus.core.types import ENTRY_OVERHEAD_BYTES, EntryType, HardState, LeaderState, LogEntry, OpId, Role

__all__ = [
    "ENTRY_OVERHEAD_BYTES",
    "AppendRequest",
    "AppendResponse",
    "ChangeKind",
    "ConfigChange",
    "EntryType",
    "HardState",
    "Heartbeat",
    "HeartbeatResponse",
    "LeaderState",
    "LogEntry",
    "Member",
    "MemberType",
    "Message",
    "OpId",
    "PeerProgress",
    "PersistentState",
    "RaftConfig",
    "RaftCore",
    "RaftOptions",
    "ReadState",
    "Ready",
    "Role",
    "SoftState",
    "TickTiming",
    "TimeoutNow",
    "VoteRequest",
    "VoteResponse",
    "apply_changes",
    "decode_config",
    "encode_config",
]
