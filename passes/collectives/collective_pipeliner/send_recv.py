"""XLA's `UpdateSendRecvValidation`: a collective-permute's `_xla_send_recv_validation`
(per source-target pair, the iterations `{a,b}` it really sends in) follows the
iterations the pipeliner moves."""

from __future__ import annotations

import re

from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import Raw

KEY = "_xla_send_recv_validation"
_NEVER = (1, 0)
"""An empty interval: the pair sends in no iteration."""


_VALUE = re.compile(KEY + r'=("?)(\{\s*(?:\{[^{}]*\}\s*,?\s*)*\})\1')
"""The attribute in the frontend attributes' text, quoted as written or bare as printed."""


def _pairs(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"\{\s*(-?\d+)\s*,\s*(-?\d+)\s*\}", text)]


def update_validation(op: HloOp, peeled: bool, direction: str, trip_count: int) -> None:
    """Forward: the peeled copy (before the loop) runs iteration 0 only; in the loop each
    interval moves one iteration down. Backward: the peeled copy (after the loop) runs the
    last iteration only; in the loop the intervals end one before it."""
    if op.opcode != "collective-permute":
        return
    raw = op.attr("frontend_attributes")
    text = str(getattr(raw, "text", raw or ""))
    found = _VALUE.search(text)
    if found is None:
        return
    last = trip_count - 1
    out = []
    for a, b in _pairs(found.group(2)):
        if direction == "forward":
            out.append(((0, 0) if a <= 0 <= b else _NEVER) if peeled
                       else (max(0, a - 1), max(0, b - 1)))  # fmt: skip
        else:
            out.append(((0, 0) if a <= last <= b else _NEVER) if peeled
                       else (a, min(last - 1, b)))  # fmt: skip
    value = "{" + ",".join(f"{{{a},{b}}}" for a, b in out) + "}"
    # printed as XLA prints it: a braced value without quotes
    text = text[: found.start()] + f"{KEY}={value}" + text[found.end() :]
    op.set_attr("frontend_attributes", Raw(text))
