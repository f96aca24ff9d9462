"""What `softmax-rewriter-triton` matches: XLA's normalization diamond and the Triton
support predicates its guards ask (XLA's `IsTritonSupportedInstruction` for CUDA GPUs).

A diamond is

    producer ──────────────┐
       │                  (trivial ops)
    (trivial ops)          │
    reduce (minor-most dim) │
    (trivial ops)          │
    broadcast ──────────── root (elementwise binary)

where a *trivial* op neither reads nor writes more memory than the diamond already does and
fits any tiling: a bitcast, a Triton-supported unary elementwise op, or a binary one whose
operands are one value twice or exactly one splat (a broadcast of a scalar constant or of a
parameter). Every trivial op has a single user and the default (major-to-minor) layout.
"""

from __future__ import annotations

from typing import Any

from hlopass.cost.layouts import op_reshape_is_bitcast
from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ArrayShape, is_float, is_integral
from hlopass.kernel_structure.emitter import is_elementwise

_CUDA_TYPES = frozenset(
    {"pred", "s4", "s8", "s16", "s32", "s64", "f16", "f32", "f64", "bf16", "f8e5m2", "f8e4m3fn"}
)
_F8 = frozenset({"f8e5m2", "f8e4m3fn"})
_UNSUPPORTED_OPCODES = frozenset({
    "dynamic-reshape", "dynamic-update-slice", "gather", "ragged-dot", "reduce-window",
    "scatter", "select-and-scatter", "set-dimension-size",
})  # fmt: skip
_FLOAT_UNARY = frozenset({
    "cosine", "floor", "log-plus-one", "sqrt", "tanh", "acosh", "exponential",
    "exponential-minus-one", "cbrt", "erf", "log", "tan", "ceil", "rsqrt", "sine",
})  # fmt: skip
_SHAPING = frozenset({"broadcast", "reshape", "slice", "transpose"})


def _users(op: HloOp) -> list[HloOp]:
    """XLA's users: distinct instructions reading `op` (a computation's root is read by
    its return, which XLA does not count)."""
    seen: dict[int, HloOp] = {}
    for use in op.result.uses:
        user = use.operation
        if isinstance(user, HloOp):
            seen.setdefault(id(user), user)
    return list(seen.values())


def user_count(op: HloOp) -> int:
    return len(_users(op))


def _etype(op: Any) -> str | None:
    shape = op.shape if isinstance(op, HloOp) else op.type.data
    return shape.element_type if isinstance(shape, ArrayShape) else None


def has_default_layout(op: HloOp) -> bool:
    """XLA's HasDefaultLayout: an array whose layout is major-to-minor (none given reads so)."""
    shape = op.shape
    if not isinstance(shape, ArrayShape):
        return False
    layout = shape.layout
    return layout is None or tuple(layout.minor_to_major) == tuple(range(shape.rank - 1, -1, -1))


def _unary_ok(opcode: str, et: str) -> bool:
    if et == "pred":
        return opcode in ("not", "copy")
    if et in ("s4",):
        return False
    ok = {"abs", "copy"}
    if et not in _F8:
        ok.add("negate")
    if is_integral(et):
        ok.add("not")
    if et in ("bf16", "f16", "f32", "f64"):
        ok |= _FLOAT_UNARY
    if is_float(et):
        ok.add("reduce-precision")
    return opcode in ok


def _binary_ok(opcode: str, et: str) -> bool:
    if et in ("s4", "u16") or et in _F8:
        return False
    ok = {"add", "compare", "maximum", "minimum", "multiply"}
    if et == "pred":
        return opcode in ok | {"and", "or", "xor"}
    ok.add("subtract")
    if is_integral(et):
        ok |= {"divide", "and", "or", "xor"}
    if et in ("f32", "f64"):
        ok |= {"atan2", "divide", "remainder", "power"}
    if et in ("bf16", "f16"):  # (XLA's list gives them no divide)
        ok |= {"atan2", "power", "remainder"}
    return opcode in ok


def _ternary_ok(opcode: str, et: str) -> bool:
    if et in ("s4", "u16"):
        return False
    return opcode == "select" if et in _F8 else opcode in ("select", "clamp")


