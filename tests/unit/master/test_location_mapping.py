"""The location mapping command: output parsing, validation, failures, caching (real subprocesses)."""

from __future__ import annotations

import asyncio
import logging
import shlex
from pathlib import Path

import pytest

from nyala.errors import InvalidArgument
from nyala.master import MasterOptions
from nyala.master.location_mapping import (
    FAILURE_RETRY_S,
    LocationMapper,
    LocationMappingError,
    parse_command,
    parse_mapping_output,
)
from nyala.rpc.loop import run

pytestmark = pytest.mark.timeout(30)


def script(tmp_path: Path, body: str, name: str = "map.sh") -> str:
    """An executable sh script; returns the command line that runs it."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return shlex.quote(str(path))


# A mapping by table, counting its runs in a file beside it.
TABLE = """
echo run >> "$(dirname "$0")/runs"
for h in "$@"; do
  case "$h" in
    10.0.0.1) echo /dc1/rack1 ;;
    10.0.0.2) echo /dc1/rack2 ;;
    bad) echo dc1 ;;
    *) echo "unknown host $h" >&2; exit 3 ;;
  esac
done
"""


def runs(tmp_path: Path) -> int:
    path = tmp_path / "runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_output_gives_one_location_per_host_in_order() -> None:
    assert parse_mapping_output("cmd", ["a", "b"], "/x/1\n\n  /y-2.z_3  \n") == {"a": "/x/1", "b": "/y-2.z_3"}


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("/x\n", "printed 1 locations for 2 hosts"),
        ("/x\n/y\n/z\n", "printed 3 locations for 2 hosts"),
        ("", "printed 0 locations"),
        ("/x\nrack2\n", "gave host b an invalid location"),
        ("/x\n/a b\n", "contains ' '"),
        ("/x\n/a/\n", "empty component"),
        ("/x\n/a$b\n", "'$'"),
        ("/\n/x\n", "names no place"),
    ],
)
def test_bad_output_is_refused_with_the_reason(stdout: str, message: str) -> None:
    with pytest.raises(LocationMappingError) as info:
        parse_mapping_output("cmd", ["a", "b"], stdout)
    assert message in str(info.value)
    assert isinstance(info.value, InvalidArgument)


def test_command_lines_are_split_like_a_shell() -> None:
    assert parse_command("/bin/map --zone 'a b'") == ["/bin/map", "--zone", "a b"]
    with pytest.raises(InvalidArgument, match="empty"):
        parse_command("   ")
    with pytest.raises(InvalidArgument, match="cannot be parsed"):
        parse_command("'/bin/map")
    with pytest.raises(InvalidArgument, match="cannot be parsed"):
        MasterOptions(location_mapping_cmd="map 'unbalanced")


def test_the_command_gets_every_host_as_arguments(tmp_path: Path) -> None:
    mapper = LocationMapper(script(tmp_path, TABLE), timeout_s=10)
    assert run(mapper.resolve(["10.0.0.2", "10.0.0.1"])) == {"10.0.0.2": "/dc1/rack2", "10.0.0.1": "/dc1/rack1"}
    assert runs(tmp_path) == 1


def test_failures_name_the_command_host_and_cause(tmp_path: Path) -> None:
    mapper = LocationMapper(script(tmp_path, TABLE), timeout_s=10)
    with pytest.raises(LocationMappingError, match=r"for 10\.9\.9\.9 exited with status 3: unknown host 10\.9\.9\.9"):
        run(mapper.location_of_tserver("10.9.9.9"))
    with pytest.raises(LocationMappingError, match="gave host bad an invalid location: location 'dc1' must begin"):
        run(mapper.location_of_tserver("bad"))
    missing = LocationMapper(str(tmp_path / "nope"), timeout_s=10)
    with pytest.raises(LocationMappingError, match="cannot be started"):
        run(missing.location_of_tserver("10.0.0.1"))
    silent = LocationMapper(script(tmp_path, "exit 0\n", "silent.sh"), timeout_s=10)
    with pytest.raises(LocationMappingError, match="printed 0 locations for 1 hosts"):
        run(silent.location_of_tserver("10.0.0.1"))


def test_a_command_that_hangs_is_killed_at_the_timeout(tmp_path: Path) -> None:
    mapper = LocationMapper(script(tmp_path, f"echo $$ > {tmp_path}/pid\nexec sleep 30\n", "hang.sh"), timeout_s=1.0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(LocationMappingError, match=r"did not finish within 1(\.0)? s; killed it"):
            await mapper.location_of_tserver("10.0.0.1")
        assert loop.time() - started < 5

    run(main())
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_tservers_always_resolve_again_and_refresh_the_cache(tmp_path: Path) -> None:
    mapper = LocationMapper(script(tmp_path, TABLE), timeout_s=10)
    assert run(mapper.location_of_tserver("10.0.0.1")) == "/dc1/rack1"
    assert run(mapper.location_of_tserver("10.0.0.1")) == "/dc1/rack1"
    assert runs(tmp_path) == 2  # re-registration runs the command again (seed 000)
    assert mapper.cached("10.0.0.1") == "/dc1/rack1"
    assert run(mapper.location_of_client("10.0.0.1")) == "/dc1/rack1"
    assert runs(tmp_path) == 2  # clients are served from the cache


def test_concurrent_lookups_of_one_host_share_one_run(tmp_path: Path) -> None:
    mapper = LocationMapper(script(tmp_path, TABLE), timeout_s=10)

    async def main() -> list[str]:
        return list(await asyncio.gather(*(mapper.location_of_client("10.0.0.2") for _ in range(5))))

    assert run(main()) == ["/dc1/rack2"] * 5
    assert runs(tmp_path) == 1


def test_a_client_lookup_that_fails_gives_no_location_and_is_retried_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    mapper = LocationMapper(script(tmp_path, TABLE), timeout_s=10, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "nyala.master"):
        assert run(mapper.location_of_client("10.9.9.9")) == ""
    assert "client at 10.9.9.9 gets no location" in caplog.text
    assert run(mapper.location_of_client("10.9.9.9")) == ""
    assert runs(tmp_path) == 1  # the failure is remembered
    now[0] += FAILURE_RETRY_S + 1
    assert run(mapper.location_of_client("10.9.9.9")) == ""
    assert runs(tmp_path) == 2
