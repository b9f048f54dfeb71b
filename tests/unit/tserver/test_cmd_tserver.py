"""``nyala tserver start``: its flags and the clear refusal of bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nyala.tools import cmd_tserver
from nyala.tools.cli import main
from nyala.tserver import TabletServerOptions


def test_help_lists_the_contract_flags() -> None:
    result = CliRunner().invoke(main, ["tserver", "start", "--help"])
    assert result.exit_code == 0
    for flag in (
        "--fs-data-dir",
        "--rpc-bind-address",
        "--master-addresses",
        "--heartbeat-interval-ms",
        "--raft-tick-interval-ms",
        "--raft-heartbeat-interval-ms",
        "--scanner-ttl-ms",
        "--storage-threads",
        "--log-level",
    ):
        assert flag in result.output


def test_bad_settings_are_refused_before_anything_starts(tmp_path: Path) -> None:
    base = ["tserver", "start", "--fs-data-dir", str(tmp_path / "ts")]
    cases = [
        (["--master-addresses", "127.0.0.1:notaport"], "port 'notaport' is not a number"),
        (["--scanner-ttl-ms", "0"], "scanner_ttl_ms must be positive"),
        (["--raft-tick-interval-ms", "100", "--raft-heartbeat-interval-ms", "50"], "must be at least"),
    ]
    for flags, message in cases:
        result = CliRunner().invoke(main, base + flags)
        assert result.exit_code == 1, result.output
        assert message in result.output
    assert not (tmp_path / "ts").exists()


def test_storage_threads_reach_the_tablet_server_and_a_negative_count_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[TabletServerOptions] = []

    async def serve(options: TabletServerOptions) -> None:
        seen.append(options)

    monkeypatch.setattr(cmd_tserver, "_serve", serve)
    base = ["tserver", "start", "--fs-data-dir", str(tmp_path / "ts")]
    assert CliRunner().invoke(main, [*base, "--storage-threads", "1"]).exit_code == 0
    assert CliRunner().invoke(main, base).exit_code == 0
    assert [o.storage.storage_threads for o in seen] == [1, 0]
    refused = CliRunner().invoke(main, [*base, "--storage-threads", "-1"])
    assert refused.exit_code == 2
    assert "--storage-threads" in refused.output
    assert len(seen) == 2


def test_the_fetches_a_tablet_copy_keeps_in_flight_reach_the_tablet_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[TabletServerOptions] = []

    async def serve(options: TabletServerOptions) -> None:
        seen.append(options)

    monkeypatch.setattr(cmd_tserver, "_serve", serve)
    base = ["tserver", "start", "--fs-data-dir", str(tmp_path / "ts")]
    assert CliRunner().invoke(main, [*base, "--tablet-copy-download-threads-nums-per-session", "8"]).exit_code == 0
    assert CliRunner().invoke(main, base).exit_code == 0
    assert [o.tablet_copy_download_threads_nums_per_session for o in seen] == [8, 4]
    assert CliRunner().invoke(main, [*base, "--tablet-copy-download-threads-nums-per-session", "0"]).exit_code == 2


def test_the_rpc_tls_flags_reach_the_tablet_server_and_go_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[TabletServerOptions] = []

    async def serve(options: TabletServerOptions) -> None:
        seen.append(options)

    monkeypatch.setattr(cmd_tserver, "_serve", serve)
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    cert.write_text("PEM")
    key.write_text("PEM")
    base = ["tserver", "start", "--fs-data-dir", str(tmp_path / "ts")]
    assert CliRunner().invoke(main, base).exit_code == 0
    tls = [
        "--rpc-certificate-file",
        str(cert),
        "--rpc-private-key-file",
        str(key),
        "--rpc-ca-certificate-file",
        str(cert),
    ]
    assert CliRunner().invoke(main, [*base, *tls]).exit_code == 0
    assert [(o.tls, o.rpc_certificate_file, o.rpc_private_key_file, o.rpc_ca_certificate_file) for o in seen] == [
        (False, "", "", ""),
        (True, str(cert), str(key), str(cert)),
    ]
    alone = CliRunner().invoke(main, [*base, "--rpc-certificate-file", str(cert)])
    assert alone.exit_code == 1
    assert "rpc_certificate_file and rpc_private_key_file must be given together" in alone.output
    missing = CliRunner().invoke(main, [*base, "--rpc-ca-certificate-file", str(tmp_path / "nope.crt")])
    assert missing.exit_code == 2
    assert "--rpc-ca-certificate-file" in missing.output
    assert len(seen) == 2
