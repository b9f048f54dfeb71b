"""The data source's options: kudu-spark's names with a ``nyala.`` prefix, checked up front.

Every option a read or a write receives is parsed here, once, on the driver (in the planning
Python worker): an unknown key, a kudu-spark option Nyala does not support, or a value that
does not parse raises :class:`InvalidArgument` naming the option, before any task runs.
Keys are case-insensitive (Spark lower-cases them).  The parsed :class:`NyalaOptions` is a
small frozen dataclass that is pickled into every task.
"""

from __future__ import annotations

import dataclasses
import os
import ssl
from collections.abc import Mapping

from nyala.errors import InvalidArgument
from nyala.schema import OpType

__all__ = ["DEFAULT_MASTER", "OPERATIONS", "OPTION_HELP", "NyalaOptions", "TlsSettings", "parse_options"]

#: Where ``nyala local-cluster start`` puts its first master.
DEFAULT_MASTER = "127.0.0.1:7051"

#: ``nyala.combineSizeBytes``: small tablets share a Spark partition up to this many bytes.
DEFAULT_COMBINE_SIZE_BYTES = 1 << 20

#: ``nyala.operation`` values (kudu-spark's, dashes allowed) and the row operation each applies.
OPERATIONS: dict[str, OpType] = {
    "insert": OpType.INSERT,
    "insert_ignore": OpType.INSERT_IGNORE,
    "upsert": OpType.UPSERT,
    "upsert_ignore": OpType.UPSERT_IGNORE,
    "update": OpType.UPDATE,
    "update_ignore": OpType.UPDATE_IGNORE,
    "delete": OpType.DELETE,
    "delete_ignore": OpType.DELETE_IGNORE,
}

#: Option name -> (default shown in the docs, help).  The order is the docs' order.
OPTION_HELP: dict[str, tuple[str, str]] = {
    "nyala.table": ("required", "The table to read or write (`path`, as in `load(name)`, is accepted too)."),
    "nyala.master": (DEFAULT_MASTER, "Comma-separated master addresses."),
    "nyala.operation": ("upsert", "Write operation: " + ", ".join(OPERATIONS) + " (dashes allowed)."),
    "nyala.scanLocality": ("leader_only", "`leader_only` or `closest_replica` (a follower may lag the leader)."),
    "nyala.faultTolerantScan": ("false", "Ordered scans that resume on another replica after a server fails."),
    "nyala.batchSize": ("4194304", "Bytes of rows per scan response (the client's scan_batch_size_bytes)."),
    "nyala.scanRequestTimeoutMs": ("30000", "Deadline of each scan request of a task, retries included."),
    "nyala.operationTimeoutMs": ("30000", "Deadline of connecting, of each write flush and of metadata lookups."),
    "nyala.pushdown": (
        "false",
        "Push filters to the tablet servers. Columnar path: on unless set to false (Spark plans each query "
        "afresh). Python path: opt-in, needs Spark's Python filter pushdown on, and PySpark 4.3 then reuses a "
        "relation's last pushed filters for its later unfiltered queries: query such a DataFrame or view once.",
    ),
    "nyala.splitSizeBytes": ("unset", "Target bytes per Spark partition: tablets are split into key ranges."),
    "nyala.combineSizeBytes": (
        str(1 << 20),
        "Small tablets (fewer than 4,096 matching rows) are read together, up to this many bytes per Spark "
        "partition; 0 gives every tablet a partition of its own.",
    ),
    "nyala.writeBufferBytes": ("7340032", "Bytes a task's write session buffers (Kudu's mutation buffer)."),
    "nyala.useDriverMetadata": ("true", "Accepted for kudu-spark compatibility: tokens always carry the metadata."),
    "nyala.tls": ("false", "TLS to every master and tablet server (on by itself when a TLS file below is given)."),
    "nyala.tlsCaFile": ("unset", "PEM file of the CAs to trust (TLS on); unset: the system's CAs."),
    "nyala.tlsCertFile": ("unset", "PEM client certificate to present, for servers that check one (TLS on)."),
    "nyala.tlsKeyFile": ("unset", "PEM private key (PKCS#8) of nyala.tlsCertFile, when not in that file."),
    "nyala.tlsCheckHostname": ("true", "Check each server's address against its certificate's names."),
}