def conversion_supported(out: str, src: str, cc: tuple[int, int]) -> bool:
    """XLA's IsTritonSupportedConversion (CUDA)."""
    pair = {out, src}
    if out != src and "f8e4m3fn" in pair and cc < (9, 0):
        return False
    is_f8 = bool(pair & _F8)
    if out != src and is_f8 and not pair >= _F8 and not pair & {"f16", "bf16", "f32"}:
        return False
    if src == "s4" and out not in ("s8", "f16", "bf16", "f32", "f64"):
        return False
    if out == "s4":
        return False
    return out in _CUDA_TYPES and src in _CUDA_TYPES


def triton_supported(op: HloOp, comps: dict[str, ComputationOp], cc: tuple[int, int]) -> bool:
    """XLA's IsTritonSupportedInstruction on a CUDA GPU of compute capability `cc`, for the
    instructions a normalization fusion holds (dots, concatenates and nested fusions, which
    XLA allows only inside GEMM fusions, are refused)."""
    opc = op.opcode
    if opc in _UNSUPPORTED_OPCODES:
        return False
    et = _etype(op)
    if opc == "convert":
        src = _etype(op.operands[0])
        return et is not None and src is not None and conversion_supported(et, src, cc)
    if et not in _CUDA_TYPES or any(_etype(v) not in _CUDA_TYPES for v in op.operands):
        return False
    shape = op.shape
    assert isinstance(shape, ArrayShape)
    if opc == "pad":
        return False  # (normalization diamonds never hold one; XLA allows only high padding)
    if opc == "constant":
        return et != "s4" and all(d == 1 for d in shape.dims)
    if opc == "iota":
        return et not in _F8 and et != "s4"
    if opc == "reduce":
        return _reduce_ok(op, comps, cc)
    if opc == "parameter":
        return True
    if opc == "bitcast":
        src = op.operands[0].type.data  # type: ignore[attr-defined]
        return et != "s4" and _elements(src) == _elements(shape)
    if opc in _SHAPING:
        return et != "s4"
    if opc in ("dot", "fusion", "dynamic-slice", "concatenate"):
        return False
    if is_elementwise(op):
        last = _etype(op.operands[-1]) if len(op.operands) else et
        assert last is not None
        n = len(op.operands)
        return (
            (n == 1 and _unary_ok(opc, last))
            or (n == 2 and _binary_ok(opc, last))
            or (n == 3 and _ternary_ok(opc, last))
        )
    return False


def _elements(shape: Any) -> int:
    n = 1
    for d in getattr(shape, "dims", ()):
        n *= d
    return n


def _reduce_ok(op: HloOp, comps: dict[str, ComputationOp], cc: tuple[int, int]) -> bool:
    if _etype(op) in _F8:
        return False
    reducer = comps.get(op.attr("to_apply"))
    if reducer is None or not all(triton_supported(i, comps, cc) for i in reducer.instructions):
        return False
    return len(op.attr("dimensions") or ()) == 1 and len(op.operands) == 2


def is_splat(op: Any) -> bool:
    """XLA's IsBroadcastOfScalarConstant or IsBroadcastOfParameter."""
    if not isinstance(op, HloOp) or op.opcode != "broadcast":
        return False
    src = op.operands[0].owner
    if not isinstance(src, HloOp):
        return False
    if src.opcode == "parameter":
        return True
    return src.opcode == "constant" and isinstance(src.shape, ArrayShape) and src.shape.rank == 0


