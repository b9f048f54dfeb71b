"""``nyala local-cluster start|stop|status``: a whole cluster on this machine, on loopback.

Masters listen on 127.0.0.1, .2, ... port 7051 and tablet servers on 127.0.0.10, .11, ...
port 7050; everything lives under ``--dir`` (default ./nyala-data).  The servers keep running
after the command returns; ``stop`` and ``status`` find them again through the directory.
Starting a directory that already holds a cluster restarts that cluster as it was.
Every server also serves its web pages and Prometheus metrics on its RPC port plus 1000
(masters http://127.0.0.1:8051, tablet servers http://127.0.0.10:8050, ...); ``start`` prints
the URLs and ``status --format json`` maps each server's RPC address to its URL under
``"http"``.

``--prometheus-config FILE`` (on ``start``, or ``nyala local-cluster prometheus-config`` for a
cluster already running) writes a Prometheus configuration scraping every server, grouped by
location, and the alert rules it loads (``nyala-alerts.yml`` beside it).

``--locations /dc1/rack1:2,/dc1/rack2:2`` gives each location one address (127.0.0.10, .11,
...) shared by its tablet servers (ports 7050, 7051, ...) and makes the masters map addresses
to locations with a generated script (``DIR/location-mapping.sh``); ``--client-location``
places clients on this machine (they connect from 127.0.0.1) in a location.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from nyala.errors import InvalidArgument, NotFound
from nyala.server import ServerOptions
from nyala.testing.minicluster import CLUSTER_FILE, MiniCluster, MiniClusterOptions
from nyala.testing.process import ProcessError
from nyala.tools._tls_flags import ServerTlsFlags, server_tls_options
from nyala.tools.prometheus_config import ALERT_RULES_FILE, ScrapeTarget, alert_rules, scrape_config

__all__ = ["local_cluster"]

DEFAULT_DIR = "./nyala-data"


@click.group("local-cluster")
def local_cluster() -> None:
    """Run a local cluster of real processes on loopback addresses."""


@local_cluster.command()
@click.option("--masters", "num_masters", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option("--tservers", "num_tservers", type=click.IntRange(1, 240), default=3, show_default=True)
@click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR, show_default=True)
@click.option("--heartbeat-interval-ms", type=click.IntRange(10), default=1000, show_default=True)
@click.option("--raft-heartbeat-interval-ms", type=click.IntRange(10), default=500, show_default=True)
@click.option("--raft-tick-interval-ms", type=click.IntRange(5), default=100, show_default=True)
@click.option(
    "--locations",
    default="",
    help="Tablet servers per location, like /dc1/rack1:2,/dc1/rack2:2,/dc1/rack3:2 (replaces --tservers).",
)
@click.option("--client-location", default="", help="Location of clients on this machine, like /dc1/rack1.")
@click.option(
    "--prometheus-config",
    "prometheus_config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a Prometheus configuration scraping every server to this file (and its alert rules beside it).",
)
@server_tls_options
def start(
    num_masters: int,
    num_tservers: int,
    root: Path,
    heartbeat_interval_ms: int,
    raft_heartbeat_interval_ms: int,
    raft_tick_interval_ms: int,
    locations: str,
    client_location: str,
    prometheus_config: Path | None,
    tls: ServerTlsFlags,
) -> None:
    """Start a cluster (or restart the one already in DIR) and wait until every server is ready.

    With the --rpc-* files every server serves TLS only, with that certificate (it must name
    127.0.0.1 and the cluster's loopback addresses, or be issued for them), and checks its
    peers against the CA; clients then need `nyala --rpc-ca-certificate-file CA ...`.
    """
    try:
        ServerOptions(**tls.settings())  # the servers' own checks, before any server starts
    except InvalidArgument as exc:
        raise click.UsageError(f"TLS flags: {exc}") from exc
    if (root / CLUSTER_FILE).exists():
        cluster = MiniCluster.load(root)
        click.echo(f"restarting the cluster in {root}")
    else:
        options = MiniClusterOptions(
            num_masters=num_masters,
            num_tservers=num_tservers,
            raft_tick_interval_ms=raft_tick_interval_ms,
            raft_heartbeat_interval_ms=raft_heartbeat_interval_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            ip_block=(0, 0),
            detached=True,
            auto_rebalancing=True,  # as a production master runs
            **tls.settings(resolve=True),  # absolute: the servers run in directories of their own
        )
        try:
            cluster = MiniCluster(root, options, locations=locations or None, client_location=client_location or None)
        except InvalidArgument as exc:
            raise click.BadParameter(str(exc), param_hint="--locations/--client-location") from exc

    if any(cluster.running(s) for s in [*cluster.masters, *cluster.tservers]):
        raise click.ClickException(f"the cluster in {root} is already running; stop it first")
    try:
        cluster.start()
    except ProcessError as exc:
        raise click.ClickException(f"the cluster did not start: {exc}") from exc
    click.echo(f"masters:  {cluster.master_addresses_flag}")
    click.echo(f"tservers: {','.join(str(t.address) for t in cluster.tservers)}")
    for location in cluster.locations:
        click.echo(f"  {location}: {','.join(str(t.address) for t in cluster.tservers_in(location))}")
    if cluster.options.rpc_certificate_file:
        click.echo(f"rpc:      TLS only; clients: nyala --rpc-ca-certificate-file {_client_ca(cluster)} ...")
    if cluster.options.client_location:
        click.echo(f"clients on this machine are in {cluster.options.client_location}")
    click.echo("web:")
    for server in [*cluster.masters, *cluster.tservers]:
        if server.http_address is not None:
            click.echo(f"  {server.process.name:<12} {server.url}")
    click.echo(f"logs:     {root / 'logs'}")
    if prometheus_config is not None:
        _write_prometheus_config(cluster, root, prometheus_config)


@local_cluster.command("prometheus-config")
@click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR, show_default=True)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="File to write the Prometheus configuration to (the alert rules go beside it).",
)
def prometheus_config_command(root: Path, output: Path) -> None:
    """Write a Prometheus configuration scraping every server of the cluster in DIR."""
    _write_prometheus_config(_load(root), root, output)


def _write_prometheus_config(cluster: MiniCluster, root: Path, output: Path) -> None:
    targets = [
        ScrapeTarget(s.kind, str(s.http_address), s.location)
        for s in [*cluster.masters, *cluster.tservers]
        if s.http_address is not None
    ]
    if not targets:
        raise click.ClickException("no server of this cluster serves web pages (--webserver-port 0)")
    rules = output.parent / ALERT_RULES_FILE
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        rules.write_text(alert_rules())
        scheme = "https" if cluster.options.webserver_certificate_file else "http"
        output.write_text(scrape_config(targets, root.resolve().name, rule_files=[ALERT_RULES_FILE], scheme=scheme))
    except OSError as exc:
        raise click.ClickException(f"cannot write the Prometheus configuration: {exc}") from exc
    click.echo(f"prometheus: {output} (alert rules in {rules})")


@local_cluster.command()
@click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR, show_default=True)
def stop(root: Path) -> None:
    """Stop every server of the cluster in DIR (its data stays)."""
    cluster = _load(root)
    cluster.stop()
    click.echo(f"stopped the cluster in {root}")


@local_cluster.command()
@click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status(root: Path, fmt: str) -> None:
    """Show the addresses of the cluster in DIR and which servers run."""
    cluster = _load(root)
    servers = [*cluster.masters, *cluster.tservers]
    running = {s.process.name: cluster.running(s) for s in servers}
    if fmt == "json":
        click.echo(
            json.dumps(
                {
                    "masters": [str(m.address) for m in cluster.masters],
                    "tservers": [str(t.address) for t in cluster.tservers],
                    "locations": {
                        name: [str(t.address) for t in cluster.tservers_in(name)] for name in cluster.locations
                    },
                    "client_location": cluster.options.client_location,
                    "running": running,
                    "http": cluster.urls(),
                },
                indent=2,
            )
        )
        return
    for server in servers:
        state = "running" if running[server.process.name] else "stopped"
        click.echo(f"{server.process.name:<12} {server.address!s:<22} {state:<8} {server.location}".rstrip())


def _client_ca(cluster: MiniCluster) -> str:
    o = cluster.options
    return o.rpc_ca_certificate_file or "<the CA that signed " + o.rpc_certificate_file + ">"


def _load(root: Path) -> MiniCluster:
    try:
        return MiniCluster.load(root)
    except NotFound as exc:
        raise click.ClickException(str(exc)) from exc