#: kudu-spark options Nyala knows but does not offer, with the reason given to the user.
UNSUPPORTED: dict[str, str] = {
    "nyala.snapshotTimestampMs": "Nyala has no snapshot reads (READ_AT_SNAPSHOT) yet",
    "nyala.keepAlivePeriodMs": "the client has no scanner keep-alive call yet (scanners live 60 s between calls)",
    "nyala.socketReadTimeoutMs": "it is deprecated in kudu-spark too; use nyala.operationTimeoutMs",
    "nyala.ignoreDuplicateRowErrors": "use nyala.operation=insert_ignore instead",
    "nyala.ignoreNull": "Nyala's writer sends every column of the DataFrame; select only the columns to change",
    "nyala.repartition": "rows are split by tablet inside each task already",
    "nyala.repartition.sort": "rows are split by tablet inside each task already",
    "nyala.handleSchemaDrift": "alter the table with nyala.connect(...).alter_table first",
    "nyala.saslProtocolName": "Nyala has no SASL/Kerberos authentication",
    "nyala.requireAuthentication": "Nyala has no SASL/Kerberos authentication",
    "nyala.encryptionPolicy": "TLS is on with nyala.tls, nyala.tlsCaFile or nyala.tlsCertFile, off otherwise",
}

#: Keys Spark itself adds for catalog tables (seen by DataSource.schema() only); never ours.
SPARK_CATALOG_KEYS = frozenset({"provider", "owner", "location", "comment", "external", "is_managed_location"})

_KNOWN = {name.lower(): name for name in OPTION_HELP}
_UNSUPPORTED = {name.lower(): name for name in UNSUPPORTED}


