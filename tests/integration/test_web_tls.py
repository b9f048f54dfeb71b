"""The web server over HTTPS: `--webserver-certificate-file` and its key (Kudu's names)."""

from __future__ import annotations

import dataclasses
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from nyala.errors import InvalidArgument
from nyala.rpc.tls import client_context
from nyala.server import ServerOptions
from nyala.testing.minicluster import MiniCluster
from tests.integration.tls_kit import tls_cluster_options

pytestmark = pytest.mark.timeout(180)


def fetch(url: str, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        return response.status, response.read()


def test_pages_json_and_metrics_are_served_over_https_only(tmp_path: Path) -> None:
    options, pki = tls_cluster_options(tmp_path / "pki", num_masters=1, num_tservers=1)
    # The web server's certificate is the servers' own here; any certificate naming the address works.
    options = dataclasses.replace(
        options,
        webserver=True,
        webserver_certificate_file=str(pki.server_cert),
        webserver_private_key_file=str(pki.server_key),
    )
    with MiniCluster(tmp_path / "cluster", options) as cluster:
        trusting = client_context(pki.ca)
        for server in (cluster.masters[0], cluster.tservers[0]):
            assert server.url.startswith("https://")
            status, body = fetch(server.url + "/api/status", trusting)
            assert status == 200
            assert json.loads(body)["server"]["rpc_address"] == str(server.address)
            status, body = fetch(server.url + "/metrics", trusting)
            assert status == 200
            assert b"nyala_" in body
            # Plain HTTP on the same port gets no page, and neither does a client that trusts another CA.
            with pytest.raises((urllib.error.URLError, ConnectionError)):
                fetch(server.url.replace("https://", "http://") + "/api/status")
            with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
                fetch(server.url + "/api/status", client_context(pki.other_ca))


def test_the_web_certificate_needs_its_key_and_readable_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="must be given together"):
        ServerOptions(webserver_certificate_file="web.crt")
    missing = ServerOptions(
        webserver_certificate_file=str(tmp_path / "no.crt"), webserver_private_key_file=str(tmp_path / "no.key")
    )
    with pytest.raises(InvalidArgument, match="cannot load the web server's certificate"):
        missing.webserver_ssl_context()
