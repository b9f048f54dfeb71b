"""Settings declarations refuse undocumented or mistagged settings."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from nyala.common.config import describe, setting


def test_describe_lists_settings_with_help_and_tags() -> None:
    @dataclass(frozen=True)
    class Options:
        size_bytes: int = setting(10, "How big it is.", "advanced", "runtime")
        name: str = setting("x", "What it is called.")

    listed = list(describe(Options))
    assert [(s.name, s.default) for s in listed] == [("size_bytes", 10), ("name", "x")]
    assert listed[0].tags == {"advanced", "runtime"}
    assert listed[1].tags == {"stable"}
    assert listed[0].help == "How big it is."


def test_unknown_tag_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown setting tags"):
        setting(1, "Something.", "dangerous")


def test_help_must_be_a_sentence() -> None:
    with pytest.raises(ValueError, match="full sentence"):
        setting(1, "no period")
