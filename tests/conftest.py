"""How the tiers share out over pytest-xdist's workers (``make test`` runs two).

Each test file is one group (``--dist loadgroup``): its tests run in file order on one worker,
so a module-scoped cluster starts once, and tests that rely on their file's order (a server
put back for the next test) keep it.  The whole Spark tier is one group, so one worker holds
its one SparkSession and JVM.  Without xdist (``pytest`` alone, ``TEST_WORKERS=0``) nothing
changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return  # the marker is xdist's own: unknown (and refused by --strict-markers) without it
    for item in items:
        try:
            relative = item.path.relative_to(TESTS)
        except ValueError:
            continue  # a test from outside tests/ (a subprocess's own session): left alone
        group = "spark" if relative.parts[0] == "spark" else relative.as_posix()
        item.add_marker(pytest.mark.xdist_group(group))
