"""The test kit: a deterministic simulator for the Raft core, ``MiniCluster`` of real
processes, and history checkers.  Imported by tests, benchmarks and the local cluster,
never by server code.
"""
