"""Settings declarations, in the manner of Kudu's flags.

Each component declares its settings as a frozen dataclass (``WalOptions``, ``RpcOptions``,
...) whose fields are made with :func:`setting`.  A setting name is prefixed by what it
affects and suffixed by its unit (``segment_size_bytes``, ``heartbeat_interval_ms``), carries
a full-sentence help text, and one or more tags:

- ``stable``: safe to change, supported;
- ``advanced``: changing it needs understanding of the internals;
- ``experimental``: may change or disappear;
- ``unsafe``: can lose data or availability (for benchmarks and emergencies only);
- ``runtime``: may be changed while the process runs.

:func:`describe` lists the settings of an options class, which the CLI uses for ``--help``
texts and ``nyala ... flags`` listings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

__all__ = ["TAGS", "SettingInfo", "describe", "setting"]

TAGS = frozenset({"stable", "advanced", "experimental", "unsafe", "runtime"})


@dataclasses.dataclass(frozen=True, slots=True)
class SettingInfo:
    """One declared setting, as listed by :func:`describe`."""

    name: str
    default: Any
    help: str
    tags: frozenset[str]


def setting(default: Any, help: str, *tags: str) -> Any:
    """Declare a dataclass field as a documented setting with ``default``."""
    unknown = set(tags) - TAGS
    if unknown:
        raise ValueError(f"unknown setting tags {sorted(unknown)}; known: {sorted(TAGS)}")
    if not help.endswith("."):
        raise ValueError(f"setting help must be a full sentence ending with '.': {help!r}")
    return dataclasses.field(default=default, metadata={"help": help, "tags": frozenset(tags or ("stable",))})


def describe(options_class: type) -> Iterator[SettingInfo]:
    """Yield the settings declared on a dataclass of options, in declaration order."""
    for f in dataclasses.fields(options_class):
        yield SettingInfo(
            name=f.name,
            default=f.default,
            help=f.metadata.get("help", ""),
            tags=f.metadata.get("tags", frozenset({"stable"})),
        )
