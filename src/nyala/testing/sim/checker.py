"""Safety invariants, checked as the simulation runs (each check is O(1) per event).

- Election safety: at most one leader per term.
- Log matching: two durable logs that hold an entry with the same index and term hold the
  same entries up to it (a global map from (index, term) to the chain hash; see disk.py).
- Leader completeness: a new leader's log holds every entry committed in an earlier term.
- State machine safety: no two replicas apply different entries at one index.
- No acknowledged (or otherwise committed) entry is ever lost: a durable log never drops an
  entry that some replica has applied.  (A stale leader may append a different entry at an
  index it never held; that entry can never commit, and the check above still holds.)

A broken invariant raises :class:`SafetyViolation` at the step that broke it.
"""

from __future__ import annotations

from nyala.consensus.core import LogEntry, RaftCore

__all__ = ["SafetyChecker", "SafetyViolation"]


class SafetyViolation(AssertionError):
    """A Raft safety property does not hold."""


class SafetyChecker:
    def __init__(self) -> None:
        self.leaders: dict[int, str] = {}
        self.applied: dict[int, LogEntry] = {}
        self.max_applied = 0
        self.chains: dict[tuple[int, int], int] = {}
        self.commits: dict[
            int, tuple[int, int]
        ] = {}  # term -> (highest index its leader committed, term of that entry)
        self.enabled = True

    def on_leader(self, peer_id: str, core: RaftCore) -> None:
        term = core.term
        other = self.leaders.setdefault(term, peer_id)
        if other != peer_id:
            raise SafetyViolation(f"election safety: {other} and {peer_id} both lead term {term}")
        # Leader completeness covers entries committed in earlier terms only: a late leader of
        # an old term may legitimately lack what a newer term committed.
        index, entry_term = max((c for t, c in self.commits.items() if t < term), default=(0, 0))
        if index == 0 or index <= core.first_index - 1:
            return
        if core.last_index < index or core.term_at(index) != entry_term:
            raise SafetyViolation(
                f"leader completeness: {peer_id}, new leader of term {term}, lacks entry "
                f"{index}@{entry_term} committed in an earlier term (its log ends at {core.last_index}, "
                f"term there {core.term_at(index)})"
            )

    def on_leader_commit(self, core: RaftCore) -> None:
        """A leader advanced its commit index: remember the highest index committed per term."""
        index = core.commit_index
        entry_term = core.term_at(index)
        assert entry_term is not None
        known = self.commits.get(core.term)
        if known is None or known[0] < index:
            self.commits[core.term] = (index, entry_term)

    def on_append(self, peer_id: str, entry: LogEntry, chain: int) -> None:
        key = (entry.index, entry.term)
        known = self.chains.setdefault(key, chain)
        if known != chain:
            raise SafetyViolation(
                f"log matching: {peer_id} holds entry {entry.index}@{entry.term} with a different "
                "history from another replica's entry with the same index and term"
            )

    def on_truncate(self, peer_id: str, dropped: list[LogEntry]) -> None:
        for entry in dropped:
            committed = self.applied.get(entry.index)
            if committed is not None and committed == entry:
                raise SafetyViolation(
                    f"committed entry lost: {peer_id} truncated entry {entry.index}@{entry.term}, "
                    "which a replica has applied"
                )

    def on_apply(self, peer_id: str, entry: LogEntry) -> None:
        known = self.applied.setdefault(entry.index, entry)
        if known != entry:
            raise SafetyViolation(
                f"state machine safety: {peer_id} applied {entry.index}@{entry.term} {entry.payload!r} "
                f"where another replica applied {known.index}@{known.term} {known.payload!r}"
            )
        if entry.index > self.max_applied:
            self.max_applied = entry.index
