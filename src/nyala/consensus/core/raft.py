"""RaftCore: one replica of one Raft group, as a deterministic state machine.

Inputs are ``step(message)``, ``tick()`` and the client calls (``propose``, ``change_config``,
``transfer_leadership``, ``step_down``, ``unsafe_change_config``, ``read_index``,
``campaign``, ``compact``).  Outputs accumulate until the driver takes them with ``ready()``
and confirms them with ``advance()``.  Nothing here blocks, sleeps, reads a clock or draws
from global randomness, so a seed replays a run exactly.

The replication and membership halves of the state machine live in the mixins of
``_replication.py`` and ``_membership.py``; this module holds the state, the election logic
and the driver-facing surface.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nyala.consensus.core._membership import MembershipMixin
from nyala.consensus.core._replication import ReplicationMixin
from nyala.consensus.core._state import CoreState, Phase
from nyala.consensus.core.config import RaftConfig, decode_config
from nyala.consensus.core.log import RaftLog
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
from nyala.consensus.core.options import RaftOptions
from nyala.consensus.core.progress import Progress
from nyala.consensus.core.ready import PersistentState, ReadState, Ready, SoftState
from nyala.consensus.core.types import EntryType, HardState, LeaderState, LogEntry, OpId, Role
from nyala.errors import Corruption, IllegalState, InvalidArgument, NotTheLeader, ServiceUnavailable

if TYPE_CHECKING:
    from random import Random

__all__ = ["PeerProgress", "RaftCore"]


class PeerProgress:
    """A read-only view of the leader's replication state for one peer (for drivers and tools)."""

    __slots__ = ("answers", "health", "match", "next", "peer_id", "silent_ticks", "state")

    def __init__(self, peer_id: str, progress: Progress, failed_ticks: int) -> None:
        self.peer_id = peer_id
        #: Answers heard from the peer in this leadership; a later view with more proves the
        #: peer answered in between (silent_ticks alone cannot tell a fresh answer from an old one).
        self.answers = progress.answers
        self.match = progress.match
        self.next = progress.next
        self.state = progress.state.value
        self.silent_ticks = progress.silent_ticks
        self.health = progress.health(failed_ticks)

    def __repr__(self) -> str:
        return f"PeerProgress({self.peer_id}, {self.state}, match={self.match}, next={self.next})"


