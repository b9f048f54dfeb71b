"""Log replication: AppendEntries on both sides, heartbeats, the commit rule and read-index.

Leader side: sends are lazy.  Proposals, acknowledgements and ticks only change state; the
AppendEntries requests are built in ``_flush()`` when the driver asks for a Ready, so many
proposals made between two Readies travel in one batch per follower (bounded by
``consensus_max_batch_size_bytes`` and ``raft_max_inflight_batches``).

Commit rule (Raft section 5.4.2): the leader advances the commit index to the highest index
stored by a majority of the *voters* of the active config, and only if that entry belongs to
the current term; earlier entries commit with it.  Non-voters' acknowledgements never count.
"Stored" means durable: a follower acknowledges only after its sync, and the leader counts its
own copy only up to ``_durable_index``, what the driver confirmed with ``advance()``, because
it sends its entries before its own sync (Raft thesis 10.2.1).

Commit notices: a follower learns the commit index from the next AppendEntries, which under
load carries the next entries.  One that would carry only a new commit index is sent at the
leader's next tick, not at once: a follower applies at most one tick late, and a busy leader
sends half the messages (each entry cost two appends with the entry, two with only the commit
index, and their four answers).  The notice is due per follower: one whose window is full at
the tick gets it once it has room, and a heartbeat carrying the whole commit index is one.

Heartbeats: every ``heartbeat_ticks``, on the driver's shared tick phase when ``tick()`` is
given ``now_tick`` (so that the heartbeats of every group of a process leave together),
otherwise counted from the previous heartbeat.

Follower side: an AppendEntries is accepted only if the log holds (``prev_index``,
``prev_term``); conflicting entries are truncated (never committed ones: that would be a
bug) and the follower's commit index follows the leader's, capped at the last entry the
request proved to match.
"""

from __future__ import annotations

from nyala.consensus.core._state import CoreState, Phase
from nyala.consensus.core.config import RaftConfig, decode_config
from nyala.consensus.core.messages import (
    AppendRequest,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    TimeoutNow,
)
from nyala.consensus.core.progress import Progress, ProgressState
from nyala.consensus.core.ready import ReadState
from nyala.consensus.core.types import EntryType, LeaderState, LogEntry
from nyala.errors import InvalidArgument


