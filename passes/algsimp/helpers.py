"""Predicates and small helpers shared by the algsimp pattern families."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue

from hlopass.dialects.hlo import ComputationOp, HloOp, computations, op_list
from hlopass.ir.shape import (
    ELEMENT_BITS,
    FLOATS,
    ArrayShape,
    Shape,
    TupleShape,
    is_float,
    is_integral,
)
from hlopass.rewriting import (
    computation_named,
    const_array,
    insert_computation,
    is_constant_like,
    is_hlo,
    module_of,
    owner,
    splat_value,
    value_shape,
)

CONSTANT_LIKE = frozenset({"constant", "broadcast"})
"""The opcodes that may define a constant value as `splat_value` and `is_constant_like`
read it (a constant, or a broadcast of one): an `OPERAND_FROM` of the algsimp patterns."""


def et(op_or_value: HloOp | SSAValue) -> str:
    s = op_or_value.shape if isinstance(op_or_value, HloOp) else value_shape(op_or_value)
    return s.element_type if isinstance(s, ArrayShape) else ""


_FLOATISH = FLOATS | {"c64", "c128"}
"""Element types whose arithmetic rounds (real floats and complex)."""


def is_float_op(op: HloOp) -> bool:
    """`op` or one of its operands has a float or complex element type (a tuple has none).
    Asked once per visit by every float-unsafe pattern (see `Simplification._float_op`)."""
    floatish = _FLOATISH
    if getattr(op.shape, "element_type", None) in floatish:
        return True
    return any(getattr(value_shape(v), "element_type", None) in floatish for v in op.operands)


def src(value: SSAValue, opcode: str) -> HloOp | None:
    """The defining op of `value` when it is an `opcode` instruction."""
    o = owner(value)
    return o if o is not None and opcode == o.OPCODE else None


def single_use(value: SSAValue) -> bool:
    return value.has_one_use()


def array(s: Shape) -> ArrayShape | None:
    return s if isinstance(s, ArrayShape) else None


def commuted(op: HloOp) -> list[tuple[SSAValue, SSAValue]]:
    a, b = op.operands
    return [(a, b), (b, a)]


def partner(op: HloOp, x: SSAValue) -> SSAValue | None:
    """The other operand of binary `op` when one of them is `x` (the first match)."""
    for first, other in commuted(op):
        if first is x:
            return other
    return None


def splat_is(value: SSAValue, target: float) -> bool:
    v = splat_value(value)
    if v is None:
        return False
    try:
        return bool(v == target)
    except (TypeError, ValueError):
        return False


def split_const(op: HloOp) -> tuple[SSAValue, SSAValue] | None:
    """(non-constant operand, constant operand) of a binary op with one constant side."""
    a, b = op.operands
    if is_constant_like(b) and not is_constant_like(a):
        return a, b
    if is_constant_like(a) and not is_constant_like(b):
        return b, a
    return None


def power_of_two_exponent(v: Any) -> int | None:
    try:
        iv = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    if iv != v or iv <= 0 or iv & (iv - 1):
        return None
    return iv.bit_length() - 1


@cache
def lowest(et: str) -> float | int | None:
    if is_float(et):
        return -math.inf
    if is_integral(et):
        from hlopass.ir.literal import numpy_dtype

        return int(np.iinfo(numpy_dtype(et)).min)
    return None


@cache
def highest(et: str) -> float | int | None:
    if is_float(et):
        return math.inf
    if is_integral(et):
        from hlopass.ir.literal import numpy_dtype

        return int(np.iinfo(numpy_dtype(et)).max)
    return None


def widens_exactly(src: str, dst: str) -> bool:
    """Every `src` value is exactly representable in `dst`."""
    from hlopass.ir.shape import ELEMENT_BITS

    if is_float(src) and is_float(dst):
        order = {"f16": 1, "bf16": 1, "f32": 2, "f64": 3}
        if src in order and dst in order:
            return order[dst] > order[src] or src == dst
        return False
    if src == "pred":
        return is_integral(dst) or is_float(dst)
    if is_integral(src) and is_integral(dst):
        if src[0] == dst[0]:
            return ELEMENT_BITS[dst] >= ELEMENT_BITS[src]
        return src[0] == "u" and dst[0] == "s" and ELEMENT_BITS[dst] > ELEMENT_BITS[src]
    return False


# --- reducers and their identities --------------------------------------------------------

REDUCER_OPCODES = ("add", "multiply", "maximum", "minimum", "and", "or")
"""Reducers whose identity is known (and which are associative and commutative on ints)."""


def callee(op: HloOp, attr: str = "to_apply") -> ComputationOp | None:
    """The computation `op` names in `attr` (None when it cannot be found)."""
    name = op.attr(attr)
    module = module_of(op)
    if not isinstance(name, str) or module is None:
        return None
    return computation_named(module, name)  # no walk over the module per instruction


def reducer_opcode(op: HloOp) -> str | None:
    """`add` when `op`'s `to_apply` is `(a, b) -> add(a, b)` over scalars (in either operand
    order), likewise for the other `REDUCER_OPCODES`; None for any other reducer."""
    comp = callee(op)
    if comp is None:
        return None
    # asked for every reduce a pattern looks at: read the (tiny) block once, no
    # `parameters()` sort or `root` asserts: three instructions and the return
    ops = op_list(comp.block)
    returned = ops[-1].operands if len(ops) == 4 else ()
    if not returned:
        return None
    root = owner(returned[0])
    if root is None or root.OPCODE not in REDUCER_OPCODES:
        return None
    params = [o for o in ops[:-1] if o is not root]
    if any(not is_hlo(p) or p.OPCODE != "parameter" for p in params):
        return None
    # the same values, compared by identity (xDSL hashes values in Python)
    if {id(v) for v in root.operands} != {id(p.results[0]) for p in params}:
        return None
    shape = array(root.shape)
    return root.OPCODE if shape is not None and shape.rank == 0 else None


def reduce_inputs(op: HloOp) -> list[SSAValue] | None:
    """The inputs of a (possibly variadic) reduce or reduce-window: the first half of its
    operands (the second half are the inits); None when the count is odd."""
    n = len(op.operands)
    return list(op.operands[: n // 2]) if n >= 2 and n % 2 == 0 else None


def result_shapes(op: HloOp) -> list[ArrayShape] | None:
    """The array results of a reduce or reduce-window: its shape, or its tuple's elements
    (one per input); None for anything else."""
    s = op.shape
    if isinstance(s, ArrayShape):
        return [s] if len(op.operands) == 2 else None
    if not isinstance(s, TupleShape) or len(s.elements) * 2 != len(op.operands):
        return None
    out = [array(e) for e in s.elements]
    return None if any(e is None for e in out) else out  # type: ignore[return-value]


def float_sum_reducer(op: HloOp) -> bool:
    """`op` reduces floats with add or multiply (or a reducer of unknown kind): regrouping
    its terms can change the rounding."""
    return is_float(et(op.operands[0])) and reducer_opcode(op) not in (
        "maximum", "minimum", "and", "or",
    )  # fmt: skip


def identity_of(opcode: str, element_type: str) -> Any:
    """The identity element of reducer `opcode` over `element_type` (None when there is none).
    Float addition's exact identity is -0.0: `+0.0 + -0.0` is +0.0."""
    if opcode == "add":
        return -0.0 if is_float(element_type) else (False if element_type == "pred" else 0)
    if opcode == "multiply":
        return 1 if element_type != "pred" else True
    if opcode == "maximum":
        return lowest(element_type) if element_type != "pred" else False
    if opcode == "minimum":
        return highest(element_type) if element_type != "pred" else True
    if opcode == "and" and (element_type == "pred" or is_integral(element_type)):
        return True if element_type == "pred" else -1 if element_type[0] == "s" else None
    if opcode == "or" and (element_type == "pred" or is_integral(element_type)):
        return False if element_type == "pred" else 0
    return None


