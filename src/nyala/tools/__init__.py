"""Nyala's command-line tools (``nyala ...``), a tree of click groups by subject.

Each subject lives in its own ``cmd_<subject>.py`` module and registers a click group on
the root command in :mod:`nyala.tools.cli`.  Tools talk to servers only through RPC and to
local files only through the adapters (``nyala.wal``, ``nyala.storage``).
"""
