"""The layout plan of one computation: a layout for every value and, per operand, the layout
its user needs (a `copy` goes where they differ, XLA's CopyOperandIfLayoutsDiffer).

Two sweeps over the instructions (block order is a topological order):
* backward: users ask their operands for layouts. Hard requests come from instructions that
  need a layout (convolutions, dots with batch dims, sort, fft, the pinned root,
  instructions we do not relayout); soft ones are preferences (row reductions, a transpose
  of a dot made free). Requests pass through layout-following instructions (elementwise
  ops, transposes as permuted layouts, tuples element by element); the earliest user wins.
* forward: each value takes its hard request, else the layout its operands give it
  (elementwise ops follow their first operand that is not a broadcast or constant,
  transposes and reductions keep the memory order), else its soft request, else the default.

Choices per convolution/dot (`Choices`) let a strategy try other plans than XLA's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from hlopass.dialects.hlo import ComputationOp, HloOp, ReturnOp
from hlopass.ir.shape import ArrayShape, Shape, TupleShape

from . import rules
from .layouts import (
    M2M,
    broadcast_operand_layout,
    default_m2m,
    from_major_to_minor,
    m2m_of,
    reduce_result_layout,
    reshape_is_bitcast,
    row_reduction_operand_layout,
    same_layout,
    transpose_is_bitcast,
    transpose_operand_for_bitcast,
    transpose_result_for_bitcast,
    value_shape,
    with_default,
    with_m2m,
)

# Instructions whose array operands of the result's rank share the result's layout.
FOLLOW = frozenset({
    "copy", "reverse", "slice", "dynamic-slice", "dynamic-update-slice", "concatenate", "pad",
    "map", "select-and-scatter", "all-reduce", "reduce-precision", "collective-permute",
})  # fmt: skip
CHEAP = frozenset({"broadcast", "constant", "iota"})
"""Producers re-created with another layout rather than copied."""
SOURCES = frozenset({"iota", "constant", "rng", "broadcast"})
RELAYOUTABLE = SOURCES | {"transpose", "reduce"}
"""Besides layout-following ops, what may take any layout a user asks for (a bitcast, a
custom-call or a while loop may not: their meaning or callee depends on their layouts)."""
MAJOR_DIM_COLLECTIVES = {"all-gather": "dimensions", "reduce-scatter": "dimensions",
                         "all-to-all": "dimensions", "ragged-all-to-all": None}  # fmt: skip
"""Collectives XLA:GPU runs only with one dim most major: the one their attribute names
(ragged-all-to-all: always dim 0)."""


@dataclass
class Choices:
    """What the strategy decides: a plan name per convolution or dot (by instruction name)."""

    device: str = "h100_sxm"
    per_op: dict[str, str] = field(default_factory=dict)
    forced: dict[str, tuple[M2M | None, M2M | None, M2M | None]] = field(default_factory=dict)
    """Explicit (lhs, rhs, result) layouts per instruction name (e.g. another compiler's plan)."""
    pack_k: bool = False
    """Sub-byte dot operands with their contracting dims minor (see `rules.dot_operand_layout`)."""

    def of(self, op: HloOp) -> str:
        return self.per_op.get(op.inst_name, "xla")


@dataclass
class Plan:
    """Result shape of each instruction, and the shape each (user, operand index) needs."""

    shapes: dict[HloOp, Shape] = field(default_factory=dict)
    needs: dict[tuple[Operation, int], Shape] = field(default_factory=dict)


def is_follow(op: HloOp) -> bool:
    if op.opcode in FOLLOW or "elementwise" in op.spec.traits:
        return True
    if op.opcode == "reduce-window":
        return len(op.operands) == 2
    if op.opcode == "bitcast-convert":
        src = value_shape(op.operands[0])
        return isinstance(src, ArrayShape) and src.rank == op.shape.rank  # type: ignore[attr-defined]
    return False


def data_operands(op: HloOp) -> list[int]:
    """Operands that share the result's layout: arrays of the result's rank."""
    shape = op.shape
    if not isinstance(shape, ArrayShape) or shape.rank == 0:
        return []
    return [
        i
        for i, v in enumerate(op.operands)
        if isinstance(value_shape(v), ArrayShape) and value_shape(v).rank == shape.rank  # type: ignore[attr-defined]
    ]


def producer(v: SSAValue) -> HloOp | None:
    return v.owner if isinstance(v.owner, HloOp) else None


def _relabel(shape: Shape, m2m: M2M) -> Shape:
    assert isinstance(shape, ArrayShape)
    return with_m2m(shape, m2m)


class Planner:
    """Plans the layouts of one computation (see the module docstring)."""

    def __init__(self, comp: ComputationOp, choices: Choices,
                 params: dict[int, Shape] | None, root: Shape | None):  # fmt: skip
        self.comp = comp
        self.choices = choices
        self.pinned_params = params
        self.pinned_root = root
        self.ops: list[HloOp] = list(comp.instructions)
        self.hard: dict[HloOp, Shape] = {}
        self.soft: dict[HloOp, Shape] = {}
        self.plan = Plan()

    # --- backward: requests ----------------------------------------------------------------

    def ask(self, v: SSAValue, shape: Shape | None, hard: bool) -> None:
        p = producer(v)
        if p is None or shape is None:
            return
        (self.hard if hard else self.soft)[p] = shape

    def ask_m2m(self, v: SSAValue, m2m: M2M | None, hard: bool) -> None:
        s = value_shape(v)
        if m2m is None or not isinstance(s, ArrayShape) or len(m2m) != s.rank:
            return
        self.ask(v, with_m2m(s, m2m), hard)

    def backward(self) -> None:
        if self.pinned_root is not None:
            self.ask(self.comp.root.result, self.pinned_root, True)
        for op in reversed(self.ops):
            self.request_operands(op)

    def wanted(self, op: HloOp) -> tuple[Shape | None, bool]:
        if op in self.hard:
            return self.hard[op], True
        return self.soft.get(op), False

    def request_operands(self, op: HloOp) -> None:
        opc = op.opcode
        want, hard = self.wanted(op)
        if opc == "convolution":
            if self.choices.of(op) != "keep" or op.inst_name in self.choices.forced:
                c = self.conv_layouts(op)
                self.ask_m2m(op.operands[0], c.input, True)
                self.ask_m2m(op.operands[1], c.kernel, True)
            return
        if opc == "dot":
            if self.choices.of(op) != "keep" or op.inst_name in self.choices.forced:
                for i in (0, 1):
                    self.ask_m2m(op.operands[i], self.dot_operand(op, i), True)
            return
        fixed = rules.fixed_layouts(op, self.choices.device)
        if fixed is not None:
            for i, s in fixed.operands.items():
                self.ask(op.operands[i], s, True)
            return
        if opc == "transpose":
            self.request_through_transpose(op, want, hard)
            return
        if opc == "reshape":
            src = value_shape(op.operands[0])
            if (isinstance(want, ArrayShape) and isinstance(src, ArrayShape)
                    and reshape_is_bitcast(with_default(src), want)):  # type: ignore[arg-type]  # fmt: skip
                self.ask_m2m(op.operands[0], default_m2m(src.rank), hard)
            return
        if opc == "broadcast":
            if isinstance(want, ArrayShape):
                dims = op.attr("dimensions") or ()
                self.ask_m2m(op.operands[0], broadcast_operand_layout(m2m_of(want), dims), False)
            return
        if opc == "reduce":
            self.request_row_reduction(op)
            return
        if opc == "tuple":
            if isinstance(want, TupleShape):
                for v, s in zip(op.operands, want.elements, strict=True):
                    self.ask(v, s, hard)
            return
        if opc == "get-tuple-element" or opc == "parameter":
            return
        if is_follow(op):
            if isinstance(want, ArrayShape):
                for i in data_operands(op):
                    self.ask_m2m(op.operands[i], m2m_of(want), hard)
            return
        if op.opcode in MAJOR_DIM_COLLECTIVES:
            return
        # anything else keeps its operands' layouts as they are
        for v in op.operands:
            self.ask(v, value_shape(v), True)

    def request_row_reduction(self, op: HloOp) -> None:
        src = value_shape(op.operands[0])
        if not isinstance(src, ArrayShape):
            return
        dims = tuple(op.attr("dimensions") or ())
        size = 1
        for d in dims:
            size *= src.dims[d]
        if size < rules.ROW_REDUCTION_MIN or not dims or len(dims) == src.rank:
            return
        # XLA passes a reduce's result layout to its operand only for an array result of
        # rank 2 or more (PropagateBufferConstraintToOperands stops at IsAtMostRank1, and
        # ChooseOperandLayoutFromOutputLayout takes no tuple-shaped, variadic reduce)
        if src.rank - len(dims) <= 1 or len(op.operands) > 2:
            return
        want, hard = self.wanted(op)
        # a reduce whose layout is fixed (XLA: constrained before its operand) passes the
        # row layout on as a constraint; otherwise it is a preference
        hard = hard and isinstance(want, ArrayShape)
        out = m2m_of(want) if hard else default_m2m(src.rank - len(dims))  # type: ignore[arg-type]
        m2m = row_reduction_operand_layout(out, src.rank, dims)
        self.ask_m2m(op.operands[0], m2m, hard)

    def request_through_transpose(self, op: HloOp, want: Shape | None, hard: bool) -> None:
        """Ask the operand for the layout that makes the transpose a bitcast. A dot used only
        by the transpose must take it (XLA's transpose-of-dot constraint, when the dot can
        produce it); for an operand with other users it is only a preference, so that a
        user needing the operand as it is wins and the transpose moves the data."""
        src = op.operands[0]
        perm = op.attr("dimensions")
        out = m2m_of(want) if isinstance(want, ArrayShape) else default_m2m(op.shape.rank)  # type: ignore[attr-defined]
        m2m = transpose_operand_for_bitcast(out, perm)
        p = producer(src)
        single = src.has_one_use()
        if p is not None and p.opcode == "dot" and single:
            # XLA's constraint takes the transpose's result as default, whatever is wanted
            of_dot = transpose_operand_for_bitcast(default_m2m(len(perm)), perm)
            if rules.dot_can_produce(p, of_dot):
                self.ask_m2m(src, of_dot, True)
                return
        self.ask_m2m(src, m2m, hard and single)

    # --- forward: choices -------------------------------------------------------------------

    def shape_of(self, v: SSAValue) -> Shape:
        p = producer(v)
        if p is not None and p in self.plan.shapes:
            return self.plan.shapes[p]
        return value_shape(v)

    def need(self, op: Operation, i: int, shape: Shape) -> None:
        self.plan.needs[(op, i)] = shape
        v = op.operands[i]
        p = producer(v)
        if p is None or same_layout(self.shape_of(v), shape):
            return
        # a broadcast/constant/iota used once takes the layout instead of being copied
        if p.opcode in CHEAP and p.result.has_one_use() and isinstance(shape, ArrayShape):
            self.plan.shapes[p] = shape

    def need_m2m(self, op: HloOp, i: int, m2m: M2M) -> None:
        s = value_shape(op.operands[i])
        if isinstance(s, ArrayShape) and s.rank == len(m2m):
            self.need(op, i, with_m2m(s, m2m))

    def forward(self) -> None:
        for op in self.ops:
            shape = self.choose(op)
            self.plan.shapes[op] = shape
            self.operand_needs(op, shape)
        if self.pinned_root is not None:
            ret = self.comp.body.block.last_op
            assert isinstance(ret, ReturnOp)
            self.need(ret, 0, self.pinned_root)

    def choose(self, op: HloOp) -> Shape:
        opc = op.opcode
        current = op.shape
        want, hard = self.wanted(op)
        if opc == "parameter":
            if self.pinned_params is not None and op.attr("number") in self.pinned_params:
                return self.pinned_params[op.attr("number")]
            return want if want is not None else current  # free (no layout given)
        if not isinstance(current, ArrayShape) and opc not in (
            "tuple",
            "get-tuple-element",
            "reduce",
        ):
            fixed = rules.fixed_layouts(op, self.choices.device)
            return fixed.result if fixed is not None and fixed.result is not None else current
        if isinstance(current, ArrayShape) and (
            current.rank == 0 or current.element_type in ("token", "opaque")
        ):
            return current
        if opc == "convolution":
            return _relabel(current, self.conv_layouts(op).output)
        if opc == "dot":
            return self.choose_dot(op, want)
        fixed = rules.fixed_layouts(op, self.choices.device)
        if fixed is not None and fixed.result is not None:
            return fixed.result
        if opc == "tuple":
            if hard and isinstance(want, TupleShape):
                return want
            return TupleShape(tuple(self.shape_of(v) for v in op.operands))
        if opc == "get-tuple-element":
            src = self.shape_of(op.operands[0])
            return src.elements[op.attr("index")] if isinstance(src, TupleShape) else current
        if opc == "reshape":
            return self.choose_reshape(op, want)
        root_pin = opc == "transpose" and op is self.comp.root and self.pinned_root is not None
        # XLA makes every transpose a bitcast: a pinned root is the weaker constraint (a copy
        # follows the transpose), a user's is the stronger (its operand is copied)
        if hard and want is not None and (opc in RELAYOUTABLE or is_follow(op)) and not root_pin:
            return want
        if opc == "transpose":
            src = self.shape_of(op.operands[0])
            assert isinstance(src, ArrayShape)
            return _relabel(
                current, transpose_result_for_bitcast(m2m_of(src), op.attr("dimensions"))
            )
        if opc == "reduce":
            return self.choose_reduce(op)
        if opc in MAJOR_DIM_COLLECTIVES:
            attr = MAJOR_DIM_COLLECTIVES[opc]
            dims = (op.attr(attr) if attr else None) or (0,)
            assert isinstance(current, ArrayShape)
            rest = [d for d in range(current.rank) if d != dims[0]]
            return with_m2m(current, tuple(reversed([dims[0], *rest])))
        if is_follow(op):
            m2m = self.follow_layout(op)
            if m2m is not None:
                return _relabel(current, m2m)
            return want if want is not None else with_default(current)
        if opc in SOURCES:
            return want if want is not None else with_default(current)
        return current  # instructions we do not relayout

    def follow_layout(self, op: HloOp) -> M2M | None:
        cheap_m2m = None
        for i in data_operands(op):
            p = producer(op.operands[i])
            s = self.shape_of(op.operands[i])
            assert isinstance(s, ArrayShape)
            if p is not None and p.opcode in CHEAP:
                cheap_m2m = cheap_m2m or m2m_of(s)
                continue
            return m2m_of(s)
        want, _ = self.wanted(op)
        return None if want is not None else cheap_m2m

    def choose_dot(self, op: HloOp, want: Shape | None) -> Shape:
        current = op.shape
        assert isinstance(current, ArrayShape)
        soft = self.soft.get(op)
        forced = self.choices.forced.get(op.inst_name)
        if forced is not None and forced[2] is not None:
            return with_m2m(current, forced[2])
        if self.choices.of(op) == "swap-output":
            b, lf, rf = rules.dot_output_groups(op)
            return with_m2m(current, from_major_to_minor([*b, *rf, *lf]))
        for cand in (want, soft):
            if isinstance(cand, ArrayShape) and rules.dot_can_produce(op, m2m_of(cand)):
                return cand
        return with_default(current)

    def choose_reshape(self, op: HloOp, want: Shape | None) -> Shape:
        src = self.shape_of(op.operands[0])
        current = op.shape
        assert isinstance(src, ArrayShape) and isinstance(current, ArrayShape)
        for cand in (want, with_default(current)):
            if isinstance(cand, ArrayShape) and reshape_is_bitcast(src, cand):
                return cand
        return with_default(current)  # its operand is copied to the default layout

    def choose_reduce(self, op: HloOp) -> Shape:
        src = self.shape_of(op.operands[0])
        assert isinstance(src, ArrayShape)
        m2m = reduce_result_layout(m2m_of(src), op.attr("dimensions") or ())
        current = op.shape
        if isinstance(current, TupleShape):
            return TupleShape(tuple(_relabel(e, m2m) for e in current.elements))
        return _relabel(current, m2m)

    def dot_operand(self, op: HloOp, i: int) -> M2M | None:
        forced = self.choices.forced.get(op.inst_name)
        if forced is not None and forced[i] is not None:
            return forced[i]
        if self.choices.of(op) == "row-major":
            shape = value_shape(op.operands[i])
            side = rules.dot_sides(op)[i]
            m2m = default_m2m(shape.rank)  # type: ignore[attr-defined]
            if rules.matrix_layout_ok(shape, m2m, (side.batch, side.contracting, side.free)):  # type: ignore[arg-type]
                return m2m
        existing = self.existing_layout(op.operands[i])
        return rules.dot_operand_layout(op, i, self.choices.device, existing, self.choices.pack_k)

    def existing_layout(self, v: SSAValue) -> M2M | None:
        """The layout `v` has before any is chosen: a parameter's, where the computation
        fixes it (XLA clears every other layout before it assigns)."""
        p = producer(v)
        if p is None or p.opcode != "parameter" or self.pinned_params is None:
            return None
        s = self.pinned_params.get(p.attr("number"))
        return m2m_of(s) if isinstance(s, ArrayShape) else None

    def conv_layouts(self, op: HloOp) -> rules.ConvLayouts:
        forced = self.choices.forced.get(op.inst_name)
        if forced is not None and None not in forced:
            return rules.ConvLayouts(*forced)  # type: ignore[arg-type]
        choice = self.choices.of(op)
        if choice == "keep":
            lhs, rhs = self.shape_of(op.operands[0]), self.shape_of(op.operands[1])
            return rules.conv_keep(op, lhs, rhs)  # type: ignore[arg-type]
        return rules.conv_layouts(op, self.choices.device, choice)

    def operand_needs(self, op: HloOp, shape: Shape) -> None:
        opc = op.opcode
        if opc == "convolution":
            c = self.conv_layouts(op)
            self.need_m2m(op, 0, c.input)
            self.need_m2m(op, 1, c.kernel)
            return
        if opc == "dot":
            keep = self.choices.of(op) == "keep" and op.inst_name not in self.choices.forced
            for i in (0, 1):
                if keep and self.gemm_can_read(op, i):
                    continue  # "no copies": the operand as it comes, when a gemm can read it
                m2m = self.dot_operand(op, i)
                if m2m is not None:
                    self.need_m2m(op, i, m2m)
            return
        fixed = rules.fixed_layouts(op, self.choices.device)
        if fixed is not None:
            for i, s in fixed.operands.items():
                self.need(op, i, s)
            return
        if opc == "reshape":
            src = self.shape_of(op.operands[0])
            if isinstance(src, ArrayShape) and not reshape_is_bitcast(src, shape):  # type: ignore[arg-type]
                self.need(op, 0, with_default(src))
            return
        if opc == "transpose" and isinstance(shape, ArrayShape):
            src = self.shape_of(op.operands[0])
            perm = op.attr("dimensions")
            assert isinstance(src, ArrayShape)
            # a backend constraint of a user (sort, TopK, ...) outranks the operand's layout in
            # XLA: the transpose stays a bitcast and its operand is copied
            if not transpose_is_bitcast(src, shape, perm) and self.fixed_user(op):
                self.need_m2m(op, 0, transpose_operand_for_bitcast(m2m_of(shape), perm))
            return
        if opc in ("transpose", "broadcast", "get-tuple-element", "parameter"):
            return
        if opc == "tuple":
            if isinstance(shape, TupleShape):
                for i in range(len(op.operands)):
                    self.need(op, i, shape.elements[i])
            return
        if opc == "reduce":
            n = len(op.operands) // 2
            first = self.shape_of(op.operands[0])
            for i in range(1, n):
                self.need_m2m(op, i, m2m_of(first))  # type: ignore[arg-type]
            return
        if opc in MAJOR_DIM_COLLECTIVES and isinstance(shape, ArrayShape):
            for i in data_operands(op):
                self.need_m2m(op, i, m2m_of(shape))
            return
        if is_follow(op) and isinstance(shape, ArrayShape):
            for i in data_operands(op):
                self.need_m2m(op, i, m2m_of(shape))
            return
        if opc in SOURCES:
            return
        for i, v in enumerate(op.operands):
            self.need(op, i, value_shape(v))

    def fixed_user(self, op: HloOp) -> bool:
        """Some user of `op` needs it in a layout of its own (`rules.fixed_layouts`)."""
        for use in op.result.uses:
            user = use.operation
            if isinstance(user, HloOp):
                fixed = rules.fixed_layouts(user, self.choices.device)
                if fixed is not None and use.index in fixed.operands:
                    return True
        return False

    def gemm_can_read(self, op: HloOp, i: int) -> bool:
        """The operand's planned layout is a valid matrix layout (XLA's MatrixLayout::For)."""
        s = self.shape_of(op.operands[i])
        side = rules.dot_sides(op)[i]
        if not isinstance(s, ArrayShape):
            return False
        groups = (side.batch, side.contracting, side.free)
        return rules.matrix_layout_ok(s, m2m_of(s), groups)

    def run(self) -> Plan:
        self.backward()
        self.forward()
        return self.plan
