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
- Elections: a follower that hears nothing from a leader for the election timeout (3 missed
  500 ms heartbeats; after a vote or a failed election, a random timeout stretched by Kudu's
  exponential backoff) first runs a pre-election for ``term + 1`` that changes no state anywhere; only
  a pre-vote majority starts the real election.  A replica that heard from a leader within
  the election timeout refuses both kinds of vote (seed 003's rule against disruptive
  servers), unless the candidate is a leadership-transfer target.  Votes are part of the
  hard state, so they are durable before the answer is sent.  A leader that has not heard
  from a majority for an election timeout steps down (check quorum).
- Replication: AppendEntries with the log-matching check and conflict truncation, fast
  backtracking by term hints, batches bounded in bytes, a bounded number of batches in
  flight per follower, periodic heartbeats (on the process's shared tick phase when the
  driver gives one, so a driver can coalesce them).  The leader sends its entries before
  its own sync and counts its own copy only once the driver reports it durable (see below).
  Commit follows Raft section 5.4.2: only an entry of the current term is committed by
  counting voters.  Every new leader appends a
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
2. Call ``tick(now_tick)`` every ``raft_tick_interval_ms``, where ``now_tick`` is a counter
   shared by every replica of the process and incremented once per tick (one timer ticks
   them all).  Leaders send their periodic heartbeats on the ticks where
   ``now_tick % heartbeat_ticks == 0``, so the heartbeats of every group between two servers
   leave on the same tick and the driver sends them as one call.  ``tick()`` without a
   number keeps a per-leader phase.  Either way a leader never goes more than
   ``heartbeat_ticks`` ticks without a heartbeat, and election and check-quorum timeouts
   count ticks as before.  Call ``step()`` for each message addressed to this replica.
   After any input, if ``has_ready()``, take ``ready()``.
3. Persist ``Ready.entries`` (each entry replaces any persisted entry at the same or a
   higher index) and ``Ready.hard_state`` (term, vote, commit); write
   ``Ready.committed_config`` to the consensus metadata.  Sync when ``Ready.must_sync``.
   Readies become durable in the order ``ready()`` returned them (one log, written in
   order); the driver may take the next Ready before this one is durable (pipelining).
4. Send ``Ready.messages_before_sync`` at once, before the Ready is durable.  They are only
   the leader's AppendEntries and heartbeats, and only those of a term already durable here;
   the leader's own entries in them do not count toward commit until rule 7.
5. Send ``Ready.messages_after_sync`` only once this Ready and every earlier one are durable:
   vote requests, votes, a follower's acknowledgements, everything whose meaning rests on
   this replica's term, vote or log.  (Sending all of ``Ready.messages`` after the sync, as
   a simple sequential driver does, is also correct.)  Messages may be dropped, delayed,
   duplicated or reordered; Raft tolerates all of it.  The driver may coalesce messages of
   many groups per destination.
6. Apply ``Ready.committed_entries`` to the state machine in order, only once this Ready and
   every earlier one are durable, and never an entry not handed out here.  A leader may
   commit entries it has not synced yet (a majority of followers did), hence this rule.
   WRITE entries carry the application's payload; NO_OP and CHANGE_CONFIG entries carry
   nothing for the state machine (decode a config with :func:`decode_config` if needed).
   A proposal succeeded iff its (term, index) comes back committed with the same term.
   Serve each ``ReadState`` once the state machine has applied its index; fail the reads in
   ``dropped_reads``.  Start a tablet copy for each peer in ``tablet_copy_targets``; when it
   completes, restart that replica from the copied state (rule 1).
7. Call ``advance(ready)`` once the Ready is durable and its after-sync messages are handed
   to the transport, in the order ``ready()`` returned the Readies; its committed entries
   may still be being applied (in order).  ``advance`` is the driver's report that the
   Ready's entries and hard state are on disk: only then do the leader's own entries count
   toward commit and its later messages leave before the sync.  The core may be stepped and
   ticked, and ``ready()`` called, while Readies are being persisted.
8. If persisting a Ready fails, stop the replica as if it crashed: never advance that Ready
   or a later one, send none of their after-sync messages, apply nothing more.  Proposals
   pending on it have an *unknown* outcome (followers may still commit what it sent before
   its write failed): report them as such, never as failed.  The replica restarts from what
   is durable (rule 1) once the disk is repaired, or is replaced.
9. Compact with ``compact(index)`` only up to what the state machine has durably applied,
   and keep enough log for lagging peers where possible (``peer_progress()``).
10. Client calls that refuse raise from ``nyala.errors``: NotTheLeader (with a
    leader hint), ServiceUnavailable (retry soon), IllegalState, Aborted (CAS failed),
    InvalidArgument, NotFound, AlreadyPresent.  A broken internal invariant raises
    AssertionError, which must stop the replica.

The leader appends in parallel with replication
-----------------------------------------------
Raft thesis section 10.2.1: the leader sends its new entries to the followers while it writes
them to its own log, so a write costs max(local sync, network + follower sync) rather than
their sum.  It is safe because:

- An entry commits only when a majority of voters hold it *durably*.  Followers acknowledge
  only after their sync (rule 5), and the leader counts its own copy only up to the last
  index the driver reported durable with ``advance`` (rule 7).  A leader that crashes before
  its own sync loses only a copy that never counted: the majority that committed the entry
  is made of durable follower copies, every later leader holds it (the vote restriction),
  and the restarted leader receives it back like any lagging follower.
- The entries it sent but lost are unique: they carry a term whose vote for itself was
  durable before they left (rule 4), so no other replica, and not this one after its
  restart (it can only campaign for a higher term), can ever create a different entry with
  the same index and term.  Log matching holds on the followers that received them; if no
  majority holds them, they were never committed and a later leader may overwrite them.
- Committed entries reach the state machine only once this replica's own copy is durable
  (rule 6), so the state machine is never ahead of the log it restarts from.
- A leader whose local write fails must stop (rule 8): it can no longer keep the promise
  that its log holds what it sent.  Its followers elect a new leader after the election
  timeout; entries it sent may still commit there, which is why its pending proposals have
  an unknown outcome rather than a failed one.

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
from nyala.consensus.core.progress import PeerHealth
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
    "PeerHealth",
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
