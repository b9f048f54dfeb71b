"""Nyala's command-line tools (``nyala ...``), a tree of click groups by subject.

Each subject lives in its own ``cmd_<subject>.py`` module and registers a click group on
the root command in :mod:`nyala.tools.cli`.  What a command computes beyond gathering and
printing lives in a module of its own beside it, pure where it can be: :mod:`.ksck` gathers
with the client, then judges the cluster without I/O.  Tools talk to servers only through
RPC and to local files only through the adapters (``nyala.wal``, ``nyala.storage``).
"""
