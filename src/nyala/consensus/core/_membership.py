"""Membership: config entries, one-by-one changes, promotion, leadership transfer, unsafe change.

A CHANGE_CONFIG entry takes effect on every replica as soon as it is appended (seed 003,
following Ongaro's dissertation section 4.1), so the configs appended after the committed one
are kept in ``_pending_configs`` and the last of them is the active config.  When a leader of
a later term overwrites such an entry, the follower drops it and falls back to the previous
one (``_rollback_configs``).  When the commit index passes an entry, it becomes the committed
config, which the driver writes to the consensus metadata.

A new change is accepted only by a RUNNING leader with no pending config, only if its
compare-and-set op index matches the committed config, and only if it adds, removes,
promotes or demotes at most one voter: the old and new majorities then always intersect.

A leader never removes or demotes itself: it hands leadership to the most caught-up voter
first and refuses the change (the caller retries on the new leader).  Transfer sends
TimeoutNow to the target once its log matches the leader's last entry; meanwhile writes are
refused, for at most one election timeout.
"""

from __future__ import annotations

from collections.abc import Sequence

from nyala.consensus.core._state import CoreState, Phase
from nyala.consensus.core.config import (
    ChangeKind,
    ConfigChange,
    MemberType,
    RaftConfig,
    apply_changes,
    encode_config,
)
from nyala.consensus.core.progress import Progress, ProgressState
from nyala.consensus.core.types import EntryType, LeaderState, LogEntry, OpId
from nyala.errors import Aborted, IllegalState, InvalidArgument, NotFound, NotTheLeader


