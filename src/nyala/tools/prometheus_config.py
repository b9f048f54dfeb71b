"""A Prometheus configuration for a local cluster: scrape jobs and the alert rules to load.

:func:`scrape_config` lists every server's web address under one of two jobs,
``nyala-master`` and ``nyala-tserver``; tablet servers are grouped by location, which becomes
a ``location`` label on their series.  :func:`alert_rules` is the rule file an operator
should start from (docs/observability.md explains each alert).  Both are YAML, written out
by hand because the structure is fixed and small; every string is a double-quoted YAML
scalar (JSON string syntax), so no name can break the file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ALERT_RULES_FILE", "ScrapeTarget", "alert_rules", "scrape_config"]

ALERT_RULES_FILE = "nyala-alerts.yml"


@dataclass(frozen=True)
class ScrapeTarget:
    """One server: its job (``master`` or ``tserver``), web ``host:port`` and location."""

    kind: str
    address: str
    location: str = ""


def _q(text: str) -> str:
    return json.dumps(text)


def scrape_config(
    targets: Sequence[ScrapeTarget],
    cluster: str,
    *,
    interval_s: int = 15,
    rule_files: Sequence[str] = (),
    scheme: str = "http",
) -> str:
    """The YAML of a Prometheus configuration scraping ``targets`` every ``interval_s``.

    ``scheme`` "https" is for servers started with ``--webserver-certificate-file``; Prometheus
    then checks their certificates against the system CAs unless a ``tls_config`` is added.
    """
    if interval_s < 1:
        raise ValueError(f"interval_s must be at least 1, got {interval_s}")
    if scheme not in ("http", "https"):
        raise ValueError(f"scheme must be http or https, got {scheme!r}")
    lines = ["# Prometheus configuration for the Nyala cluster " + _q(cluster), "global:",
             f"  scrape_interval: {interval_s}s", f"  evaluation_interval: {interval_s}s"]  # fmt: skip
    if rule_files:
        lines.append("rule_files:")
        lines += [f"  - {_q(f)}" for f in rule_files]
    lines.append("scrape_configs:")
    for kind in ("master", "tserver"):
        mine = [t for t in targets if t.kind == kind]
        if not mine:
            continue
        lines += [f"  - job_name: {_q('nyala-' + kind)}", '    metrics_path: "/metrics"']
        if scheme == "https":
            lines.append('    scheme: "https"')
        lines.append("    static_configs:")
        for location in sorted({t.location for t in mine}):
            addresses = ", ".join(_q(t.address) for t in mine if t.location == location)
            lines.append(f"      - targets: [{addresses}]")
            labels = {"cluster": cluster, **({"location": location} if location else {})}
            lines.append("        labels: {" + ", ".join(f"{k}: {_q(v)}" for k, v in labels.items()) + "}")
    return "\n".join(lines) + "\n"


#: (name, expression, for, severity, summary) of each alert.
_ALERTS = (
    ("NyalaServerDown", 'up{job=~"nyala-.*"} == 0', "1m", "critical",
     "{{ $labels.job }} {{ $labels.instance }} does not answer scrapes"),
    ("NyalaTabletWithoutLeader", 'max by (cluster) (nyala_master_tablets{health="leaderless"}) > 0', "1m",
     "critical", "{{ $value }} tablets have no leader: writes to them fail"),
    ("NyalaUnderReplicatedTablets", 'max by (cluster) (nyala_master_tablets{health="under_replicated"}) > 0',
     "10m", "warning", "{{ $value }} tablets have fewer healthy replicas than their replication factor"),
    ("NyalaTabletServerDead", 'max by (cluster) (nyala_master_tablet_servers{liveness="dead"}) > 0', "2m",
     "warning", "{{ $value }} tablet servers stopped heartbeating to the leader master"),
    ("NyalaWalFsyncSlow",
     "histogram_quantile(0.99, sum by (instance, le) (rate(nyala_wal_fsync_duration_seconds_bucket[5m]))) > 0.05",
     "10m", "warning", "99th percentile WAL fsync on {{ $labels.instance }} is {{ $value }} s"),
    ("NyalaEventLoopLag", "nyala_event_loop_lag_last_seconds > 0.5", "5m", "warning",
     "the event loop of {{ $labels.instance }} runs {{ $value }} s late"),
)  # fmt: skip


def alert_rules() -> str:
    """The YAML of a Prometheus rule file with the alerts of docs/observability.md."""
    lines = ["groups:", '  - name: "nyala"', "    rules:"]
    for name, expr, duration, severity, summary in _ALERTS:
        lines += [
            f"      - alert: {_q(name)}",
            f"        expr: {_q(expr)}",
            f"        for: {_q(duration)}",
            f"        labels: {{severity: {_q(severity)}}}",
            f"        annotations: {{summary: {_q(summary)}}}",
        ]
    return "\n".join(lines) + "\n"
