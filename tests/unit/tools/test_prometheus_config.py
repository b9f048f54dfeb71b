"""The Prometheus configuration written for a local cluster, and its alert rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nyala.tools.cli import main
from nyala.tools.prometheus_config import ALERT_RULES_FILE, ScrapeTarget, alert_rules, scrape_config

TARGETS = [
    ScrapeTarget("master", "127.0.0.1:8051"),
    ScrapeTarget("tserver", "127.0.0.10:8050", "/dc1/rack1"),
    ScrapeTarget("tserver", "127.0.0.10:8051", "/dc1/rack1"),
    ScrapeTarget("tserver", "127.0.0.11:8050", "/dc1/rack2"),
]


def test_every_server_is_a_target_of_its_job_labelled_with_its_location() -> None:
    text = scrape_config(TARGETS, "demo", rule_files=[ALERT_RULES_FILE])
    lines = text.splitlines()
    assert "  scrape_interval: 15s" in lines
    assert f'  - "{ALERT_RULES_FILE}"' in lines
    assert '  - job_name: "nyala-master"' in lines
    assert '  - job_name: "nyala-tserver"' in lines
    assert '      - targets: ["127.0.0.1:8051"]' in lines
    assert '      - targets: ["127.0.0.10:8050", "127.0.0.10:8051"]' in lines
    assert '        labels: {cluster: "demo", location: "/dc1/rack1"}' in lines
    assert '        labels: {cluster: "demo", location: "/dc1/rack2"}' in lines
    assert '        labels: {cluster: "demo"}' in lines  # the masters have no location
    assert "\t" not in text


def test_a_name_with_quotes_cannot_break_the_file() -> None:
    text = scrape_config(TARGETS[:1], 'a"b\ncluster')
    label_line = next(line for line in text.splitlines() if "labels:" in line)
    assert json.loads(label_line.split("cluster: ", 1)[1].rstrip("}")) == 'a"b\ncluster'


def test_a_zero_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        scrape_config(TARGETS, "demo", interval_s=0)


def test_servers_serving_https_are_scraped_over_https() -> None:
    plain = scrape_config(TARGETS, "demo").splitlines()
    assert '    scheme: "https"' not in plain
    secure = scrape_config(TARGETS, "demo", scheme="https").splitlines()
    assert secure.count('    scheme: "https"') == 2  # one per job
    with pytest.raises(ValueError, match="http or https"):
        scrape_config(TARGETS, "demo", scheme="ftp")


def test_the_alert_rules_cover_leaderless_under_replicated_down_and_fsync() -> None:
    text = alert_rules()
    for name in ("NyalaServerDown", "NyalaTabletWithoutLeader", "NyalaUnderReplicatedTablets", "NyalaWalFsyncSlow"):
        assert f'      - alert: "{name}"' in text
    assert 'nyala_master_tablets{health=\\"leaderless\\"}' in text
    assert "nyala_wal_fsync_duration_seconds_bucket" in text


def test_the_prometheus_config_of_a_directory_without_a_cluster_is_a_clear_error(tmp_path: Path) -> None:
    output = tmp_path / "prometheus.yml"
    result = CliRunner().invoke(
        main, ["local-cluster", "prometheus-config", "--dir", str(tmp_path / "none"), "--output", str(output)]
    )
    assert result.exit_code == 1
    assert "no local cluster in" in result.output
    assert not output.exists()