def is_identity_init(op: HloOp, init: SSAValue) -> bool:
    """`init` is a constant equal (bitwise for floats: -0.0 for add) to the identity of
    `op`'s reducer: a reduction may then drop it, as XLA assumes it always may."""
    kind = reducer_opcode(op)
    if kind is None:
        return False
    t = et(init)
    ident = identity_of(kind, t)
    arr = const_array(init)
    if ident is None or arr is None or arr.size != 1 or t in ("c64", "c128"):
        return False
    if kind == "and" and t[0] == "u":
        return bool(arr.reshape(-1)[0] == np.iinfo(arr.dtype).max)
    want = np.asarray(ident).astype(arr.dtype)
    return arr.reshape(-1)[:1].tobytes() == want.reshape(-1)[:1].tobytes()


# --- value predicates ---------------------------------------------------------------------


def is_scalar_broadcast(value: SSAValue) -> HloOp | None:
    """The `broadcast` defining `value` when it broadcasts a scalar, else None."""
    b = src(value, "broadcast")
    if b is None:
        return None
    s = array(value_shape(b.operands[0]))
    return b if s is not None and s.rank == 0 else None


def scalar_constant_value(value: SSAValue) -> Any:
    """The value of a scalar (or splat, or broadcast-of-scalar) constant, else None."""
    return splat_value(value)


