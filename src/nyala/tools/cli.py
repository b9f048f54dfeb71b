"""The root ``nyala`` command; subject groups are added from their own modules."""

from __future__ import annotations

import click

from nyala._version import __version__
from nyala.tools._format import UnderscoreGroup
from nyala.tools._tls_flags import client_tls_options, store_client_tls
from nyala.tools.cmd_cluster import cluster
from nyala.tools.cmd_list import master_list, tserver_list
from nyala.tools.cmd_local_cluster import local_cluster
from nyala.tools.cmd_local_replica import local_replica
from nyala.tools.cmd_master import master
from nyala.tools.cmd_master_membership import master_add, master_remove
from nyala.tools.cmd_master_rebuild import master_unsafe_rebuild
from nyala.tools.cmd_remote_replica import remote_replica
from nyala.tools.cmd_table import table
from nyala.tools.cmd_tablet import tablet
from nyala.tools.cmd_tserver import tserver
from nyala.tools.cmd_tserver_state import tserver_state, tserver_unregister
from nyala.tools.cmd_wal import wal

__all__ = ["main"]


@click.group(cls=UnderscoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nyala")
@client_tls_options
def main(
    rpc_ca_certificate_file: str | None, rpc_certificate_file: str | None, rpc_private_key_file: str | None
) -> None:
    """Nyala: a distributed, replicated, columnar table store.

    The --rpc-* options (or their NYALA_RPC_* variables) make every command below talk TLS to
    the cluster; servers take their own TLS flags on `nyala master start` and `nyala tserver start`.
    """
    store_client_tls(rpc_ca_certificate_file, rpc_certificate_file, rpc_private_key_file)


main.add_command(wal)
main.add_command(master)
main.add_command(tserver)
main.add_command(local_cluster)
main.add_command(table)
main.add_command(cluster)
main.add_command(local_replica)
main.add_command(tablet)
main.add_command(remote_replica)
master.add_command(master_list)
master.add_command(master_unsafe_rebuild)
master.add_command(master_add)
master.add_command(master_remove)
tserver.add_command(tserver_list)
tserver.add_command(tserver_state)
tserver.add_command(tserver_unregister)
