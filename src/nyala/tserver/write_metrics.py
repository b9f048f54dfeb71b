"""Rows written by the leaders of a tablet server, by operation, and row errors.

A replica counts when, as leader, it answers a write: the rows applied without error by
their base operation (``insert``, ``upsert``, ``update``, ``delete``; the ``_IGNORE`` variants
count as their base).  A batch of one operation (``RowOperations.only_op``) costs one
addition; a mixed batch one ``numpy.bincount`` of its op codes.  Counting per server (never
per tablet) keeps the series bounded; :mod:`nyala.tserver.metrics` exports them.
"""

from __future__ import annotations

from collections.abc import Sequence

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
        #: The series of every op code.
        self._by_code = {code: self._rows[label] for code, label in _OP_LABEL.items()}
        self.row_errors = metrics.counter(
            "nyala_tablet_row_errors_total",
            "Rows of writes answered with a row error (duplicate key, key not found, outside the partition, ...).",
        ).child()

    def count(self, ops: pa.Array, failed_rows: Sequence[int] = (), only_op: OpType | None = None) -> None:
        """Count a write's rows: ``ops`` its int8 op codes, ``failed_rows`` the positions that
        failed, ``only_op`` the op of every row when the batch has one (the common case: one
        addition, where counting the codes costs microseconds)."""
        if not self.enabled:
            return
        if only_op is not None:
            self._by_code[only_op].value += len(ops) - len(failed_rows)
            return
        counts = np.bincount(np.frombuffer(ops.buffers()[1], np.uint8, len(ops), ops.offset), minlength=9).tolist()
        for row in failed_rows:
            counts[ops[row].as_py()] -= 1
        for code, child in self._by_code.items():
            if counts[code]:
                child.value += counts[code]
