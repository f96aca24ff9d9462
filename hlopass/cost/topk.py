"""The work of a TopK custom call (`TopK`, XLA's GPU TopK kernel `__gpu$TopK`): one pass
over the input, each element compared against a running top-k (about `log2(k)` compares
into a heap, at least one), the k values and indices written once. XLA's GPU performance
model has no entry for the kernel (a custom call); this stands for its select-k loop."""

from __future__ import annotations

import math
from typing import Any

from hlopass.cost.counts import shape_size
from hlopass.cost.work import DEFAULT_ALU

TOPK_TARGETS = frozenset({"TopK", "__gpu$TopK"})
"""The custom-call targets priced here."""


def topk_work(op: Any, w: Any) -> Any:
    """`w` (a KernelWork whose bytes read are counted) filled for the TopK call `op`: one
    thread per input element (the kernel splits each row over a block)."""
    outs = op.shape.leaves()
    k = outs[0].dims[-1] if outs and outs[0].dims else 1
    n = op.operands[0].type.data.num_elements
    compares = n * max(1, math.ceil(math.log2(k + 1)))
    w.kind = "topk"
    w.flops = float(compares)
    w.alu_ops = float(compares * DEFAULT_ALU)
    w.bytes_written = sum(shape_size(leaf) for leaf in outs)
    w.threads = max(1, n)
    return w
