"""`algsimp` family: reduce-window.

XLA-CPU computes `init` into every window, so a trivial window yields `f(init, x)`, not `x`;
the identity patterns (`add(x, 0) -> x`, ...) then drop an init that is the identity.
"""

from __future__ import annotations

from dataclasses import replace

from xdsl.ir import SSAValue

from hlopass import attrs as A
from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, reducer_opcode, src
from hlopass.rewriting import const_array, same_shape, value_shape


def _trivial_window(op: HloOp) -> bool:
    window = op.attr("window")
    return window is None or all(
        (w.size, w.stride, w.pad_low, w.pad_high, w.lhs_dilation, w.rhs_dilation)
        == (1, 1, 0, 0, 1, 1)
        for w in window.dims
    )


class ReduceWindowTrivial(Simplification):
    """`reduce-window(x, init)`, 1x..x1 window -> `f(broadcast(init), x)` for reducer `f`
    (one of add, multiply, maximum, minimum, and, or; stride 1, no padding or dilation)."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2 or not _trivial_window(op):
            return None
        x, init = op.operands
        kind = reducer_opcode(op)
        shape = array(op.shape)
        if kind is None or shape is None or not same_shape(value_shape(x), shape):
            return None
        b = self.new("broadcast", [init], shape, {"dimensions": ()}, like=op)
        return self.new(kind, [b.result, x], shape, like=op)


def _same_scalar(a: SSAValue, b: SSAValue) -> bool:
    """`a` and `b` are the same value or scalar constants of the same bits."""
    if a is b:
        return True
    ca, cb = const_array(a), const_array(b)
    if ca is None or cb is None or ca.size != 1 or cb.size != 1 or ca.dtype != cb.dtype:
        return False
    return ca.tobytes() == cb.tobytes()


class ReduceWindowOfPad(Simplification):
    """`reduce-window(pad(x, init, lo_hi_interior), init) -> reduce-window(x, init)` with
    the pad's edges added to the window's padding and its interior as base dilation (both
    fill with init, as the pad did)."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None  # (variadic reduce-window: one pad per operand, not matched)
        p, init = src(op.operands[0], "pad"), op.operands[1]
        window = op.attr("window")
        if p is None or window is None or not _same_scalar(p.operands[1], init):
            return None
        pads = p.attr("padding")
        if any(d.low < 0 or d.high < 0 for d in pads):
            return None  # negative padding slices: not a window padding
        pairs = list(zip(pads, window.dims, strict=True))
        if any(w.lhs_dilation != 1 and (d.low or d.high or d.interior) for d, w in pairs):
            return None  # window padding comes after its base dilation, the pad's before
        dims = tuple(
            replace(w, pad_low=w.pad_low + d.low, pad_high=w.pad_high + d.high,
                    lhs_dilation=w.lhs_dilation * (d.interior + 1))
            for d, w in pairs
        )  # fmt: skip
        return self.new("reduce-window", [p.operands[0], init], op.shape,
                        {"window": A.Window(dims), "to_apply": op.attr("to_apply")},
                        like=op)  # fmt: skip
