"""Consensus: Raft replication of every tablet (the master's catalog is a tablet too).

Two halves with one contract between them:

- ``nyala.consensus.core`` (layer 0) is the Raft algorithm as a pure state machine: messages
  and ticks in, a ``Ready`` of things to persist, send and apply out.  Its docstring holds the
  driver contract.
- ``nyala.consensus.runtime`` (layer 2) drives the core in a server: it persists Readies into
  the WAL and the consensus metadata, sends messages over ``nyala.rpc`` (coalescing the
  heartbeats of all tablets between two servers), applies committed entries to the tablet,
  and runs tablet copies.  The deterministic simulator in ``nyala.testing.sim`` is the other
  driver of the same core.

This package module imports nothing, so importing the pure core never pulls the runtime in.
"""
