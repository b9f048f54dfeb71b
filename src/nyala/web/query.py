"""Query parameters, validated: each page names what it takes, anything else is a 400."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from nyala.errors import InvalidArgument

__all__ = ["MAX_LIMIT", "BadRequest", "Query"]

#: Rows a paged table returns at most per request; the default is 100.
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
MAX_VALUE_CHARS = 256


class BadRequest(InvalidArgument):
    """A query parameter is unknown, repeated or malformed: HTTP 400 with this message."""


class Query:
    """The query parameters of one request, checked against the names a page accepts."""

    def __init__(self, items: Sequence[tuple[str, str]], accepted: Collection[str]) -> None:
        values: dict[str, str] = {}
        for name, value in items:
            if name not in accepted:
                takes = ", ".join(sorted(accepted)) or "none"
                raise BadRequest(f"unknown query parameter {name!r}; this page takes: {takes}")
            if name in values:
                raise BadRequest(f"query parameter {name!r} is given more than once")
            if len(value) > MAX_VALUE_CHARS:
                raise BadRequest(f"query parameter {name!r} is longer than {MAX_VALUE_CHARS} characters")
            values[name] = value
        self._values = values

    @classmethod
    def of(cls, mapping: Mapping[str, str], accepted: Collection[str]) -> Query:
        return cls(list(mapping.items()), accepted)

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def items(self) -> list[tuple[str, str]]:
        return list(self._values.items())

    def string(self, name: str, default: str = "") -> str:
        return self._values.get(name, default)

    def integer(self, name: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
        text = self._values.get(name)
        if text is None:
            return default
        try:
            value = int(text, 10)
        except ValueError:
            raise BadRequest(f"query parameter {name!r} must be an integer, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            raise BadRequest(f"query parameter {name!r} must be {bound}, got {value}")
        return value

    def choice(self, name: str, choices: Sequence[str], default: str) -> str:
        value = self._values.get(name, default)
        if value not in choices:
            raise BadRequest(f"query parameter {name!r} must be one of {', '.join(choices)}; got {value!r}")
        return value

    def page(self) -> tuple[int, int]:
        """``offset`` and ``limit`` of a paged table."""
        return self.integer("offset", 0), self.integer("limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
