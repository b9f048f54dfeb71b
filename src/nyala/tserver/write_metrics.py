"""Rows written by the leaders of a tablet server, by operation, and row errors.

A replica counts when, as leader, it answers a write: the rows applied without error by
their base operation (``insert``, ``upsert``, ``update``, ``delete``; the ``_IGNORE`` variants
count as their base), one ``numpy.bincount`` of the batch's op codes.  Counting per server
(never per tablet) keeps the series bounded; :mod:`nyala.tserver.metrics` exports them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from nyala.metrics import LoopMetrics
from nyala.schema.rowops import OpType

__all__ = ["WriteMetrics"]

#: The label of each op code (the _IGNORE variants count as their base operation).
_OP_LABEL = {op.value: op.base.name.lower() for op in OpType}
_OPS = ("insert", "upsert", "update", "delete")


class WriteMetrics:
    """Rows written by the leaders of this server, by operation, and row errors."""

    def __init__(self, metrics: LoopMetrics | None = None) -> None:
        metrics = metrics if metrics is not None else LoopMetrics()
        self.enabled = metrics.enabled
        rows = metrics.counter(
            "nyala_tablet_rows_written_total",
            "Rows applied without error by writes this server's tablet leaders answered, by operation.",
            ["op"],
        )
        self._rows = {name: rows.child(name) for name in _OPS}
        self._by_code = [self._rows.get(_OP_LABEL.get(code, ""), None) for code in range(max(_OP_LABEL) + 1)]
        self.row_errors = metrics.counter(
            "nyala_tablet_row_errors_total",
            "Rows of writes answered with a row error (duplicate key, key not found, outside the partition, ...).",
        ).child()

    def count(self, ops: pa.Array, failed_rows: Iterable[int] = ()) -> None:
        """Count a write's rows: ``ops`` its op codes, ``failed_rows`` the positions that failed."""
        if not self.enabled:
            return
        counts = np.bincount(ops.to_numpy(zero_copy_only=False), minlength=len(self._by_code)).tolist()
        for row in failed_rows:
            counts[ops[row].as_py()] -= 1
        for code, n in enumerate(counts):
            if n:
                child = self._by_code[code] if code < len(self._by_code) else None
                if child is not None:
                    child.value += n