class RaftCore(ReplicationMixin, MembershipMixin, CoreState):
    """One Raft replica.  Not thread-safe: one driver calls it from one thread or task."""

    def __init__(
        self,
        group_id: str,
        peer_id: str,
        state: PersistentState,
        rng: Random,
        options: RaftOptions | None = None,
    ) -> None:
        if not group_id or not peer_id:
            raise InvalidArgument("a Raft replica needs a non-empty group id and peer id")
        self.group_id = group_id
        self.peer_id = peer_id
        self._options = options or RaftOptions()
        self._timing = self._options.timing()
        self._rng = rng
        self._restore(state)
        self._handlers: dict[type, Callable[[Any], None]] = {
            AppendRequest: self._on_append_request,
            AppendResponse: self._on_append_response,
            VoteRequest: self._on_vote_request,
            VoteResponse: self._on_vote_response,
            Heartbeat: self._on_heartbeat,
            HeartbeatResponse: self._on_heartbeat_response,
            TimeoutNow: self._on_timeout_now,
        }

    # ------------------------------------------------------------------ restart

    def _restore(self, state: PersistentState) -> None:
        base = state.log_base
        _check_persisted_log(base, state.entries, state.applied_index)
        self._log = RaftLog(base, state.entries)
        hs = state.hard_state
        # A torn write can leave entries of a newer term than the persisted term: adopt the
        # term (never the vote, which belonged to the older term and was never sent).
        self._term = max(hs.term, self._log.last_term)
        self._vote = hs.vote if self._term == hs.term else ""
        self._applied = state.applied_index
        self._commit = min(max(hs.commit, self._applied), self._log.last_index)
        self._handed_out = self._applied
        self._last_hard = hs
        self._unstable_from = self._log.last_index + 1
        self._durable_index = self._log.last_index  # everything restored came from the disk
        self._durable_term = hs.term
        self._committed_config = state.committed_config
        self._pending_configs = []
        self._init_volatile()
        for entry in state.entries:
            if entry.type is EntryType.CHANGE_CONFIG:
                self._note_config_entry(entry.index, _decode_entry_config(entry))

    def _init_volatile(self) -> None:
        self._phase = Phase.FOLLOWER
        self._pre_election = False
        self._leader_id = ""
        self._leader_contact_ticks = self._timing.election_ticks
        self._failed_elections = 0
        self._votes = {}
        self._refused_pre_votes = {}
        self._election_elapsed = 0
        self._election_timeout = 0
        self._progress = {}
        self._leader_state = LeaderState.CONFIGURING
        self._noop_index = 0
        self._heartbeat_elapsed = 0
        self._quorum_elapsed = 0
        self._transfer_target = ""
        self._transfer_ticks = 0
        self._transfer_sent = False
        self._read_seq = 0
        self._read_round_due = False
        self._pending_reads = []
        self._msgs = []
        self._read_states = []
        self._dropped_reads = []
        self._copy_targets = []
        self._health_changed = False
        self._active_config_dirty = True
        self._committed_config_dirty = False
        self._last_soft: SoftState | None = None
        self._last_soft_key: tuple[object, ...] = ()
        self._outstanding = deque()
        self._reset_election_timer()

    # ------------------------------------------------------------------ queries

    @property
    def term(self) -> int:
        return self._term

    @property
    def vote(self) -> str:
        return self._vote

    @property
    def commit_index(self) -> int:
        return self._commit

    @property
    def applied_index(self) -> int:
        return self._applied

    @property
    def first_index(self) -> int:
        return self._log.first_index

    @property
    def last_index(self) -> int:
        return self._log.last_index

    @property
    def last_term(self) -> int:
        return self._log.last_term

    @property
    def durable_index(self) -> int:
        """The last index the driver has confirmed durable (``advance``) that still matches the log."""
        return self._durable_index

    @property
    def leader_id(self) -> str:
        return self._leader_id

    @property
    def is_leader(self) -> bool:
        return self._phase is Phase.LEADER

    @property
    def leader_state(self) -> LeaderState | None:
        return self._leader_state if self._phase is Phase.LEADER else None

    @property
    def transfer_target(self) -> str:
        """The voter leadership is being handed to, or empty."""
        return self._transfer_target

    @property
    def role(self) -> Role:
        if self._phase is Phase.LEADER:
            return Role.LEADER
        if self._phase is Phase.CANDIDATE:
            return Role.CANDIDATE
        member = self.active_config.member(self.peer_id)
        if member is None:
            return Role.NON_PARTICIPANT
        return Role.FOLLOWER if member.is_voter else Role.LEARNER

    @property
    def hard_state(self) -> HardState:
        """What the driver persists: term, vote and the commit index as far as it is durable here."""
        return HardState(self._term, self._vote, self._durable_commit())

    def _durable_commit(self) -> int:
        """The commit index capped at the durable log.  A driver may write the hard state before,
        or without, the entries of the same Ready (a torn write, or metadata and log written in
        parallel); a commit index that covered entries not yet on disk would then make a
        restarted replica apply the stale entries still there at those indexes."""
        return min(self._commit, self._durable_index)

    def term_at(self, index: int) -> int | None:
        """Term of the entry at ``index``; None if compacted or beyond the end."""
        return self._log.term_at(index)

    def entry(self, index: int) -> LogEntry:
        return self._log.entry(index)

    def take_health_changed(self) -> bool:
        """Whether a member's health crossed the failure line (either way) since the last call;
        the driver reports the tablet to the master at once rather than at its next heartbeat."""
        changed, self._health_changed = self._health_changed, False
        return changed

    def note_contact(self, peer_id: str) -> None:
        """The driver heard from ``peer_id``'s server outside Raft (it answered that it does not
        host the group yet, e.g. while a tablet copy to it runs): it is reachable, not failed."""
        progress = self._progress.get(peer_id)
        if progress is not None:
            self._health_changed |= progress.silent_ticks >= self._timing.failed_follower_ticks
            progress.silent_ticks = 0

    def peer_progress(self) -> tuple[PeerProgress, ...]:
        """The leader's view of every peer (empty unless leading)."""
        failed = self._timing.failed_follower_ticks
        return tuple(PeerProgress(p, pr, failed) for p, pr in self._progress.items())

    # ------------------------------------------------------------------ inputs

    def step(self, m: Message) -> None:
        """Handle one message from a peer.  A malformed message raises and changes nothing."""
        if m.group_id != self.group_id or m.recipient != self.peer_id:
            raise InvalidArgument(
                f"message for {m.recipient!r} of group {m.group_id!r} delivered to "
                f"{self.peer_id!r} of group {self.group_id!r}"
            )
        kind = type(m)
        if m.term > self._term:
            if kind is VoteRequest or (kind is VoteResponse and m.pre_vote and m.granted):  # type: ignore[union-attr]
                pass  # the vote handlers decide whether the higher term is adopted
            else:
                is_leader_msg = kind is AppendRequest or kind is Heartbeat or kind is TimeoutNow
                self._become_follower(m.term, m.sender if is_leader_msg else "")
        elif m.term < self._term:
            self._answer_stale(m)
            return
        self._handlers[kind](m)

    def tick(self, now_tick: int | None = None) -> None:
        """Advance time by one tick (``raft_tick_interval_ms``).

        ``now_tick`` is the number of this tick on a clock shared by every replica of the
        process (one counter, one increment per tick).  With it, a leader sends its periodic
        heartbeats on the ticks where ``now_tick % heartbeat_ticks == 0``, so all the leaders
        of a process beat together and the driver sends one coalesced call per peer server.
        Without it, each leader beats ``heartbeat_ticks`` after its previous heartbeat.  Either
        way no leader goes longer than ``heartbeat_ticks`` without a heartbeat.
        """
        if now_tick is not None and (type(now_tick) is not int or now_tick < 0):
            raise InvalidArgument(f"now_tick must be a non-negative int or None, got {now_tick!r}")
        if self._phase is Phase.LEADER:
            self._tick_leader(now_tick)
        else:
            self._tick_election()

    def campaign(self, ignore_live_leader: bool = False) -> None:
        """Start an election now (Kudu's RunLeaderElection); ignored by non-voters and leaders."""
        if self._phase is Phase.LEADER:
            raise IllegalState(f"{self.peer_id} already leads term {self._term}")
        if not self.active_config.is_voter(self.peer_id):
            raise IllegalState(f"{self.peer_id} is not a voter of the active config and cannot campaign")
        self._campaign(
            pre=self._options.raft_enable_pre_election and not ignore_live_leader, transfer=ignore_live_leader
        )

    def propose(self, payload: bytes) -> OpId:
        """Append a WRITE entry; returns its op id.  It is committed once it comes back in
        ``Ready.committed_entries`` with the same term; a different term at that index means
        it was lost with a leadership change.

        Raises NotTheLeader (with a hint), ServiceUnavailable while the leader is CONFIGURING
        or transferring leadership, InvalidArgument for a payload over the batch size.
        """
        if not isinstance(payload, bytes):
            raise InvalidArgument(f"a proposal payload must be bytes, not {type(payload).__name__}")
        if len(payload) > self._options.consensus_max_batch_size_bytes:
            raise InvalidArgument(
                f"proposal of {len(payload)} bytes exceeds consensus_max_batch_size_bytes "
                f"({self._options.consensus_max_batch_size_bytes})"
            )
        self._check_accepting_writes()
        return self._append_new(EntryType.WRITE, payload)

    def read_index(self, request_id: int) -> None:
        """Ask for a linearizable read point.

        The answer comes as ``ReadState(request_id, index)`` in a later Ready, once a majority
        has confirmed this replica still leads; serve the read when ``index`` is applied.  If
        leadership is lost first, ``request_id`` comes back in ``Ready.dropped_reads``.
        """
        if self._phase is not Phase.LEADER:
            raise self._not_leader()
        if self._leader_state is not LeaderState.RUNNING:
            raise ServiceUnavailable(
                f"leader {self.peer_id} of term {self._term} is CONFIGURING: it cannot serve reads "
                f"until its NO_OP at index {self._noop_index} commits"
            )
        if self.active_config.voters == (self.peer_id,):
            self._read_states.append(ReadState(request_id, self._commit))
            return
        if not self._read_round_due:
            self._read_seq += 1
            self._read_round_due = True
        self._pending_reads.append((self._read_seq, request_id, self._commit))

    def compact(self, index: int) -> None:
        """Forget entries up to ``index``, which the state machine has applied durably."""
        if index > self._applied:
            raise InvalidArgument(f"cannot compact to {index}: only {self._applied} is applied")
        self._log.compact(index)

    # ------------------------------------------------------------------ Ready / advance

    def has_ready(self) -> bool:
        """Whether ``ready()`` would return any work."""
        if self._phase is Phase.LEADER:
            self._flush()
        return bool(
            self._msgs
            or self._unstable_from <= self._log.last_index
            or self._commit > self._handed_out
            or self._term != self._last_hard.term
            or self._vote != self._last_hard.vote
            or self._durable_commit() != self._last_hard.commit
            or self._active_config_dirty
            or self._committed_config_dirty
            or self._read_states
            or self._dropped_reads
            or self._copy_targets
            or self._soft_key() != self._last_soft_key
        )

    def ready(self) -> Ready:
        """Take everything the driver must do now.

        The driver may take the next Ready before advancing this one (pipelining), as long as
        it persists Readies, and advances them, in the order they were taken.
        """
        if self._phase is Phase.LEADER:
            self._flush()
        hard = self.hard_state
        last = self._last_hard
        entries = self._log.entries_between(self._unstable_from, self._log.last_index)
        committed = self._log.entries_from(
            self._handed_out + 1, self._options.consensus_max_batch_size_bytes, upto=self._commit
        )
        soft_key = self._soft_key()
        soft = self._soft_state() if soft_key != self._last_soft_key else None
        messages, before_sync = self._order_messages()
        rd = Ready(
            hard_state=hard if hard != last else None,
            entries=entries,
            messages=messages,
            before_sync_count=before_sync,
            committed_entries=committed,
            committed_config=self._committed_config if self._committed_config_dirty else None,
            active_config=self.active_config if self._active_config_dirty else None,
            soft_state=soft if soft != self._last_soft else None,
            read_states=tuple(self._read_states),
            dropped_reads=tuple(self._dropped_reads),
            tablet_copy_targets=tuple(self._copy_targets),
            must_sync=bool(entries) or (hard.term, hard.vote) != (last.term, last.vote),
        )
        self._last_hard = hard
        self._last_soft_key = soft_key
        if soft is not None:
            self._last_soft = soft
        self._unstable_from = self._log.last_index + 1
        if committed:
            self._handed_out = committed[-1].index
        self._msgs = []
        self._read_states = []
        self._dropped_reads = []
        self._copy_targets = []
        self._active_config_dirty = False
        self._committed_config_dirty = False
        self._outstanding.append(rd)
        return rd

    def _order_messages(self) -> tuple[tuple[Message, ...], int]:
        """The queued messages, those that may leave before the sync first, and how many they are.

        Only a leader's AppendEntries and heartbeats may leave early, and only once the term
        they carry is durable here: a leader that forgot its term in a crash could lead the
        same term again and hand out a second, different entry at an index it already sent.
        """
        durable_term = self._durable_term
        early: list[Message] = []
        late: list[Message] = []
        for m in self._msgs:
            kind = type(m)
            if (kind is AppendRequest or kind is Heartbeat) and m.term <= durable_term:
                early.append(m)
            else:
                late.append(m)
        return (*early, *late), len(early)

    def advance(self, ready: Ready) -> None:
        """Report that ``ready`` is durable and its after-sync messages are sent (its committed
        entries are applied, or handed to the state machine in order).

        Readies are advanced in the order ``ready()`` returned them.  Only now do the entries of
        ``ready`` count toward commit on a leader.
        """
        if not self._outstanding:
            raise IllegalState("advance() called without an outstanding Ready")
        if ready is not self._outstanding[0]:
            raise IllegalState("advance() must confirm Readies in the order ready() returned them")
        self._outstanding.popleft()
        if ready.entries:
            last = ready.entries[-1]
            # The disk now ends at ``last``.  If the log has changed below it since (a new
            # leader truncated it), _truncate_after already lowered the durable index.
            if self._log.term_at(last.index) == last.term:
                self._durable_index = last.index
        if ready.hard_state is not None:
            self._durable_term = max(self._durable_term, ready.hard_state.term)
        if ready.committed_entries:
            self._applied = ready.committed_entries[-1].index
        if self._phase is Phase.LEADER and ready.entries:
            self._maybe_commit()

    def _soft_state(self) -> SoftState:
        return SoftState(self.role, self._leader_id, self._term, self.leader_state)

    def _soft_key(self) -> tuple[object, ...]:
        """Everything the soft state derives from, cheap to compare (configs by identity first)."""
        return (self._phase, self._leader_id, self._term, self._leader_state, self.active_config)

    # ------------------------------------------------------------------ role changes

    def _become_follower(self, term: int, leader_id: str) -> None:
        if term > self._term:
            self._term = term
            self._vote = ""
        if self._phase is Phase.LEADER:
            self._abandon_leadership()
        self._phase = Phase.FOLLOWER
        self._pre_election = False
        self._votes = {}
        self._leader_id = leader_id
        self._refused_pre_votes = {}
        if leader_id:
            self._leader_contact_ticks = 0
            self._failed_elections = 0
            self._snooze_for_leader()
        else:
            self._reset_election_timer()

    def _become_leader(self) -> None:
        self._phase = Phase.LEADER
        self._pre_election = False
        self._votes = {}
        self._leader_id = self.peer_id
        self._failed_elections = 0
        self._leader_state = LeaderState.CONFIGURING
        self._heartbeat_elapsed = 0
        self._quorum_elapsed = 0
        self._read_seq = 0
        self._read_round_due = False
        next_index = self._log.last_index + 1
        self._progress = {p: Progress(next_index) for p in self.active_config.peer_ids if p != self.peer_id}
        self._noop_index = self._append_new(EntryType.NO_OP, b"").index

    def _abandon_leadership(self) -> None:
        self._progress = {}
        self._dropped_reads.extend(request_id for _, request_id, _ in self._pending_reads)
        self._pending_reads = []
        self._read_round_due = False
        self._transfer_target = ""
        self._transfer_sent = False

    def _not_leader(self) -> NotTheLeader:
        return NotTheLeader(
            f"replica {self.peer_id} of {self.group_id} is not the leader (role {self.role.value}, term {self._term})",
            leader_hint=self._leader_id,
        )

    def _check_accepting_writes(self) -> None:
        if self._phase is not Phase.LEADER:
            raise self._not_leader()
        if self._leader_state is not LeaderState.RUNNING:
            raise ServiceUnavailable(
                f"leader {self.peer_id} of term {self._term} is CONFIGURING: its NO_OP at index "
                f"{self._noop_index} is not committed yet"
            )
        if self._transfer_target:
            raise ServiceUnavailable(
                f"leader {self.peer_id} is transferring leadership to {self._transfer_target}; "
                "writes are refused until the transfer ends"
            )

    # ------------------------------------------------------------------ elections

    def _reset_election_timer(self, snooze: bool = False) -> None:
        """Pick a new randomized timeout in [T, T * 1.5^(failed + 1)], capped (Kudu's backoff).

        Kudu uses this backoff when a replica starts an election or grants a vote; hearing
        from a leader instead restarts a plain ``T`` (``_snooze_for_leader``).
        """
        base = self._timing.election_ticks
        self._election_elapsed = 0
        if snooze:
            self._election_timeout = 2 * base
            return
        exponent = min(self._failed_elections + 1, 30)
        upper = min(base * 1.5**exponent, base + self._timing.max_backoff_delta_ticks)
        self._election_timeout = base + int(self._rng.random() * (upper - base + 1))

    def _snooze_for_leader(self) -> None:
        """Heard from the leader: presume it failed after exactly ``T`` more (Kudu snoozes its
        failure detector by ``MinimumElectionTimeout()``, with no jitter, on every heartbeat).

        The random spread belongs to the backoff after elections and votes.  Without it here
        the followers of a crashed leader time out about ``T`` after its last message, not at
        a random point up to ``1.5 T``.  They then time out together, and two rules keep them
        from splitting the vote: ``_grant_refused_pre_vote`` and
        ``_outranks_rival_pre_candidate``.
        """
        self._election_elapsed = 0
        self._election_timeout = self._timing.election_ticks

    def _tick_election(self) -> None:
        self._election_elapsed += 1
        self._leader_contact_ticks += 1
        if self._election_elapsed < self._election_timeout:
            return
        if not self.active_config.is_voter(self.peer_id):
            self._election_elapsed = 0  # learners and non-participants never campaign
            return
        if self._phase is Phase.CANDIDATE:
            self._failed_elections += 1
        elif self._grant_refused_pre_vote():
            return
        self._campaign(pre=self._options.raft_enable_pre_election, transfer=False)

    def _grant_refused_pre_vote(self) -> bool:
        """The leader just went silent here.  If this follower refused a pre-vote because it
        still heard the leader, and that candidate would win against it anyway (a newer log,
        or an equal one and a higher rank), grant it now and stand aside for a backoff instead
        of campaigning.

        The followers of a crashed leader time out about ``T`` after its last message, one
        tick phase apart.  The first asks while the others still count the leader as live
        and refuse; without this it waits out a whole backoff while the others campaign, and
        they may be unable to win (a shorter log).  Pre-votes change no state, so a late grant
        is the grant this follower would give if asked now.  With equal logs the rank, not
        the tick phase, picks the leader: every replica of a process ticks together, so the
        phase would hand all the tablets of a failed server to the same survivor.
        """
        refused, self._refused_pre_votes = self._refused_pre_votes, {}
        own = (self._log.last_term, self._log.last_index)
        mine = election_rank(self.group_id, self.peer_id)
        stronger = [
            m
            for m in refused.values()
            if m.term == self._term + 1
            and self.active_config.is_voter(m.sender)
            and self._log.is_up_to_date(m.last_index, m.last_term)
            and ((m.last_term, m.last_index) != own or election_rank(self.group_id, m.sender) > mine)
        ]
        if not stronger:
            return False
        best = max(stronger, key=lambda m: (m.last_term, m.last_index, election_rank(self.group_id, m.sender)))
        self._send(VoteResponse(self.group_id, self.peer_id, best.sender, best.term, True, True))
        self._reset_election_timer()
        return True

    def _has_live_leader(self) -> bool:
        """Seed 003's rule: heard from a leader within the election timeout (or is one)."""
        if self._phase is Phase.LEADER:
            return True
        return bool(self._leader_id) and self._leader_contact_ticks < self._timing.election_ticks

    def _campaign(self, pre: bool, transfer: bool) -> None:
        config = self.active_config
        if not config.is_voter(self.peer_id):
            return
        self._phase = Phase.CANDIDATE
        self._pre_election = pre
        self._leader_id = ""
        if not pre:
            self._term += 1
            self._vote = self.peer_id
        self._votes = {self.peer_id: True}
        self._reset_election_timer()
        if config.majority == 1:
            self._won_election()
            return
        last_index, last_term = self._log.last_index, self._log.last_term
        term = self._term + 1 if pre else self._term
        for voter in config.voters:
            if voter != self.peer_id:
                self._send(VoteRequest(self.group_id, self.peer_id, voter, term, last_index, last_term, pre, transfer))

    def _won_election(self) -> None:
        if self._pre_election:
            self._campaign(pre=False, transfer=False)
        else:
            self._become_leader()

    def _on_vote_request(self, m: VoteRequest) -> None:
        if self._has_live_leader() and not m.ignore_live_leader:
            if m.pre_vote and self._phase is Phase.FOLLOWER:
                self._refused_pre_votes[m.sender] = m
            self._send(VoteResponse(self.group_id, self.peer_id, m.sender, self._term, m.pre_vote, False))
            return
        if m.pre_vote:
            can_vote = m.term > self._term or self._vote == m.sender or (not self._vote and not self._leader_id)
            granted = (
                can_vote
                and self._log.is_up_to_date(m.last_index, m.last_term)
                and not self._outranks_rival_pre_candidate(m)
            )
            term = m.term if granted else self._term
            self._send(VoteResponse(self.group_id, self.peer_id, m.sender, term, True, granted))
            return
        if m.term > self._term:
            self._become_follower(m.term, "")
        can_vote = self._vote == m.sender or (not self._vote and not self._leader_id)
        granted = can_vote and self._log.is_up_to_date(m.last_index, m.last_term)
        if granted:
            self._vote = m.sender
            self._reset_election_timer()  # Kudu: a granted vote snoozes by the backoff delta
        self._send(VoteResponse(self.group_id, self.peer_id, m.sender, self._term, False, granted))

    def _outranks_rival_pre_candidate(self, m: VoteRequest) -> bool:
        """Two followers that time out together would grant each other's pre-votes, then each
        vote for itself in the real election and split it, and only the random backoff (1.5 to
        2.25 s) would part them.  So a replica in a pre-election that nobody has refused yet
        refuses a rival with an equal log and a lower rank; the rival grants it in turn.

        Pre-votes change no state, so this only decides who goes first.  The rank is a hash of
        the group and the peer, so different tablets prefer different servers.  A replica that
        has been refused (say, by a follower that still hears the leader) no longer counts as a
        contender and grants as usual, so two refusals never leave both waiting.
        """
        if self._phase is not Phase.CANDIDATE or not self._pre_election or m.term != self._term + 1:
            return False
        if any(not granted for granted in self._votes.values()):
            return False
        if (m.last_index, m.last_term) != (self._log.last_index, self._log.last_term):
            return False
        return election_rank(self.group_id, self.peer_id) > election_rank(self.group_id, m.sender)

    def _on_vote_response(self, m: VoteResponse) -> None:
        if self._phase is not Phase.CANDIDATE or m.pre_vote != self._pre_election:
            return
        expected_term = self._term + 1 if (m.pre_vote and m.granted) else self._term
        if m.term != expected_term:
            return
        config = self.active_config
        if not config.is_voter(m.sender):
            return  # only voters of the active config count (YugabyteDB lost writes here)
        self._votes[m.sender] = m.granted
        granted = sum(1 for p, v in self._votes.items() if v and config.is_voter(p))
        rejected = sum(1 for p, v in self._votes.items() if not v and config.is_voter(p))
        if granted >= config.majority:
            self._won_election()
        elif rejected > len(config.voters) - config.majority:
            self._failed_elections += 1
            self._become_follower(self._term, "")

    def _on_timeout_now(self, m: TimeoutNow) -> None:
        if self._phase is Phase.LEADER or not self.active_config.is_voter(self.peer_id):
            return
        self._campaign(pre=False, transfer=True)

    def _answer_stale(self, m: Message) -> None:
        """A message from an older term: tell its sender the current term so it steps down."""
        if isinstance(m, AppendRequest):
            self._send(
                AppendResponse(
                    self.group_id, self.peer_id, m.sender, self._term, False, m.prev_index, 0, 0, self._log.last_index
                )
            )
        elif isinstance(m, Heartbeat):
            self._send(HeartbeatResponse(self.group_id, self.peer_id, m.sender, self._term, 0, self._log.last_index))
        elif isinstance(m, VoteRequest):
            self._send(VoteResponse(self.group_id, self.peer_id, m.sender, self._term, m.pre_vote, False))

    def _send(self, m: Message) -> None:
        self._msgs.append(m)

    def _append_new(self, entry_type: EntryType, payload: bytes) -> OpId:
        index = self._log.last_index + 1
        self._log.append(LogEntry(self._term, index, entry_type, payload))
        if self._phase is Phase.LEADER:
            self._maybe_commit()
        return OpId(self._term, index)


def _decode_entry_config(entry: LogEntry) -> RaftConfig:
    config = decode_config(entry.payload)
    if config.opid_index != entry.index:
        raise Corruption(f"config entry {entry.index} carries a config for index {config.opid_index}")
    return config


def _check_persisted_log(base: OpId, entries: tuple[LogEntry, ...], applied: int) -> None:
    expected = base.index + 1
    for entry in entries:
        if entry.index != expected:
            raise Corruption(f"persisted log jumps from index {expected - 1} to {entry.index}")
        expected += 1
    if not base.index <= applied <= expected - 1:
        raise Corruption(
            f"applied index {applied} is outside the persisted log (base {base.index}, last {expected - 1})"
        )


def election_rank(group_id: str, peer_id: str) -> tuple[int, str]:
    """A replica's rank among rival pre-candidates of ``group_id``: stable across processes
    (CRC-32, not the salted ``hash``), and different per group so leadership spreads."""
    return (zlib.crc32(f"{group_id}/{peer_id}".encode()), peer_id)