class ReplicationMixin(CoreState):
    # ------------------------------------------------------------------ follower side

    def _on_append_request(self, m: AppendRequest) -> None:
        configs = _validated_configs(m)  # before anything changes
        self._on_leader_contact(m.sender)
        if m.prev_index < self._commit:
            # Everything up to the commit index matches any leader; answer with it and let the
            # leader continue from there.
            self._reply_append(m.sender, True, self._commit)
            return
        if not self._log.matches(m.prev_index, m.prev_term):
            hint_index, hint_term = self._log.conflict_hint(m.prev_index, m.prev_term)
            self._reply_append(m.sender, False, m.prev_index, hint_index, hint_term)
            return
        self._append_from_leader(m.entries, configs)
        last_new = m.prev_index + len(m.entries)
        new_commit = min(m.commit_index, last_new)
        if new_commit > self._commit:
            self._advance_commit(new_commit)
        self._reply_append(m.sender, True, last_new)

    def _reply_append(self, to: str, success: bool, index: int, hint_index: int = 0, hint_term: int = 0) -> None:
        self._send(
            AppendResponse(
                self.group_id,
                self.peer_id,
                to,
                self._term,
                success,
                index,
                hint_index,
                hint_term,
                self._log.last_index,
            )
        )

    def _on_leader_contact(self, leader_id: str) -> None:
        if self._phase is Phase.LEADER:
            raise AssertionError(f"{self.peer_id} leads term {self._term} and heard from leader {leader_id}")
        if self._phase is not Phase.FOLLOWER or self._leader_id != leader_id:
            self._become_follower(self._term, leader_id)
        else:
            self._snooze_for_leader()
            self._leader_contact_ticks = 0
            self._failed_elections = 0
            self._refused_pre_votes.clear()

    def _append_from_leader(self, entries: tuple[LogEntry, ...], configs: dict[int, RaftConfig]) -> None:
        log = self._log
        for k, entry in enumerate(entries):
            existing = log.term_at(entry.index)
            if existing == entry.term:
                continue
            if existing is not None:
                if entry.index <= self._commit:
                    raise AssertionError(
                        f"{self.peer_id}: leader's entry {entry.index}@{entry.term} conflicts with "
                        f"committed entry {entry.index}@{existing}"
                    )
                self._truncate_after(entry.index - 1)
            for new in entries[k:]:
                log.append(new)
                config = configs.get(new.index)
                if config is not None:
                    self._note_config_entry(new.index, config)
            return

    def _truncate_after(self, index: int) -> None:
        self._log.truncate_after(index)
        if index + 1 < self._unstable_from:
            self._unstable_from = index + 1
        if index < self._durable_index:
            self._durable_index = index  # the disk still holds the replaced entries, not these
        self._rollback_configs(index)

    def _on_heartbeat(self, m: Heartbeat) -> None:
        self._on_leader_contact(m.sender)
        # The leader caps commit_index at what it knows this log holds; cap again locally
        # because this log may have been replaced by a tablet copy since.
        new_commit = min(m.commit_index, self._log.last_index)
        if new_commit > self._commit:
            self._advance_commit(new_commit)
        self._send(
            HeartbeatResponse(self.group_id, self.peer_id, m.sender, self._term, m.read_seq, self._log.last_index)
        )

    # ------------------------------------------------------------------ commit

    def _advance_commit(self, index: int) -> None:
        self._commit = index
        if self._pending_configs and self._pending_configs[0].opid_index <= index:
            self._commit_configs()
        if self._phase is Phase.LEADER and self._leader_state is LeaderState.CONFIGURING and index >= self._noop_index:
            self._leader_state = LeaderState.RUNNING

    def _maybe_commit(self) -> None:
        config = self.active_config
        matches = []
        for voter in config.voters:
            if voter == self.peer_id:
                # The leader's own copy counts only once the driver reported it durable: it
                # appends in parallel with replication (Raft thesis 10.2.1).
                matches.append(self._durable_index)
            else:
                progress = self._progress.get(voter)
                matches.append(progress.match if progress is not None else 0)
        matches.sort(reverse=True)
        candidate = matches[config.majority - 1]
        # Raft 5.4.2: count replicas only for an entry of the current term.
        if candidate > self._commit and self._log.term_at(candidate) == self._term:
            self._advance_commit(candidate)

    # ------------------------------------------------------------------ leader side

    def _on_append_response(self, m: AppendResponse) -> None:
        progress = self._progress.get(m.sender) if self._phase is Phase.LEADER else None
        if progress is None:
            return
        self._hear(progress)
        if not m.success:
            hint_index = m.hint_index
            if m.hint_term > 0:
                hint_index = self._log.conflict_hint(m.hint_index, m.hint_term)[0]
            progress.reject(m.index, hint_index)
            return
        moved = progress.acknowledge(m.index)
        if progress.state is not ProgressState.REPLICATE and (moved or m.index == progress.match):
            progress.become_replicate()
        if moved:
            self._maybe_commit()
            self._maybe_promote()
        if m.sender == self._transfer_target:
            self._on_transfer_progress(m.sender)

    def _on_heartbeat_response(self, m: HeartbeatResponse) -> None:
        progress = self._progress.get(m.sender) if self._phase is Phase.LEADER else None
        if progress is None:
            return
        self._hear(progress)
        progress.paused = False
        if m.read_seq > progress.read_seq:
            progress.read_seq = m.read_seq
            self._maybe_confirm_reads()
        if progress.state is ProgressState.NEEDS_COPY:
            if m.last_index >= self._log.first_index - 1:
                # Maybe a tablet copy brought the log within reach again: ask whether it holds
                # our compaction base; an acknowledgement resumes replication.
                self._send_base_probe(m.sender)
        elif progress.state is ProgressState.PROBE and m.last_index + 1 < progress.next:
            progress.next = max(progress.match + 1, m.last_index + 1)
        elif (
            progress.inflight
            and progress.stall_ticks >= self._timing.heartbeat_ticks
            and m.last_index + 1 < progress.next
        ):
            # No acknowledgement for a heartbeat period and the follower lacks what was sent:
            # the batches were lost.  Probe again rather than wait for the stall timeout.
            progress.become_probe()

    def _flush(self) -> None:
        """Build the AppendEntries (and read-index heartbeats) that are due."""
        if self._read_round_due:
            self._broadcast_heartbeats()
        for peer_id, progress in self._progress.items():
            self._send_appends(peer_id, progress)

    def _send_appends(self, peer_id: str, progress: Progress) -> None:
        log = self._log
        while progress.state is not ProgressState.NEEDS_COPY:
            if progress.next < log.first_index:
                progress.become_needs_copy()
                self._notify_copy(peer_id, progress)
                return
            if progress.state is ProgressState.PROBE:
                if progress.paused:
                    return
            elif len(progress.inflight) >= self._options.raft_max_inflight_batches:
                return
            elif progress.next > log.last_index and (progress.sent_commit >= self._commit or not progress.notice_due):
                # Caught up.  A commit index no entry carries waits for the next tick: under
                # load the next entry's append carries it, and an AppendEntries with only the
                # commit index (and its answer) was half of a busy leader's messages.  A peer
                # skipped above (a full window) keeps its notice due for when it has room.
                return
            prev = progress.next - 1
            prev_term = log.term_at(prev)
            assert prev_term is not None, f"no term for {prev} in {log.first_index}..{log.last_index}"
            entries = log.entries_from(progress.next, self._options.consensus_max_batch_size_bytes)
            self._send(
                AppendRequest(self.group_id, self.peer_id, peer_id, self._term, prev, prev_term, entries, self._commit)
            )
            progress.sent_commit = self._commit
            progress.notice_due = False
            progress.sent(entries[-1].index if entries else prev)

    def _notify_copy(self, peer_id: str, progress: Progress) -> None:
        self._copy_targets.append(peer_id)
        progress.copy_notice_ticks = 4 * self._timing.election_ticks

    def _send_base_probe(self, peer_id: str) -> None:
        base = self._log.base
        probe = AppendRequest(self.group_id, self.peer_id, peer_id, self._term, base.index, base.term, (), self._commit)
        self._send(probe)

    def _broadcast_heartbeats(self) -> None:
        self._heartbeat_elapsed = 0
        self._read_round_due = False
        for peer_id, progress in self._progress.items():
            commit = min(progress.match, self._commit)
            self._send(
                Heartbeat(self.group_id, self.peer_id, peer_id, self._term, commit, self._read_seq, self._commit)
            )
            if commit == self._commit:  # the heartbeat is the notice: no AppendEntries besides
                progress.sent_commit = max(progress.sent_commit, commit)

    def _send_timeout_now(self, peer_id: str) -> None:
        self._send(TimeoutNow(self.group_id, self.peer_id, peer_id, self._term))

    def _tick_leader(self, now_tick: int | None) -> None:
        self._heartbeat_elapsed += 1
        for progress in self._progress.values():
            progress.notice_due = True  # followers learn a commit index no append carried
        period = self._timing.heartbeat_ticks
        # On the shared phase when the driver gives one; the elapsed count is the fallback
        # that also bounds the gap should a driver ever skip a tick number.
        if self._heartbeat_elapsed >= period or (now_tick is not None and now_tick % period == 0):
            self._broadcast_heartbeats()
        self._quorum_elapsed += 1
        if self._quorum_elapsed >= self._timing.election_ticks:
            self._quorum_elapsed = 0
            if not self._quorum_active():
                # Check quorum: a leader cut off from a majority stops serving (and stops
                # refusing votes as a "live leader").
                self._become_follower(self._term, "")
                return
        self._tick_transfer()
        failed = self._timing.failed_follower_ticks
        for peer_id, progress in self._progress.items():
            progress.silent_ticks += 1
            self._health_changed |= progress.silent_ticks == failed
            self._tick_progress(peer_id, progress)
        self._maybe_promote()

    def _tick_progress(self, peer_id: str, progress: Progress) -> None:
        if progress.state is ProgressState.REPLICATE and progress.inflight:
            progress.stall_ticks += 1
            if progress.stall_ticks >= self._timing.election_ticks:
                progress.become_probe()  # acknowledgements were lost: find the match point again
        elif progress.state is ProgressState.NEEDS_COPY:
            progress.copy_ticks += 1
            self._health_changed |= progress.copy_ticks == self._timing.failed_follower_ticks
            progress.copy_notice_ticks -= 1
            if progress.copy_notice_ticks <= 0:
                self._notify_copy(peer_id, progress)
                self._send_base_probe(peer_id)

    def _hear(self, progress: Progress) -> None:
        """A peer answered; a FAILED one is no longer (its health changes at once)."""
        self._health_changed |= progress.silent_ticks >= self._timing.failed_follower_ticks
        progress.heard()

    def _quorum_active(self) -> bool:
        config = self.active_config
        active = 1 if config.is_voter(self.peer_id) else 0
        for peer_id, progress in self._progress.items():
            if progress.recent_active and config.is_voter(peer_id):
                active += 1
            progress.recent_active = False
        return active >= config.majority

    def _maybe_confirm_reads(self) -> None:
        if not self._pending_reads:
            return
        config = self.active_config
        seqs = [
            self._read_seq if voter == self.peer_id else self._progress[voter].read_seq
            for voter in config.voters
            if voter == self.peer_id or voter in self._progress
        ]
        if len(seqs) < config.majority:
            return
        seqs.sort(reverse=True)
        confirmed = seqs[config.majority - 1]
        while self._pending_reads and self._pending_reads[0][0] <= confirmed:
            _, request_id, index = self._pending_reads.pop(0)
            self._read_states.append(ReadState(request_id, index))


def _validated_configs(m: AppendRequest) -> dict[int, RaftConfig]:
    """Check the shape of a leader's batch before any of it is applied; decode its configs."""
    entries = m.entries
    if entries:
        if entries[0].index != m.prev_index + 1 or entries[-1].index != m.prev_index + len(entries):
            raise InvalidArgument(
                f"AppendEntries from {m.sender}: entries {entries[0].index}..{entries[-1].index} "
                f"do not follow prev_index {m.prev_index} contiguously"
            )
        if entries[-1].term > m.term or entries[0].term < m.prev_term:
            raise InvalidArgument(f"AppendEntries from {m.sender}: entry terms out of order for term {m.term}")
    configs: dict[int, RaftConfig] = {}
    for entry in entries:
        if entry.type is EntryType.CHANGE_CONFIG:
            config = decode_config(entry.payload)
            if config.opid_index != entry.index:
                raise InvalidArgument(
                    f"AppendEntries from {m.sender}: config entry {entry.index} names index {config.opid_index}"
                )
            configs[entry.index] = config
    return configs