class Matcher:
    """XLA's MatchesTritonCompatibleClosedReductionDiamond for the instructions of one
    module, on a GPU of compute capability `cc`."""

    def __init__(self, comps: dict[str, ComputationOp], cc: tuple[int, int]):
        self.comps = comps
        self.cc = cc

    def supported(self, op: HloOp) -> bool:
        return triton_supported(op, self.comps, self.cc)

    def trivially_fusible(self, op: Any, allowed_users: int = 1) -> bool:
        """XLA's IsTriviallyFusible: at most `allowed_users` users, default layout, and a
        bitcast (or a reshape that is one), a supported unary elementwise op, or a supported binary one on one value
        twice or on exactly one splat."""
        if not isinstance(op, HloOp) or user_count(op) > allowed_users:
            return False
        if not has_default_layout(op):
            return False
        if op.opcode == "bitcast" or (op.opcode == "reshape" and op_reshape_is_bitcast(op)):
            # (our pipelines run before layout assignment, whose simplifier turns such
            # reshapes into the bitcasts XLA's pass sees)
            return True
        if not is_elementwise(op):
            return False
        if len(op.operands) == 1:
            return self.supported(op)
        if len(op.operands) == 2:
            a, b = (v.owner for v in op.operands)
            if a is b or is_splat(a) != is_splat(b):
                return self.supported(op)
        return False

    @staticmethod
    def fusion_operand(op: HloOp) -> Any:
        """XLA's ChooseOperandForFusionProcessing: the first operand that is no splat."""
        if len(op.operands) > 1 and is_splat(op.operands[0].owner):
            return op.operands[1].owner
        return op.operands[0].owner

    def trivial_edge(self, start: Any, opcode: str) -> Any:
        """XLA's TrivialEdge: the first instruction of `opcode` reached from `start` through
        trivially fusible ones, else None."""
        op = start
        while isinstance(op, HloOp) and op.opcode != opcode:
            if not self.trivially_fusible(op):
                return None
            op = self.fusion_operand(op)
        return op if isinstance(op, HloOp) else None

    def trivially_connected(self, producer: HloOp, consumer: Any) -> bool:
        """XLA's IsTriviallyConnectedProducerOf."""
        if producer is consumer:
            return True
        while True:
            found = self.trivial_edge(consumer, producer.opcode)
            if found is None:
                return False
            if found is producer:
                return True
            if not self.trivially_fusible(found) or not found.operands:
                return False
            consumer = found.operands[0].owner

    def match(self, root: HloOp) -> HloOp | str:
        """The diamond's producer when `root` closes one, else XLA's reason why not."""
        if not (is_elementwise(root) and len(root.operands) == 2):
            return "Root is not elementwise binary."
        if not self.supported(root):
            return "Root is not supported for Triton instruction."
        broadcast = self.trivial_edge(root.operands[1].owner, "broadcast")
        if broadcast is None:
            return "Could not find a trivial connection from root to a broadcast."
        reduce = self.trivial_edge(broadcast.operands[0].owner, "reduce")
        if reduce is None:
            return ("Could not find a trivial connection from matched broadcast to a "
                    "reduction.")  # fmt: skip
        if not (has_default_layout(broadcast) and has_default_layout(reduce)):
            return "Broadcast or reduce have non-default layouts."
        reason = self.reduction_refusal(reduce)
        if reason:
            return reason
        if user_count(broadcast) != 1 or user_count(reduce) != 1:
            return "More than one use of broadcast or reduce."
        shape = broadcast.shape
        assert isinstance(shape, ArrayShape)
        if shape.rank - 1 in (broadcast.attr("dimensions") or ()):
            return "Broadcast is not along the reduction dimension."
        producer = reduce.operands[0].owner
        while self.trivially_fusible(producer):
            producer = self.fusion_operand(producer)
        if not isinstance(producer, HloOp) or not has_default_layout(producer):
            return "Producer has non-default layout."
        lhs = root.operands[0].owner
        if not self.trivially_connected(producer, lhs):
            return "Producer is not trivially connected."
        if producer is not lhs and user_count(lhs) != 1:  # type: ignore[arg-type]
            return "Unsupported root-producer connection."
        return producer

    def reduction_refusal(self, reduce: HloOp) -> str:
        """XLA's ShouldFuseReduction: '' when the reduction may be fused."""
        if not self.supported(reduce):
            return "Reduction is not supported by Triton."
        dims = reduce.attr("dimensions") or ()
        rank = reduce.operands[0].type.data.rank  # type: ignore[attr-defined]
        if len(dims) != 1 or dims[0] != rank - 1:
            return ("The reductions in the diamond must reduce 1 dimension and that "
                    "dimension must be the last dimension of the operand.")  # fmt: skip
        identity = reduce.operands[1].owner
        ok = isinstance(identity, HloOp) and (
            identity.opcode == "constant"
            or (
                identity.opcode == "convert"
                and _opcode(identity.operands[0]) == "constant"
                and self.supported(identity)
            )  # fmt: skip
        )
        if not ok:
            return "Reduction identity is not a constant or a supported convert of a constant."
        return ""


def _opcode(value: Any) -> str:
    owner = value.owner
    return owner.opcode if isinstance(owner, HloOp) else ""
