"""The web pages as a person sees them: headless Chromium opens them on a real cluster.

The browser is the system's Chromium driven through its chromedriver (Debian's ``chromium``
and ``chromium-driver``; ``.ci/run`` installs them).  Without them the tests fail saying how
to install them: they never skip.  Each page is saved as a screenshot under the test's
temporary directory, and checked for what an operator looks for on it.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from nyala.client import Partitioning, schema
from nyala.client.sync import Client
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from tests.integration.test_web import wait_tservers_live

pytestmark = pytest.mark.timeout(300)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
LOCATIONS = {"/dc1/rack-a": 1, "/dc1/rack-b": 1, "/dc1/rack-c": 1}
TABLES = ("orders", "customers")
#: What the web server's error answers say (they are plain text, so they have no title either).
ERROR_WORDS = ("internal error", "Traceback", "no page ", "NotTheLeader", "ServiceUnavailable", "Error:")


def _require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:
        pytest.fail(
            f"the browser tests need {', '.join(missing)}: install Debian's packages with "
            f"`sudo apt-get install chromium chromium-driver` (.ci/run does so before make test)",
            pytrace=False,
        )


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    _require_browser()
    from selenium import webdriver as selenium_webdriver
    from selenium.webdriver.chrome.service import Service

    options = selenium_webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1400,1000",
    ):  # fmt: skip
        options.add_argument(flag)
    service = Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log"))
    driver = selenium_webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MiniCluster]:
    with MiniCluster(tmp_path / "cluster", MiniClusterOptions(), locations=LOCATIONS) as mc:
        wait_tservers_live(mc)
        client = Client(mc.master_addresses_flag)
        try:
            kv = schema([("id", "int64"), ("v", "string")], primary_key=["id"])
            for name in TABLES:
                client.create_table(name, kv, Partitioning().add_hash_partitions("id", 2), num_replicas=3)
            client.open_table(TABLES[0]).insert([{"id": i, "v": "x"} for i in range(100)])
        finally:
            client.close()
        yield mc


def visit(driver: object, url: str, shot: Path) -> str:
    """Open ``url``, save its screenshot, and return the page's visible text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(driver, WebDriver)
    driver.get(url)
    text = str(driver.find_element(By.TAG_NAME, "body").text)
    assert driver.save_screenshot(str(shot)), f"no screenshot of {url}"
    assert shot.stat().st_size > 1000
    for word in ERROR_WORDS:
        assert word not in text, f"{url} shows {word!r}:\n{text[:2000]}"
    assert "Nyala" in driver.title, f"{url} is not a page of the web server: {text[:500]}"
    return text


def test_the_master_and_tablet_server_pages_show_tables_replicas_and_servers(
    browser: object, cluster: MiniCluster, tmp_path: Path
) -> None:
    master, tserver = cluster.masters[0], cluster.tservers[0]
    shots = tmp_path / "screenshots"
    shots.mkdir()
    # Every tablet has reported a leader before the pages are looked at.
    wait_for(lambda: "no leader" not in visit(browser, master.url + "/tables/" + TABLES[0], shots / "wait.png"),
             what="every tablet of the table to have a leader")  # fmt: skip

    home = visit(browser, master.url + "/", shots / "master-home.png")
    assert "ready" in home
    assert "LEADER" in home
    for page in ("Tables", "Tablet servers", "Masters", "Locations", "Tasks"):
        assert page in home

    tables = visit(browser, master.url + "/tables", shots / "master-tables.png")
    for name in TABLES:
        assert name in tables
    assert "RUNNING" in tables
    assert "hash(id) into 2" in tables

    tablets = visit(browser, master.url + "/tables/" + TABLES[0], shots / "master-table-tablets.png")
    assert f"Table {TABLES[0]}" in tablets
    for location in LOCATIONS:
        assert location in tablets  # each replica's location
    for server in cluster.tservers:
        assert str(server.address) in tablets  # each replica's server
    assert "LEADER" in tablets
    assert "FOLLOWER" in tablets

    servers = visit(browser, master.url + "/tservers", shots / "master-tservers.png")
    for server in cluster.tservers:
        assert str(server.address) in servers
    for location in LOCATIONS:
        assert location in servers
    assert servers.count("live") >= len(cluster.tservers)
    # A word of its own: a uuid's hex may spell "dead" (it did, in "...5042deada0...").
    assert re.search(r"\bdead\b", servers) is None, servers

    locations = visit(browser, master.url + "/locations", shots / "master-locations.png")
    for location in LOCATIONS:
        assert location in locations
    assert "Placement policy violations" in locations

    tasks = visit(browser, master.url + "/tasks", shots / "master-tasks.png")
    assert "Replica work in progress" in tasks
    assert "Re-replication: config changes owed to tablets" in tasks
    assert "Sent create" in tasks  # the counters of the calls that created the tablets

    replicas = visit(browser, tserver.url + "/tablets", shots / "tserver-tablets.png")
    for name in TABLES:
        assert name in replicas
    assert "RUNNING" in replicas
    assert "rows 1 to 4 of 4" in replicas

    saved = sorted(p.name for p in shots.iterdir())
    assert {"master-home.png", "master-tables.png", "master-table-tablets.png", "master-tservers.png",
            "master-locations.png", "tserver-tablets.png"} <= set(saved)  # fmt: skip
