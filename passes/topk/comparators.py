"""Which sort comparators order by "greater than, NaN-safe" (XLA's IsNanSafeGt in
topk_rewriter.cc): the comparator of a sort `topk-rewriter` may turn into a TopK.

A comparator qualifies when its root is `compare(key(p0), key(p1)), direction=GT` over its
parameters 0 and 1, each `key` the same one of:
- the parameter itself (f32, bf16, s32 or u32: XLA's builder comparator, any comparison
  type; the total order of floats puts NaNs where its GPU kernel does);
- the integer total-order key of a float, as XLA's ComparisonExpander writes it:
  `select(lt(s, 0), xor(s, MAX), s)` or `select(lt(s, 0), bitcast-convert(subtract(MAX,
  bitcast-convert(p))), s)` with `s = bitcast-convert(p)` to the signed integer of the
  float's width and `MAX` that integer's largest value (an optional `convert` of a bf16
  parameter to f32 first; the u32 `MAX` a constant or a `convert` of the s32 one).
Or the root is `select(broadcast(c), compare(p0, p1), direction=GT, broadcast(c))` over
four parameters (values and s32 indices; XLA's "default compare" form).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ELEMENT_BITS
from hlopass.rewriting import const_array, owner

_DIRECT = frozenset({"f32", "bf16", "s32", "u32"})


def _et(v: SSAValue) -> str:
    return v.type.data.element_type  # type: ignore[attr-defined]


def _param(v: SSAValue) -> int | None:
    """The parameter number of `v` (through a bf16 -> f32 convert), else None."""
    o = owner(v)
    if o is not None and o.opcode == "convert" and _et(v) == "f32":
        inner = owner(o.operands[0])
        o = inner if inner is not None and _et(o.operands[0]) == "bf16" else None
    if o is None or o.opcode != "parameter":
        return None
    return o.attr("number")


def _is_max(v: SSAValue, bits: int) -> bool:
    """A constant (or a convert of one) holding the largest signed `bits`-bit integer."""
    o = owner(v)
    if o is not None and o.opcode == "convert":
        v = o.operands[0]
    arr = const_array(v)
    return arr is not None and arr.size == 1 and int(arr.reshape(())) == (1 << (bits - 1)) - 1


def _signed_bits(v: SSAValue) -> tuple[int, int] | None:
    """(parameter number, width) when `v` is `bitcast-convert(p)` to a signed integer."""
    o = owner(v)
    if o is None or o.opcode != "bitcast-convert" or not _et(v).startswith("s"):
        return None
    number = _param(o.operands[0])
    return None if number is None else (number, ELEMENT_BITS[_et(v)])


def _flipped(v: SSAValue, number: int, bits: int) -> bool:
    """`v` flips the non-sign bits of parameter `number`'s signed view."""
    o = owner(v)
    if o is None:
        return False
    if o.opcode == "xor":
        a, b = o.operands
        return any(
            _signed_bits(x) == (number, bits) and _is_max(y, bits) for x, y in ((a, b), (b, a))
        )
    if o.opcode != "bitcast-convert":
        return False
    sub = owner(o.operands[0])
    if sub is None or sub.opcode != "subtract" or not _is_max(sub.operands[0], bits):
        return False
    unsigned = owner(sub.operands[1])
    return (unsigned is not None and unsigned.opcode == "bitcast-convert"
            and _param(unsigned.operands[0]) == number)  # fmt: skip


def _key(v: SSAValue) -> int | None:
    """The parameter number whose order `v` is a key of (see the module docstring)."""
    o = owner(v)
    if o is None:
        return None
    if o.opcode == "parameter":
        return o.attr("number") if _et(v) in _DIRECT else None
    if o.opcode != "select":
        return None
    pred, flipped, plain = (owner(x) for x in o.operands)
    view = _signed_bits(o.operands[2])
    if view is None or pred is None or plain is None or pred.opcode != "compare":
        return None
    if pred.attr("direction") != "LT" or _signed_bits(pred.operands[0]) != view:
        return None
    zero = const_array(pred.operands[1])
    if zero is None or zero.size != 1 or int(zero.reshape(())) != 0:
        return None
    return view[0] if _flipped(o.operands[1], *view) else None


def _is_gt_of_params(root: HloOp) -> bool:
    if root.opcode != "compare" or root.attr("direction") != "GT":
        return False
    a, b = (_key(v) for v in root.operands)
    return (a, b) == (0, 1)


def is_nan_safe_gt(comp: ComputationOp) -> bool:
    """XLA's IsNanSafeGt of a sort comparator (see the module docstring)."""
    root = comp.root
    if _is_gt_of_params(root):
        return True
    if root.opcode != "select":
        return False
    cond, inner, other = (owner(v) for v in root.operands)
    if inner is None or inner.opcode != "compare" or not _is_gt_of_params(inner):
        return False
    if any(_param(v) is None for v in inner.operands):
        return False  # the default form compares the values themselves
    return all(_is_constant_splat(o) for o in (cond, other))


def _is_constant_splat(o: HloOp | None) -> bool:
    """`broadcast(constant)` (XLA's `m::Broadcast(m::Constant())`)."""
    if o is None or o.opcode != "broadcast":
        return False
    inner = owner(o.operands[0])
    return inner is not None and inner.opcode == "constant"