class MembershipMixin(CoreState):
    # ------------------------------------------------------------------ client calls

    def change_config(self, changes: Sequence[ConfigChange], cas_config_opid_index: int | None = None) -> OpId:
        """Replicate a config change; returns the op id of its CHANGE_CONFIG entry.

        Raises NotTheLeader, ServiceUnavailable (CONFIGURING or transferring), IllegalState
        (a change is still pending), Aborted (CAS_FAILED), InvalidArgument / NotFound /
        AlreadyPresent (a bad change).  Removing or demoting the leader itself starts a
        leadership transfer and raises NotTheLeader naming the transfer target.
        """
        self._check_accepting_writes()
        if self._pending_configs:
            raise IllegalState(
                f"the config change at index {self.active_config.opid_index} is not committed yet; "
                "only one change may be pending"
            )
        committed = self._committed_config
        if cas_config_opid_index is not None and cas_config_opid_index != committed.opid_index:
            raise Aborted(
                f"CAS_FAILED: the committed config has op index {committed.opid_index}, not {cas_config_opid_index}"
            )
        new = apply_changes(committed, changes)
        if not new.is_voter(self.peer_id):
            target = self._start_transfer("")
            raise NotTheLeader(
                f"leader {self.peer_id} cannot remove or demote itself; it is transferring leadership "
                f"to {target}: retry the change there",
                leader_hint=target,
            )
        return self._append_config(new)

    def transfer_leadership(self, target: str = "") -> str:
        """Graceful step-down: hand leadership to ``target`` or, if empty, the most caught-up
        voter.  Returns the target.  Writes are refused until the transfer ends or one
        election timeout passes."""
        if self._phase is not Phase.LEADER:
            raise NotTheLeader(f"{self.peer_id} is not the leader", leader_hint=self._leader_id)
        if self._transfer_target:
            raise IllegalState(f"a leadership transfer to {self._transfer_target} is already in progress")
        return self._start_transfer(target)

    def step_down(self) -> None:
        """Abrupt step-down: raise the term, stop leading, and stay out of the next election
        for two election timeouts so that another voter wins it."""
        if self._phase is not Phase.LEADER:
            raise NotTheLeader(f"{self.peer_id} is not the leader", leader_hint=self._leader_id)
        self._become_follower(self._term + 1, "")
        self._reset_election_timer(snooze=True)

    def unsafe_change_config(self, peer_ids: Sequence[str]) -> OpId:
        """Force this replica's config to the given surviving members (seed 003's recovery after
        losing a majority).  It can lose committed data and is for operators only.

        The members keep their types; this replica must be one of the voters.  The new config
        is appended at a new term, so this log wins elections against every survivor, and an
        election starts at once.
        """
        base = self.active_config
        new = _surviving_config(base, peer_ids, self.peer_id)
        term = self._term + 1
        self._become_follower(term, "")
        self._vote = self.peer_id  # nobody else may win this term's vote from us
        index = self._log.last_index + 1
        config = RaftConfig(new.members, index, unsafe_config_change=True)
        self._log.append(LogEntry(term, index, EntryType.CHANGE_CONFIG, encode_config(config)))
        self._pending_configs.append(config)
        self._on_active_config_changed()
        self._campaign(pre=self._options.raft_enable_pre_election, transfer=False)
        return OpId(term, index)

    # ------------------------------------------------------------------ config bookkeeping

    def _append_config(self, new: RaftConfig) -> OpId:
        index = self._log.last_index + 1
        config = new.with_opid_index(index)
        self._log.append(LogEntry(self._term, index, EntryType.CHANGE_CONFIG, encode_config(config)))
        self._pending_configs.append(config)
        self._on_active_config_changed()
        return OpId(self._term, index)

    def _note_config_entry(self, index: int, config: RaftConfig) -> None:
        if index <= self._committed_config.opid_index:
            return
        if index <= self._commit:
            self._committed_config = config
            self._committed_config_dirty = True
        else:
            self._pending_configs.append(config)
        self._on_active_config_changed()

    def _commit_configs(self) -> None:
        while self._pending_configs and self._pending_configs[0].opid_index <= self._commit:
            self._committed_config = self._pending_configs.pop(0)
            self._committed_config_dirty = True

    def _rollback_configs(self, after_index: int) -> None:
        rolled_back = False
        while self._pending_configs and self._pending_configs[-1].opid_index > after_index:
            self._pending_configs.pop()
            rolled_back = True
        if rolled_back:
            self._on_active_config_changed()

    def _on_active_config_changed(self) -> None:
        self._active_config_dirty = True
        config = self.active_config
        if self._phase is Phase.LEADER:
            next_index = self._log.last_index + 1
            for peer_id in config.peer_ids:
                if peer_id != self.peer_id and peer_id not in self._progress:
                    self._progress[peer_id] = Progress(next_index)
            for peer_id in [p for p in self._progress if not config.contains(p)]:
                del self._progress[peer_id]
            if self._transfer_target and not config.is_voter(self._transfer_target):
                self._transfer_target = ""
            self._maybe_commit()
        elif self._phase is Phase.CANDIDATE and not config.is_voter(self.peer_id):
            self._become_follower(self._term, "")

    # ------------------------------------------------------------------ promotion

    def _maybe_promote(self) -> None:
        """Promote one caught-up NON_VOTER marked ``promote`` (Kudu: within one batch of the
        commit index, and never before it acknowledged anything)."""
        if (
            self._phase is not Phase.LEADER
            or self._leader_state is not LeaderState.RUNNING
            or self._transfer_target
            or self._pending_configs
        ):
            return
        config = self._committed_config
        for member in config.members:
            if member.is_voter or not member.promote:
                continue
            progress = self._progress.get(member.peer_id)
            if progress is None or progress.match == 0 or progress.state is not ProgressState.REPLICATE:
                continue
            if self._log.bytes_between(progress.match, self._commit) > self._options.consensus_max_batch_size_bytes:
                continue
            change = ConfigChange(ChangeKind.MODIFY_PEER, member.peer_id, MemberType.VOTER, promote=False)
            self._append_config(apply_changes(config, [change]))
            return

    # ------------------------------------------------------------------ leadership transfer

    def _start_transfer(self, target: str) -> str:
        config = self.active_config
        if target:
            if target == self.peer_id:
                raise InvalidArgument(f"{target} already leads; name another voter")
            if not config.is_voter(target):
                raise InvalidArgument(f"{target} is not a voter of the active config")
        else:
            others = [p for p in config.voters if p != self.peer_id]
            if not others:
                raise IllegalState(f"{self.peer_id} is the only voter: there is nobody to transfer leadership to")
            target = max(others, key=self._match_of)
        self._transfer_target = target
        self._transfer_ticks = self._timing.election_ticks
        self._transfer_sent = False
        self._on_transfer_progress(target)
        return target

    def _match_of(self, peer_id: str) -> int:
        progress = self._progress.get(peer_id)
        return progress.match if progress is not None else 0

    def _on_transfer_progress(self, peer_id: str) -> None:
        if peer_id != self._transfer_target or self._transfer_sent:
            return
        if self._match_of(peer_id) == self._log.last_index:
            self._send_timeout_now(peer_id)
            self._transfer_sent = True

    def _tick_transfer(self) -> None:
        if self._transfer_target:
            self._transfer_ticks -= 1
            if self._transfer_ticks <= 0:
                self._transfer_target = ""  # the window closed: lead on and accept writes again
                self._transfer_sent = False


def _surviving_config(base: RaftConfig, peer_ids: Sequence[str], self_id: str) -> RaftConfig:
    if not peer_ids:
        raise InvalidArgument("an unsafe config change needs at least one surviving member")
    if len(set(peer_ids)) != len(peer_ids):
        raise InvalidArgument(f"an unsafe config change names a peer twice: {list(peer_ids)}")
    for peer_id in peer_ids:
        if not base.contains(peer_id):
            raise NotFound(f"{peer_id} is not a member of the current config; the new config must be a subset")
    if self_id not in peer_ids or not base.is_voter(self_id):
        raise InvalidArgument(f"the replica forcing the config ({self_id}) must be a voter in it")
    keep = set(peer_ids)
    return RaftConfig(tuple(m for m in base.members if m.peer_id in keep), base.opid_index, True)