@dataclasses.dataclass(frozen=True, slots=True)
class TlsSettings:
    """How to reach a cluster whose RPC is TLS: the CA file, the client certificate, the name check.

    The same settings reach both read paths: the Python client builds its ``ssl`` context
    from them (:meth:`ssl_context`), the columnar JVM reader its ``SSLContext``.
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    check_hostname: bool = True

    def ssl_context(self) -> ssl.SSLContext:
        from nyala.rpc.tls import client_context

        return client_context(
            self.ca_file, cert_file=self.cert_file, key_file=self.key_file, check_hostname=self.check_hostname
        )


@dataclasses.dataclass(frozen=True, slots=True)
class NyalaOptions:
    """The parsed options of one read or write."""

    table: str
    master: str = DEFAULT_MASTER
    operation: OpType = OpType.UPSERT
    leader_only: bool = True
    fault_tolerant_scan: bool = False
    #: Off by default: PySpark 4.3 reuses a relation's pushed filters for its later queries (docs/spark.md).
    pushdown: bool = False
    batch_size_bytes: int | None = None
    scan_request_timeout_ms: int | None = None
    operation_timeout_ms: int | None = None
    split_size_bytes: int | None = None
    combine_size_bytes: int = DEFAULT_COMBINE_SIZE_BYTES
    write_buffer_bytes: int | None = None
    tls: TlsSettings | None = None

    @property
    def operation_name(self) -> str:
        return self.operation.name.lower()


def parse_options(options: Mapping[str, str], *, require_table: bool = True) -> NyalaOptions:
    """Check every option; InvalidArgument names the first bad one."""
    values: dict[str, str] = {}
    for raw_key, value in options.items():
        key = raw_key.lower()
        if key in SPARK_CATALOG_KEYS or key.startswith("option."):
            continue
        if key == "path":
            key = "nyala.table"
        if key in _UNSUPPORTED:
            name = _UNSUPPORTED[key]
            raise InvalidArgument(f"option {name!r} is not supported: {UNSUPPORTED[name]}")
        if key not in _KNOWN:
            raise InvalidArgument(_unknown_message(raw_key))
        values[_KNOWN[key]] = str(value)
    table = values.get("nyala.table", "").strip()
    if not table and require_table:
        raise InvalidArgument(
            "option 'nyala.table' is required (the Nyala table to read or write). If it was given in "
            "CREATE TABLE ... USING nyala OPTIONS (...): PySpark 4.3 passes catalog tables no options; "
            "use CREATE TEMPORARY VIEW ... USING nyala OPTIONS (...) instead"
        )
    master = values.get("nyala.master", DEFAULT_MASTER).strip()
    if not master:
        raise InvalidArgument("option 'nyala.master' is empty; give comma-separated master addresses")
    _bool(values, "nyala.useDriverMetadata", True)
    return NyalaOptions(
        table=table,
        master=master,
        operation=_operation(values.get("nyala.operation", "upsert")),
        leader_only=_locality(values.get("nyala.scanLocality", "leader_only")),
        fault_tolerant_scan=_bool(values, "nyala.faultTolerantScan", False),
        pushdown=_bool(values, "nyala.pushdown", False),
        batch_size_bytes=_positive(values, "nyala.batchSize"),
        scan_request_timeout_ms=_positive(values, "nyala.scanRequestTimeoutMs"),
        operation_timeout_ms=_positive(values, "nyala.operationTimeoutMs"),
        split_size_bytes=_positive(values, "nyala.splitSizeBytes"),
        combine_size_bytes=_non_negative(values, "nyala.combineSizeBytes", DEFAULT_COMBINE_SIZE_BYTES),
        write_buffer_bytes=_positive(values, "nyala.writeBufferBytes"),
        tls=_tls(values),
    )


def _tls(values: Mapping[str, str]) -> TlsSettings | None:
    """The TLS settings, each file checked readable and loadable here, on the driver."""
    files = {
        name: values.get(name, "").strip() or None
        for name in ("nyala.tlsCaFile", "nyala.tlsCertFile", "nyala.tlsKeyFile")
    }
    check_hostname = _bool(values, "nyala.tlsCheckHostname", True)
    if (
        not _bool(values, "nyala.tls", False)
        and files["nyala.tlsCaFile"] is None
        and files["nyala.tlsCertFile"] is None
    ):
        if files["nyala.tlsKeyFile"] is not None:
            raise InvalidArgument("option 'nyala.tlsKeyFile' needs 'nyala.tlsCertFile' (the certificate of that key)")
        return None
    if files["nyala.tlsKeyFile"] is not None and files["nyala.tlsCertFile"] is None:
        raise InvalidArgument("option 'nyala.tlsKeyFile' needs 'nyala.tlsCertFile' (the certificate of that key)")
    for name, path in files.items():
        if path is not None and not os.access(path, os.R_OK):
            raise InvalidArgument(f"option {name!r}: cannot read the file {path!r}")
    settings = TlsSettings(
        files["nyala.tlsCaFile"], files["nyala.tlsCertFile"], files["nyala.tlsKeyFile"], check_hostname
    )
    try:
        settings.ssl_context()
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(
            f"the TLS options do not load (nyala.tlsCaFile {settings.ca_file!r}, nyala.tlsCertFile "
            f"{settings.cert_file!r}, nyala.tlsKeyFile {settings.key_file!r}): {exc}"
        ) from None
    return settings


def _unknown_message(key: str) -> str:
    lowered = key.lower()
    stem = lowered.split(".", 1)[1] if lowered.startswith(("kudu.", "nyala.")) else lowered
    hint = next((name for low, name in _KNOWN.items() if low == f"nyala.{stem}"), None)
    known = ", ".join(OPTION_HELP)
    suggestion = f"; did you mean {hint!r}?" if hint else ""
    return f"unknown option {key!r}{suggestion} Known options: {known}"


def _operation(text: str) -> OpType:
    name = text.strip().lower().replace("-", "_")
    if name not in OPERATIONS:
        raise InvalidArgument(f"option 'nyala.operation' must be one of {', '.join(OPERATIONS)}; got {text!r}")
    return OPERATIONS[name]


def _locality(text: str) -> bool:
    name = text.strip().lower()
    if name not in ("leader_only", "closest_replica"):
        raise InvalidArgument(f"option 'nyala.scanLocality' must be leader_only or closest_replica; got {text!r}")
    return name == "leader_only"


def _bool(values: Mapping[str, str], name: str, default: bool) -> bool:
    text = values.get(name)
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise InvalidArgument(f"option {name!r} must be true or false; got {text!r}")
    return lowered == "true"


def _positive(values: Mapping[str, str], name: str) -> int | None:
    text = values.get(name)
    if text is None:
        return None
    try:
        number = int(text.strip())
    except ValueError:
        raise InvalidArgument(f"option {name!r} must be a positive integer; got {text!r}") from None
    if number <= 0:
        raise InvalidArgument(f"option {name!r} must be a positive integer; got {text!r}")
    return number


def _non_negative(values: Mapping[str, str], name: str, default: int) -> int:
    text = values.get(name)
    if text is None:
        return default
    try:
        number = int(text.strip())
    except ValueError:
        raise InvalidArgument(f"option {name!r} must be a non-negative integer; got {text!r}") from None
    if number < 0:
        raise InvalidArgument(f"option {name!r} must be a non-negative integer; got {text!r}")
    return number
