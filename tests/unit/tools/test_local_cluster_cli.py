"""``nyala local-cluster start --locations``: bad input is refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nyala.tools.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--locations", "dc1:2"], "must begin with '/'"),
        (["--locations", "/dc1/rack1"], "LOCATION:COUNT"),
        (["--locations", "/dc1:2,/dc1:1"], "given twice"),
        (["--locations", "/dc1:2", "--client-location", "nowhere"], "must begin with '/'"),
        (["--client-location", "/dc1"], "needs tablet-server locations"),
    ],
)
def test_bad_locations_are_refused_and_nothing_starts(tmp_path: Path, args: list[str], message: str) -> None:
    root = tmp_path / "c"
    result = CliRunner().invoke(main, ["local-cluster", "start", "--dir", str(root), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert not root.exists()
