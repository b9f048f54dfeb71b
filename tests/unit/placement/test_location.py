from __future__ import annotations

import pytest

from nyala.errors import InvalidArgument
from nyala.placement import common_prefix_depth, location_components, validate_location


@pytest.mark.parametrize("good", ["/dc1", "/dc1/rack-2", "/a.b/c_d/E-9", "/0", "/..", "/" + "x" * 1000])
def test_valid_locations_pass_unchanged(good: str) -> None:
    assert validate_location(good) == good


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("", "must begin with '/'"),
        ("dc1/rack1", "must begin with '/'"),
        ("/", "names no place"),
        ("/dc1/", "empty component at position 2"),
        ("/dc1//rack1", "empty component at position 2"),
        ("/dc 1", "contains ' '"),
        ("/dc1/rack:1", "contains ':'"),
        ("/dçc", "contains 'ç'"),
        ("/" + "x" * 1024, "at most 1024"),
    ],
)
def test_invalid_locations_are_refused_with_the_reason(bad: str, fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=fragment.replace("(", r"\(")):
        validate_location(bad)


def test_non_strings_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="must be a string"):
        validate_location(b"/dc1")  # type: ignore[arg-type]


def test_components_and_common_prefix() -> None:
    assert location_components("/dc1/rack2") == ("dc1", "rack2")
    assert common_prefix_depth("/dc1/rack1", "/dc1/rack2") == 1
    assert common_prefix_depth("/dc1/rack1", "/dc1/rack1") == 2
    assert common_prefix_depth("/dc1", "/dc2/rack1") == 0
    assert common_prefix_depth("/dc1", "/dc1/rack1") == 1