def is_non_negative(value: SSAValue, depth: int = 4) -> bool:
    """Every element of `value` is >= 0 or nan-free-nonnegative by construction: unsigned
    and pred types, `abs`, `exponential`, `sqrt`-like ops of non-negatives, `x * x` (floats),
    non-negative constants, and ops that keep non-negativity of non-negative operands."""
    t = et(value)
    if t == "pred" or t.startswith("u"):
        return True
    if t in ("c64", "c128") or not t:
        return False
    o = owner(value)
    if o is None or depth == 0:
        return False
    if o.OPCODE == "exponential" or (o.OPCODE == "abs" and not is_integral(t)):
        return True
    if o.OPCODE == "abs":  # abs(INT_MIN) wraps to INT_MIN
        return is_non_negative(o.operands[0], depth - 1)
    if o.OPCODE == "iota":  # (as XLA: a signed iota of at most 2^(b-1) elements)
        shape = array(o.shape)
        if shape is None or not is_integral(t):
            return shape is not None
        n = shape.dims[o.attr("iota_dimension")]
        return ELEMENT_BITS.get(t, 64) >= 64 or n <= 1 << (ELEMENT_BITS[t] - 1)
    if o.OPCODE == "maximum" and any(is_non_negative(v, depth - 1) for v in o.operands):
        return True  # (a nan operand gives nan, which compares as non-negative does)
    if o.OPCODE == "constant":
        arr = const_array(value)
        # -0.0 counts as negative here: abs(-0.0) is +0.0
        return (
            arr is not None
            and bool(np.all(np.signbit(arr) == 0))
            and not (arr.dtype.kind == "f" and bool(np.any(np.isnan(arr))))
        )
    if o.OPCODE == "multiply" and o.operands[0] is o.operands[1] and is_float(t):
        return True  # x * x: never negative (nan stays nan, and abs(nan) is nan too)
    if o.OPCODE in ("broadcast", "reshape", "transpose", "copy", "slice", "reverse"):
        return is_non_negative(o.operands[0], depth - 1)
    if o.OPCODE in ("add", "maximum", "minimum", "multiply", "select"):
        vals = list(o.operands)[1:] if o.OPCODE == "select" else list(o.operands)
        if o.OPCODE in ("add", "multiply") and not is_float(t):
            return False  # integer overflow wraps to negative
        return all(is_non_negative(v, depth - 1) for v in vals)
    return False


def add_reducer(ctx: Any, near: HloOp, element_type: str) -> str:
    """The name of a computation `(a, b) -> add(a, b)` over `element_type` scalars: an
    existing one of the module, else a new one inserted before `near`'s computation."""
    from xdsl.ir import Block

    from hlopass.dialects.hlo import create_op, new_return_op
    from hlopass.ir.shape import scalar

    module = module_of(near)
    assert module is not None
    for c in computations(module):
        params = c.parameters()
        root = c.root
        if (
            len(params) == 2 and root.OPCODE == "add" and len(list(c.instructions)) == 3
            and {o for o in root.operands} == {p.result for p in params}
            and all(et(p) == element_type and array(p.shape).rank == 0 for p in params)  # type: ignore[union-attr]
            and et(root) == element_type
        ):  # fmt: skip
            return c.comp_name
    s = scalar(element_type)
    a = create_op("parameter", [], s, ctx.names.fresh("lhs"), {"number": 0})
    b = create_op("parameter", [], s, ctx.names.fresh("rhs"), {"number": 1})
    add = create_op("add", [a.results[0], b.results[0]], s, ctx.names.fresh("add"))
    block = Block()
    for o in (a, b, add):
        block.add_op(o)
    block.add_op(new_return_op(add.results[0]))
    return insert_computation(ctx, near, f"add_{element_type}", block)


def _fresh_computation_name(ctx: Any, module: ModuleOp, base: str) -> str:
    """A fresh name from `base` that no computation of `module` has."""
    return ctx.names.fresh_outside(base, {c.comp_name for c in computations(module)})


def _insert_before_computation_of(comp: ComputationOp, near: HloOp) -> None:
    """Insert the new computation `comp` into the module just before the computation
    holding `near` (a reducer is declared before its users, as XLA prints them)."""
    host = near.parent_op()
    assert isinstance(host, ComputationOp)
    mblock = host.parent_block()
    assert mblock is not None
    mblock.insert_op_before(comp, host)


def untupled_reducer(ctx: Any, op: HloOp) -> str | None:
    """The name of a copy of `op`'s reducer whose root is the single operand of the
    original's one-element `tuple` root, inserted before `op`'s computation (instruction
    names made fresh); None when the reducer's root is not such a tuple."""
    from xdsl.rewriter import Rewriter

    comp = callee(op)
    module = module_of(op)
    if comp is None or module is None:
        return None
    root = comp.root
    if root.OPCODE != "tuple" or len(root.operands) != 1:
        return None
    copy = comp.clone()
    name = _fresh_computation_name(ctx, module, f"{comp.comp_name}.clone")
    copy.sym_name = StringAttr(name)
    ret = copy.body.block.last_op
    assert ret is not None
    tup = owner(ret.operands[0])
    assert tup is not None
    ret.operands = [tup.operands[0]]
    Rewriter.erase_op(tup)
    for o in copy.instructions:
        o.inst_name = ctx.names.fresh(o.inst_name)
    _insert_before_computation_of(copy, op)
    return name
