"""Location labels: syntax and the hierarchy their ``/``-separated components imply.

A location is written like an absolute Unix path, ``/dc1/rack2``: it begins with ``/`` and
each component is one or more of ``[a-zA-Z0-9_.-]``.  Unlike Kudu, which only checks the
characters (so ``/a//b`` and ``/a/`` pass), Nyala also refuses empty components, so that two
spellings can never name the same place.
"""

from __future__ import annotations

import re

from nyala.errors import InvalidArgument

__all__ = ["common_prefix_depth", "location_components", "validate_location"]

_COMPONENT = re.compile(r"[A-Za-z0-9_.-]+")
MAX_LOCATION_LENGTH = 1024


def validate_location(text: str) -> str:
    """Return ``text`` when it is a well-formed location; raise :class:`InvalidArgument` otherwise."""
    if not isinstance(text, str):
        raise InvalidArgument(f"a location must be a string, not {type(text).__name__}")
    if len(text) > MAX_LOCATION_LENGTH:
        raise InvalidArgument(f"location is {len(text)} characters long; at most {MAX_LOCATION_LENGTH} allowed")
    if not text.startswith("/"):
        raise InvalidArgument(f"location {text!r} must begin with '/', like /dc1/rack1")
    if text == "/":
        raise InvalidArgument("location '/' names no place; give at least one component, like /dc1")
    for position, component in enumerate(text[1:].split("/"), start=1):
        if not component:
            raise InvalidArgument(f"location {text!r} has an empty component at position {position}")
        if not _COMPONENT.fullmatch(component):
            bad = sorted({ch for ch in component if not _COMPONENT.fullmatch(ch)})
            raise InvalidArgument(
                f"location {text!r}: component {component!r} contains {''.join(bad)!r}; "
                "only letters, digits, '_', '.' and '-' are allowed"
            )
    return text


def location_components(location: str) -> tuple[str, ...]:
    """The components of a valid location, outermost first: ``/dc1/rack2`` -> ``("dc1", "rack2")``."""
    return tuple(validate_location(location)[1:].split("/"))


def common_prefix_depth(first: str, second: str) -> int:
    """How many leading components two valid locations share (the client's "closest" measure)."""
    depth = 0
    for a, b in zip(location_components(first), location_components(second), strict=False):
        if a != b:
            break
        depth += 1
    return depth
