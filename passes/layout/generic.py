"""`layout-assignment{target=generic}`: XLA's base LayoutAssignment (no backend constraints).

The layouts written on instructions bind nothing, except where XLA keeps them: the entry
computation layout (parameters always, the result through a copy at the root), infeed,
custom-calls with `operand_layout_constraints`, collectives with `constrain_layout`, and a
constant's literal when nothing else constrains it. Every other array gets its layout by
propagation, as XLA's pass does it: a worklist of buffer constraints (a value's layout) and
operand constraints (the layout a user wants for an operand), each mandatory or not. A
mandatory constraint replaces an earlier one, a non-mandatory one never does. Buffers left
unconstrained take the default layout one at a time, each propagated before the next. A
`copy` goes wherever an operand constraint differs from the operand's layout.

Computations are laid out callees first; a call, while or conditional then constrains its
operands and result to the callee's layouts, and a second round re-runs every computation
with the layouts the first round found (a while body's parameter taking its result's
layout). Fused computations take their fusion's operand and result layouts.
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue

from hlopass.dialects.hlo import (
    ATTR_CLASSES,
    ComputationOp,
    HloOp,
    ReturnOp,
    computations,
    create_op,
    entry_computation,
)
from hlopass.errors import HloError
from hlopass.ir.shape import ArrayShape, BufferShape, Shape, TupleShape, common_factors, subshape
from hlopass.rewriting import RewriteContext, TraceHook, run_patterns

from .apply import AssignPlannedLayout, CopyOperandIfLayoutsDiffer
from .engine import Plan
from .layouts import M2M, default_m2m, m2m_of, value_shape, with_m2m

Index = tuple[int, ...]
Buffer = tuple[HloOp, Index]
LeafLayouts = dict[Index, M2M]
"""The set layouts of a shape's array leaves, by index (a leaf missing is left free)."""

# XLA's InstructionCanChangeLayout: the instructions whose operands of the result's rank
# must share its layout (elementwise ops and the like).
KEEPS_LAYOUT = frozenset({
    "abs", "acos", "acosh", "asin", "asinh", "add", "add-dependency", "and", "atan2",
    "atanh", "bitcast-convert", "ceil", "clamp", "count-leading-zeros", "compare",
    "complex", "concatenate", "convert", "cosine", "cosh", "all-gather", "all-gather-start",
    "all-gather-done", "all-to-all", "collective-broadcast", "collective-permute", "divide",
    "dynamic-slice", "dynamic-update-slice", "erf", "exponential", "exponential-minus-one",
    "fft", "floor", "imag", "is-finite", "log", "log-plus-one", "logistic", "map", "maximum",
    "minimum", "multiply", "mulhi", "negate", "not", "opt-barrier", "or", "xor", "pad",
    "power", "real", "reduce-precision", "reduce-window", "remainder", "reverse",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "scatter", "select",
    "select-and-scatter", "shift-left", "shift-right-arithmetic", "shift-right-logical",
    "sign", "sine", "sinh", "slice", "sort", "topk", "sqrt", "cbrt", "subtract",
    "stochastic-convert", "tan", "tanh", "popcnt", "triangular-solve", "cholesky", "while",
    "set-dimension-size", "all-reduce", "reduce-scatter", "all-reduce-start",
    "all-reduce-done", "ragged-all-to-all", "scan",
})  # fmt: skip
CALLERS = frozenset({"call", "while", "conditional"})


def can_change_layout(op: HloOp) -> bool:
    """XLA's InstructionCanChangeLayout: False where result and same-rank operands share."""
    if op.opcode == "custom-call":
        return op.attr("custom_call_target") != "LayoutConstraint"
    return op.opcode not in KEEPS_LAYOUT


def is_array(shape: Shape) -> bool:
    return isinstance(shape, ArrayShape) and shape.element_type not in ("token", "opaque")


def array_leaves(shape: Shape, prefix: Index = ()) -> list[tuple[Index, ArrayShape]]:
    if isinstance(shape, TupleShape):
        out: list[tuple[Index, ArrayShape]] = []
        for i, e in enumerate(shape.elements):
            out += array_leaves(e, (*prefix, i))
        return out
    if isinstance(shape, BufferShape):
        return [(prefix, shape.inner)]
    return [(prefix, shape)] if is_array(shape) else []  # type: ignore[list-item]


def at_most_rank1(shape: Shape) -> bool:
    return all(s.rank <= 1 for _, s in array_leaves(shape))


def leaf_layouts(shape: Shape) -> LeafLayouts:
    return {i: m2m_of(s) for i, s in array_leaves(shape)}


def with_leaf_layouts(shape: Shape, layouts: LeafLayouts, prefix: Index = ()) -> Shape:
    """`shape` with the leaves `layouts` names relaid out (the others as they are)."""
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(with_leaf_layouts(e, layouts, (*prefix, i))
                                for i, e in enumerate(shape.elements)))  # fmt: skip
    if isinstance(shape, BufferShape):
        m2m = layouts.get(prefix)
        return shape if m2m is None else BufferShape(with_m2m(shape.inner, m2m))
    m2m = layouts.get(prefix)
    if m2m is None or not is_array(shape):
        return shape
    assert isinstance(shape, ArrayShape)
    if shape.layout is not None and shape.layout.minor_to_major == m2m:
        return shape  # (its tiles, element size, memory space kept)
    return with_m2m(shape, m2m)


def producer(v: SSAValue) -> HloOp | None:
    return v.owner if isinstance(v.owner, HloOp) else None


# --- layouts that make a reshape a bitcast (XLA's ShapeUtil::AlignLayouts) -----------------


def align_layouts(src_dims: tuple[int, ...], src_m2m: M2M, dst_dims: tuple[int, ...]) -> M2M | None:
    """The layout of `dst_dims` that makes a reshape from `src_dims{src_m2m}` a bitcast,
    XLA's choice among them (size-1 dims most major); None when there is none."""
    if 1 in src_dims or 1 in dst_dims:
        keep_src = [d for d in range(len(src_dims)) if src_dims[d] != 1]
        renum = {d: k for k, d in enumerate(keep_src)}
        inner = align_layouts(tuple(src_dims[d] for d in keep_src),
                              tuple(renum[d] for d in src_m2m if d in renum),
                              tuple(d for d in dst_dims if d != 1))  # fmt: skip
        if inner is None:
            return None
        dim_map = [i for i, d in enumerate(dst_dims) if d != 1]
        out = [dim_map[d] for d in inner]
        out += [i for i in range(len(dst_dims) - 1, -1, -1) if dst_dims[i] == 1]
        return tuple(out)
    if not src_dims:
        return ()
    factors = common_factors(src_dims, dst_dims)
    to_factor = [0] * len(src_dims)
    for pos in range(len(factors) - 1):
        start, end = factors[pos][0], factors[pos + 1][0]
        physical = src_m2m.index(start)
        to_factor[start] = pos
        for i in range(start + 1, end):
            physical -= 1
            if physical < 0 or src_m2m[physical] != i:
                return None
            to_factor[i] = pos
    out: list[int] = []
    minor = 0
    while len(out) < len(dst_dims):
        f = to_factor[src_m2m[minor]]
        (s0, d0), (s1, d1) = factors[f], factors[f + 1]
        out += range(d1 - 1, d0 - 1, -1)
        minor += s1 - s0
    return tuple(out)


def true_rank(shape: ArrayShape) -> int:
    return sum(1 for d in shape.dims if d != 1)


def merely_degenerate(a: ArrayShape, b: ArrayShape) -> bool:
    """The reshape only inserts or deletes size-1 dims."""
    return tuple(d for d in a.dims if d != 1) == tuple(d for d in b.dims if d != 1)


def parse_aliasing(op: HloOp) -> list[tuple[Index, int, Index]]:
    """`output_to_operand_aliasing` as (output index, operand number, operand index)."""
    raw = op.attr("output_to_operand_aliasing")
    if raw is None:
        return []
    text = getattr(raw, "text", str(raw))
    out = []
    for m in re.finditer(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}", text):
        idx = tuple(int(x) for x in m.group(1).replace(" ", "").split(",") if x)
        oidx = tuple(int(x) for x in m.group(3).replace(" ", "").split(",") if x)
        out.append((idx, int(m.group(2)), oidx))
    return out


# --- one computation --------------------------------------------------------------------------


@dataclass
class Constraint:
    layout: M2M | Shape
    mandatory: bool
    dfs: bool


@dataclass
class ComputationLayout:
    """Set leaf layouts of each parameter and of the result (a missing leaf is free)."""

    params: list[LeafLayouts]
    result: LeafLayouts


class Solver:
    """XLA's constraint propagation over one computation (see the module docstring)."""

    def __init__(self, comp: ComputationOp, layout: ComputationLayout,
                 callee: dict[str, ComputationLayout], pin_params: bool, pin_result: bool):  # fmt: skip
        self.comp = comp
        self.layout = layout
        self.callee = callee
        self.pin_params = pin_params
        self.pin_result = pin_result
        self.ops: list[HloOp] = list(comp.instructions)
        self.points_to: dict[HloOp, dict[Index, list[Buffer]]] = {}
        self.aliases: dict[Buffer, list[HloOp]] = {}
        self.unconstrained: dict[Buffer, None] = {}
        self.buffers: dict[Buffer, Constraint] = {}
        self.operands: dict[tuple[HloOp, int], Constraint] = {}
        self.added: list[tuple[str, object, bool]] = []
        for op in self.ops:
            pts = compute_points_to(op, self.points_to)
            self.points_to[op] = pts
            for bufs in pts.values():
                for b in bufs:
                    if b[0] is op:
                        self.unconstrained[b] = None
            top = pts.get(())
            if top is not None and (is_array(op.shape) or isinstance(op.shape, BufferShape)):
                for b in top:
                    self.aliases.setdefault(b, []).append(op)

    # --- recording constraints ----------------------------------------------------------

    def push(self, kind: str, key: object, dfs: bool) -> None:
        self.added.append((kind, key, dfs))

    def set_buffer(self, m2m: M2M, buf: Buffer, mandatory: bool, dfs: bool = True) -> None:
        self.unconstrained.pop(buf, None)
        cur = self.buffers.get(buf)
        op, idx = buf
        if cur is None:
            self.buffers[buf] = Constraint(m2m, mandatory, dfs)
        elif cur.layout == m2m:
            change = (mandatory and not cur.mandatory) or (dfs and not cur.dfs)
            cur.mandatory |= mandatory
            cur.dfs |= dfs
            if not change or len(m2m) <= 1:
                return
        else:
            if not mandatory:
                return  # equal priorities: only a mandatory constraint replaces another
            self.buffers[buf] = Constraint(m2m, mandatory, dfs)
        self.push("buffer", buf, dfs)
        if op.opcode in ("custom-call", "fusion", "call"):
            for out_idx, k, k_idx in parse_aliasing(op):
                if out_idx == idx and not k_idx:
                    s = value_shape(op.operands[k])
                    if isinstance(s, (ArrayShape, BufferShape)):
                        self.set_operand(with_leaf_layouts(s, {(): m2m}), op, k, mandatory, dfs)

    def set_operand(self, shape: Shape, op: HloOp, k: int, mandatory: bool = True,
                    dfs: bool = True) -> None:  # fmt: skip
        if isinstance(shape, ArrayShape) and shape.rank == 0:
            return
        if op.opcode == "dynamic-update-slice" and k > 0 and not mandatory:
            dfs = False
        elif op.opcode == "reshape" and not mandatory:
            p = producer(op.operands[0])
            if p is not None and p.opcode == "dynamic-slice":
                dfs = False
        cur = self.operands.get((op, k))
        if cur is not None:
            assert isinstance(cur.layout, Shape)
            if leaf_layouts(cur.layout) == leaf_layouts(shape):
                return
            if not mandatory:
                return
        self.operands[(op, k)] = Constraint(shape, mandatory, dfs)
        self.push("operand", (op, k), dfs)

    def set_array_operand(self, m2m: M2M, op: HloOp, k: int, mandatory: bool, dfs: bool) -> None:
        s = value_shape(op.operands[k])
        if isinstance(s, BufferShape):
            s = s.inner
        if not is_array(s) or len(m2m) != s.rank:  # type: ignore[attr-defined]
            return
        self.set_operand(with_m2m(s, m2m), op, k, mandatory, dfs)  # type: ignore[arg-type]

    def set_instruction(self, shape: Shape, op: HloOp, mandatory: bool = True,
                        dfs: bool = True) -> None:  # fmt: skip
        """XLA's SetInstructionLayout: each leaf's buffer, and (for an array result of an
        instruction that keeps layouts) the operands of its rank."""
        pts = self.points_to[op]
        for idx, leaf in array_leaves(shape):
            bufs = pts.get(idx)
            if bufs:
                self.set_buffer(m2m_of(leaf), bufs[0], mandatory, dfs)
        if (isinstance(shape, ArrayShape) and op.opcode not in ("while", "conditional")
                and not can_change_layout(op)):  # fmt: skip
            for k, v in enumerate(op.operands):
                s = value_shape(v)
                if is_array(s) and s.rank == shape.rank:  # type: ignore[attr-defined]
                    self.set_operand(with_m2m(s, m2m_of(shape)), op, k, mandatory, dfs)  # type: ignore[arg-type]

    def use_to_defs(self, shape: Shape, v: SSAValue) -> None:
        """XLA's PropagateUseConstraintToDefs: the buffers `v` may hold, non-mandatory."""
        p = producer(v)
        if p is None:
            return
        for idx, bufs in self.points_to[p].items():
            leaf = subshape_or_none(shape, idx)
            if leaf is None:
                continue
            for b in bufs:
                if b[0].opcode == "reduce" and isinstance(b[0].shape, TupleShape):
                    continue
                self.set_buffer(m2m_of(leaf), b, False, True)

    # --- mandatory constraints ----------------------------------------------------------

    def add_mandatory(self) -> None:
        for op in self.ops:
            opc = op.opcode
            if opc == "infeed":
                self.set_instruction(op.shape, op)
            elif opc == "outfeed":
                self.set_operand(value_shape(op.operands[0]), op, 0)
            elif opc == "parameter" and self.pin_params:
                n = op.attr("number")
                layouts = self.layout.params[n] if n < len(self.layout.params) else {}
                if layouts:
                    self.set_instruction(with_leaf_layouts(op.shape, layouts), op)
            elif opc in ("all-reduce", "all-to-all") and op.attr("constrain_layout"):
                self.set_instruction(op.shape, op)
                for k in range(len(op.operands)):
                    s = op.shape.elements[k] if isinstance(op.shape, TupleShape) else op.shape
                    self.set_operand(s, op, k)
        for op in self.ops:
            if op.opcode in CALLERS:
                self.add_call_constraints(op)
        if self.pin_result and self.layout.result:
            self.push("result", None, True)

    def add_call_constraints(self, op: HloOp) -> None:
        names = op.callees()
        if op.opcode == "while":
            body = self.callee.get(op.attr("body"))
            if body is None:
                return
            res = with_leaf_layouts(op.shape, body.result)
            self.set_operand(res, op, 0)
            self.set_instruction(res, op)
            return
        if op.opcode == "call":
            cl = self.callee.get(names[0])
            if cl is None:
                return
            self.set_instruction(with_leaf_layouts(op.shape, cl.result), op)
            for k, v in enumerate(op.operands):
                self.set_operand(with_leaf_layouts(value_shape(v), cl.params[k]), op, k)
            return
        # conditional: every branch as the largest one (most instructions)
        layouts = [self.callee.get(n) for n in names]
        if any(cl is None for cl in layouts):
            return
        best = largest_branch(self.comp, op, names)
        cl = layouts[best]
        assert cl is not None
        for k, bl in enumerate(layouts):
            assert bl is not None
            v = op.operands[k + 1]
            if bl.result == cl.result:
                self.set_operand(with_leaf_layouts(value_shape(v), bl.params[0]), op, k + 1)
        v = op.operands[best + 1]
        self.set_operand(with_leaf_layouts(value_shape(v), cl.params[0]), op, best + 1)
        self.set_instruction(with_leaf_layouts(op.shape, cl.result), op)

    def add_custom_call_constraints(self) -> None:
        for op in self.ops:
            if op.opcode != "custom-call" or op.attr("operand_layout_constraints") is None:
                continue
            self.set_instruction(op.shape, op)
            for k, s in enumerate(op.attr("operand_layout_constraints")):
                self.set_operand(s, op, k)
                p = producer(op.operands[k])
                if p is not None and p.opcode == "copy":  # (the copy's operand too)
                    self.set_operand(s, p, 0)

    # --- propagation --------------------------------------------------------------------

    def propagate(self) -> None:
        work: deque[tuple[str, object]] = deque()

        def take() -> None:
            for kind, key, dfs in self.added:
                (work.appendleft if dfs else work.append)((kind, key))
            self.added.clear()

        take()
        while work:
            kind, key = work.popleft()
            if kind == "buffer":
                self.propagate_buffer(key)  # type: ignore[arg-type]
            elif kind == "operand":
                self.propagate_operand(key)  # type: ignore[arg-type]
            else:
                root_shape = with_leaf_layouts(self.comp.root.shape, self.layout.result)
                self.use_to_defs(only_leaves(root_shape, self.layout.result), self.comp.root.result)
            take()

    def propagate_buffer(self, buf: Buffer) -> None:
        op, idx = buf
        m2m = self.buffers[buf].layout
        assert isinstance(m2m, tuple)
        self.to_operands(op, idx, m2m)
        self.to_uses(buf, m2m)

    def to_operands(self, op: HloOp, idx: Index, m2m: M2M) -> None:
        if at_most_rank1(op.shape):
            return
        if op.opcode == "all-reduce":
            self.set_array_operand(m2m, op, 0 if len(op.operands) == 1 else idx[0], True, True)
            return
        for k, v in enumerate(op.operands):
            s = value_shape(v)
            if at_most_rank1(s):
                continue
            if not can_change_layout(op):
                if is_array(s) and s.rank == len(m2m):  # type: ignore[attr-defined]
                    self.set_array_operand(m2m, op, k, True, True)
                elif op.opcode == "bitcast-convert" and is_array(s):
                    self.set_array_operand(bitcast_convert_operand(op, m2m), op, k, True, True)
            elif op.opcode == "broadcast":
                dims = tuple(op.attr("dimensions") or ())
                where = {out: i for i, out in enumerate(dims)}
                lay = tuple(where[d] for d in m2m if d in where)
                self.set_array_operand(lay, op, k, True, False)
            else:
                if idx or not is_array(s):
                    continue
                lay = operand_from_output(m2m, op, k)
                if lay is not None:
                    self.set_array_operand(lay, op, k, False, should_dfs(op))

    def to_uses(self, buf: Buffer, m2m: M2M) -> None:
        for alias in self.aliases.get(buf, []):
            for use in list(alias.result.uses):
                user = use.operation
                if not isinstance(user, HloOp):
                    continue
                if not self.forwarded(user, use.index):
                    self.set_array_operand(m2m, user, use.index, False, True)

    def forwarded(self, user: HloOp, k: int) -> bool:
        """XLA's AnyOperandBufferForwarded: a buffer of operand `k` is in the user's value."""
        p = producer(user.operands[k])
        if p is None:
            return False
        mine = {b for bs in self.points_to[user].values() for b in bs}
        return any(b in mine for bs in self.points_to[p].values() for b in bs)

    def propagate_operand(self, key: tuple[HloOp, int]) -> None:
        user, k = key
        c = self.operands[key]
        v = user.operands[k]
        s = value_shape(v)
        shape = c.layout
        assert isinstance(shape, Shape)
        if at_most_rank1(s):
            return
        self.use_to_defs(shape, v)
        if user.opcode == "custom-call":
            # the result buffer an operand aliases takes the operand's layout
            for out_idx, kk, _ in parse_aliasing(user):
                leaf = subshape_or_none(shape, ())
                if kk == k and leaf is not None and (user, out_idx) in self.own(user):
                    self.set_buffer(m2m_of(leaf), (user, out_idx), not can_change_layout(user),
                                    False)  # fmt: skip
                    break
        if not is_array(s) or is_constrained_collective(user):
            return
        m2m = m2m_of(shape)  # type: ignore[arg-type]
        if user.opcode == "all-reduce":
            idx: Index = () if len(user.operands) == 1 else (k,)
            self.set_buffer(m2m, (user, idx), True, True)
        if can_change_layout(user) and not is_array(user.shape) and user.opcode != "reduce":
            return
        if self.forwarded(user, k):
            return
        if s.rank <= 1:  # type: ignore[attr-defined]
            return
        if user.opcode == "reduce" or not can_change_layout(user):
            if user.opcode == "concatenate":
                dim = user.attr("dimensions")[0]
                for j, w in enumerate(user.operands):
                    if j != k and value_shape(w).dims[dim] > s.dims[dim]:  # type: ignore[attr-defined]
                        return
            for j, w in enumerate(user.operands):
                if j == k:
                    continue
                ws = value_shape(w)
                if is_array(ws) and ws.rank > 1 and ws.rank == s.rank:  # type: ignore[attr-defined]
                    self.set_array_operand(m2m, user, j, True, True)
            for idx, leaf in array_leaves(user.shape):
                if leaf.rank > 1 and leaf.rank == s.rank and (user, idx) in self.own(user):  # type: ignore[attr-defined]
                    self.set_buffer(m2m, (user, idx), True, True)
            return
        for idx, leaf in array_leaves(user.shape):
            if leaf.rank <= 1 or (user, idx) not in self.own(user):
                continue
            lay = output_from_operand(m2m, user, k)
            if lay is not None:
                forward = user.opcode in ("reduce", "transpose") or not can_change_layout(user)
                self.set_buffer(lay, (user, idx), forward, should_dfs(user))

    def own(self, op: HloOp) -> set[Buffer]:
        return {b for bs in self.points_to[op].values() for b in bs if b[0] is op}

    # --- defaults and the plan ----------------------------------------------------------

    def assign_unconstrained(self) -> None:
        while self.unconstrained:
            buf = next(iter(self.unconstrained))
            op, idx = buf
            leaf = subshape_or_none(op.shape, idx)
            assert leaf is not None
            # a constant keeps its literal's layout, anything else takes the default
            m2m = m2m_of(leaf) if op.opcode == "constant" else default_m2m(leaf.rank)
            self.set_buffer(m2m, buf, False)
            self.propagate()

    def run(self) -> None:
        for op in self.ops:
            if op.opcode == "bitcast":
                raise HloError(
                    f"Unexpected bitcast operation seen during layout assignment: %{op.inst_name}"
                )
        self.add_mandatory()
        self.add_custom_call_constraints()
        self.propagate()
        self.assign_unconstrained()

    def shapes(self) -> dict[HloOp, Shape]:
        out: dict[HloOp, Shape] = {}
        for op in self.ops:
            layouts: LeafLayouts = {}
            for idx, bufs in self.points_to[op].items():
                c = self.buffers.get(bufs[0]) if bufs else None
                if c is not None:
                    assert isinstance(c.layout, tuple)
                    layouts[idx] = c.layout
            out[op] = with_leaf_layouts(op.shape, layouts)
        return out

    def plan(self) -> Plan:
        plan = Plan(shapes=self.shapes())
        for (op, k), c in self.operands.items():
            assert isinstance(c.layout, Shape)
            v = op.operands[k]
            p = producer(v)
            have = plan.shapes.get(p, value_shape(v)) if p is not None else value_shape(v)
            plan.needs[(op, k)] = with_leaf_layouts(have, leaf_layouts(c.layout))
        if self.pin_result and self.result_complete():
            # (a partly set result is only propagated, never copied to: XLA's LayoutIsSet)
            ret = self.comp.body.block.last_op
            assert isinstance(ret, ReturnOp)
            root = plan.shapes[self.comp.root]
            plan.needs[(ret, 0)] = with_leaf_layouts(root, self.layout.result)
        return plan

    def computed_layout(self, plan: Plan) -> ComputationLayout:
        params = [{} for _ in self.comp.parameters()]
        for p in self.comp.parameters():
            params[p.attr("number")] = leaf_layouts(plan.shapes[p])
        root = plan.shapes[self.comp.root]
        result = leaf_layouts(root)
        if self.pin_result and self.result_complete():
            result.update(self.layout.result)
        return ComputationLayout(params, result)

    def result_complete(self) -> bool:
        return set(self.layout.result) == {i for i, _ in array_leaves(self.comp.root.shape)}


# --- points-to and the layout rules the solver applies (no solver state) ----------------------


def compute_points_to(
    op: HloOp, points_to: dict[HloOp, dict[Index, list[Buffer]]]
) -> dict[Index, list[Buffer]]:
    """The buffers each array leaf of `op` may hold (`points_to`: those of the ops before it):
    its own, or an operand's where `op` only forwards it (XLA's points-to analysis)."""
    if op.opcode == "tuple":
        out: dict[Index, list[Buffer]] = {}
        for k, v in enumerate(op.operands):
            p = producer(v)
            if p is None:
                continue
            for idx, bufs in points_to[p].items():
                out[(k, *idx)] = list(bufs)
        return out
    if op.opcode == "get-tuple-element":
        p = producer(op.operands[0])
        k = op.attr("index")
        if p is not None:
            return {idx[1:]: list(b) for idx, b in points_to[p].items() if idx[:1] == (k,)}
    own = {idx: [(op, idx)] for idx, _ in array_leaves(op.shape)}
    if op.opcode in ("async-start", "async-update"):
        # element {0} holds the operands themselves (XLA's points-to of async-start)
        for idx in [i for i in own if i[:1] == (0,)]:
            del own[idx]
        for k, v in enumerate(op.operands):
            p = producer(v)
            if p is not None and op.opcode == "async-start":
                for idx, bufs in points_to[p].items():
                    own[(0, k, *idx)] = list(bufs)
        if op.opcode == "async-update":
            p = producer(op.operands[0])
            if p is not None:
                return dict(points_to[p])
        return own
    if op.opcode == "async-done":
        p = producer(op.operands[0])
        if p is not None:
            return {idx[1:]: list(b) for idx, b in points_to[p].items() if idx[:1] == (1,)}
    return own


def largest_branch(comp: ComputationOp, op: HloOp, names: list[str]) -> int:
    """The conditional's branch with the most instructions (an empty tuple operand's never);
    the first branch when none has any."""
    module = comp.parent_op()
    sizes = {c.comp_name: len(list(c.instructions)) for c in computations(module)}  # type: ignore[arg-type]
    best, most = -1, 0
    for j, n in enumerate(names):
        s = value_shape(op.operands[j + 1])
        empty = isinstance(s, TupleShape) and not s.elements
        if sizes.get(n, 0) > most and not empty:
            best, most = j, sizes[n]
    return max(best, 0)


def operand_from_output(m2m: M2M, op: HloOp, k: int) -> M2M | None:
    """XLA's ChooseOperandLayoutFromOutputLayout."""
    s = value_shape(op.operands[k])
    out = op.shape
    if not isinstance(s, ArrayShape) or not isinstance(out, ArrayShape):
        return None
    if op.opcode == "reshape":
        if true_rank(s) == 1 and true_rank(out) == 1:
            return None
        return align_layouts(out.dims, m2m, s.dims)
    if op.opcode == "transpose":
        perm = op.attr("dimensions")
        return tuple(perm[d] for d in m2m)
    return None


def output_from_operand(m2m: M2M, user: HloOp, k: int) -> M2M | None:
    """XLA's ChooseOutputLayoutFromOperandLayout."""
    s = value_shape(user.operands[k])
    out = user.shape
    if user.opcode == "reduce" and isinstance(out, TupleShape):
        gone = set(user.attr("dimensions") or ())
        kept = [d for d in range(len(m2m)) if d not in gone]
        ren = {d: i for i, d in enumerate(kept)}
        return tuple(ren[d] for d in m2m if d in ren)
    if not isinstance(out, ArrayShape) or not isinstance(s, ArrayShape):
        return None
    if user.opcode == "reshape":
        if true_rank(s) == 1 and true_rank(out) == 1:
            return None
        return align_layouts(s.dims, m2m, out.dims)
    if user.opcode == "transpose":
        inverse = {p: j for j, p in enumerate(user.attr("dimensions"))}
        return tuple(inverse[d] for d in m2m)
    return None


def subshape_or_none(shape: Shape, idx: Index) -> ArrayShape | None:
    try:
        s = subshape(shape, idx)
    except (AssertionError, IndexError):
        return None
    if isinstance(s, BufferShape):
        return s.inner
    return s if is_array(s) else None  # type: ignore[return-value]


def only_leaves(shape: Shape, layouts: LeafLayouts) -> Shape:
    """Mark the leaves of `shape` that `layouts` does not set as free: for use_to_defs the
    result constraint names only the set ones (a free leaf is dropped to a token)."""
    if not layouts or set(layouts) == {i for i, _ in array_leaves(shape)}:
        return shape

    def walk(s: Shape, prefix: Index) -> Shape:
        if isinstance(s, TupleShape):
            return TupleShape(tuple(walk(e, (*prefix, i)) for i, e in enumerate(s.elements)))
        return s if prefix in layouts else ArrayShape("token")

    return walk(shape, ())


def is_constrained_collective(op: HloOp) -> bool:
    return op.opcode in ("all-reduce", "all-to-all") and bool(op.attr("constrain_layout"))


def should_dfs(op: HloOp) -> bool:
    """XLA's InstructionShouldPropagateDepthFirst."""
    if op.opcode in ("gather", "scatter", "transpose"):
        return True
    if op.opcode == "reshape":
        s, out = value_shape(op.operands[0]), op.shape
        assert isinstance(s, ArrayShape) and isinstance(out, ArrayShape)
        return s.rank == 1 or merely_degenerate(s, out)
    return False


def bitcast_convert_operand(op: HloOp, m2m: M2M) -> M2M:
    """The operand layout of a rank-changing bitcast-convert whose result has `m2m`: the
    extra (last) dim dropped from, or added most minor to, the result's layout."""
    s = value_shape(op.operands[0])
    out = op.shape
    assert isinstance(s, ArrayShape) and isinstance(out, ArrayShape)
    if s.rank < out.rank:
        gone = out.rank - 1
        return tuple(d for d in m2m if d != gone)
    return (s.rank - 1, *m2m)


# --- the module -------------------------------------------------------------------------------


@dataclass
class GenericAssignment:
    """Runs the solver over a module's computations, callees first, in two rounds."""

    module: ModuleOp
    unset: frozenset[str] = field(default_factory=frozenset)
    """Entry layouts left free: `p<N>` / `p<N>.<i>...` / `result` / `result.<i>...`."""

    reverse: bool = False
    """Lay out callers before callees, each callee taking its call site's layouts (XLA's
    reverse_computation_order)."""

    def entry_layout(self) -> ComputationLayout:
        entry = entry_computation(self.module)
        ecl = self.module.attributes.get("hlo.entry_computation_layout")
        if ecl is not None:
            stored: tuple[Shape, ...] = ecl.data  # type: ignore[attr-defined]
            param_shapes, result_shape = list(stored[:-1]), stored[-1]
        else:
            by_number = {p.attr("number"): p.shape for p in entry.parameters()}
            param_shapes = [by_number[i] for i in range(len(by_number))]
            result_shape = entry.root.shape
        params = [self.drop(leaf_layouts(s), f"p{n}") for n, s in enumerate(param_shapes)]
        return ComputationLayout(params, self.drop(leaf_layouts(result_shape), "result"))

    def drop(self, layouts: LeafLayouts, name: str) -> LeafLayouts:
        out = {}
        for idx, m2m in layouts.items():
            names = [name] + [
                name + "." + ".".join(map(str, idx[:n])) for n in range(1, len(idx) + 1)
            ]
            if not any(n in self.unset for n in names):
                out[idx] = m2m
        return out

    def order(self) -> tuple[list[ComputationOp], dict[str, HloOp]]:
        """Computations laid out by the solver, callees first; fused computations by fusion."""
        comps = {c.comp_name: c for c in computations(self.module)}
        fused: dict[str, HloOp] = {}
        seen: set[str] = set()
        out: list[ComputationOp] = []

        def visit(c: ComputationOp) -> None:
            if c.comp_name in seen:
                return
            seen.add(c.comp_name)
            for op in c.instructions:
                for name in op.callees():
                    callee = comps.get(name)
                    if callee is None:
                        continue
                    if op.opcode in ("fusion", "async-start"):
                        fused[name] = op
                        continue
                    if op.opcode in CALLERS:
                        visit(callee)
            out.append(c)

        visit(entry_computation(self.module))
        return out, fused

    def run(self) -> dict[ComputationOp, Plan]:
        entry = entry_computation(self.module)
        order, _ = self.order()
        entry_layout = self.entry_layout()
        found: dict[str, ComputationLayout] = {}
        plans: dict[ComputationOp, Plan] = {}
        mismatch: dict[str, LeafLayouts] = {}
        forced = self.entry_layout()
        if self.reverse:
            order = order[::-1]
        rnd = 0
        changed = True
        while changed or rnd < 2:
            changed = False
            round_found: dict[str, ComputationLayout] = {}
            from_callers: dict[str, ComputationLayout] = {}
            for comp in order:
                if comp is entry:
                    layout, pin = entry_layout, (True, True)
                elif comp.comp_name in from_callers:
                    layout, pin = from_callers[comp.comp_name], (True, True)
                elif rnd == 0:
                    layout, pin = ComputationLayout([], {}), (False, False)
                elif comp.comp_name in mismatch:
                    # a branch whose result differs from the largest branch's takes its
                    # result (through a copy), its parameter left free
                    layout = ComputationLayout([], mismatch[comp.comp_name])
                    pin = (False, True)
                else:
                    layout = found[comp.comp_name]
                    pin = (True, True)
                    layout = self.while_fixed(comp, layout, found)
                # callers first (reverse): a caller sees its callees' previous round
                solver = Solver(comp, layout, found if self.reverse else round_found, *pin)
                solver.run()
                plan = solver.plan()
                plans[comp] = plan
                round_found[comp.comp_name] = solver.computed_layout(plan)
                if self.reverse:
                    from_callers.update(callee_layouts_from(comp, plan))
            found = round_found
            mismatch = self.branch_mismatches(found)
            changed = self.resolve_aliasing(entry_layout, forced, plans[entry], entry)
            rnd += 1
            if rnd > 8:
                break
        return plans

    def resolve_aliasing(self, layout: ComputationLayout, forced: ComputationLayout,
                         plan: Plan, entry: ComputationOp) -> bool:  # fmt: skip
        """XLA's ResolveInputOutputAliasing: an aliased parameter and result leaf that came
        out in different layouts take one of them (the parameter's where it was given, else
        the result's) in both, for another round; True when any did."""
        raw = self.module.attributes.get("hlo.input_output_alias")
        if raw is None:
            return False
        text = getattr(raw.data, "text", str(raw.data))  # type: ignore[attr-defined]
        params = {p.attr("number"): p for p in entry.parameters()}
        changed = False
        for m in re.finditer(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}", text):
            out_idx = tuple(int(x) for x in m.group(1).replace(" ", "").split(",") if x)
            n = int(m.group(2))
            p_idx = tuple(int(x) for x in m.group(3).replace(" ", "").split(",") if x)
            param_forced = p_idx in forced.params[n]
            result_forced = out_idx in forced.result
            if param_forced and result_forced:
                continue
            got_p = leaf_layouts(plan.shapes[params[n]]).get(p_idx)
            got_r = leaf_layouts(plan.shapes[entry.root]).get(out_idx)
            if got_p is None or got_r is None or got_p == got_r:
                continue
            changed = True
            both = got_r if not param_forced else got_p
            layout.params[n][p_idx] = both
            layout.result[out_idx] = both
        return changed

    def branch_mismatches(self, found: dict[str, ComputationLayout]) -> dict[str, LeafLayouts]:
        """Per conditional, the branches whose result layout differs from the largest
        branch's (most instructions), with that branch's result layout."""
        sizes = {c.comp_name: len(list(c.instructions)) for c in computations(self.module)}
        out: dict[str, LeafLayouts] = {}
        for c in computations(self.module):
            for op in c.instructions:
                if op.opcode != "conditional":
                    continue
                names = op.callees()
                best, most = 0, 0
                for j, n in enumerate(names):
                    s = value_shape(op.operands[j + 1])
                    empty = isinstance(s, TupleShape) and not s.elements
                    if sizes.get(n, 0) > most and not empty:
                        best, most = j, sizes[n]
                want = found.get(names[best])
                if want is None:
                    continue
                for n in names:
                    got = found.get(n)
                    if got is not None and got.result != want.result:
                        out[n] = dict(want.result)
        return out

    def while_fixed(self, comp: ComputationOp, layout: ComputationLayout,
                    found: dict[str, ComputationLayout]) -> ComputationLayout:  # fmt: skip
        """A while body's (and condition's) parameter takes the body's result layout."""
        for c in computations(self.module):
            for op in c.instructions:
                if op.opcode != "while":
                    continue
                body = found.get(op.attr("body"))
                if body is None:
                    continue
                if comp.comp_name == op.attr("body"):
                    return ComputationLayout([dict(body.result)], layout.result)
                if comp.comp_name == op.attr("condition"):
                    return ComputationLayout([dict(body.result)], layout.result)
        return layout


def callee_layouts_from(comp: ComputationOp, plan: Plan) -> dict[str, ComputationLayout]:
    """XLA's CalculateComputationLayout in reverse order: each callee of a call, while or
    conditional in `comp` takes the layouts its call site got (operands as it reads them)."""

    def operand(op: HloOp, k: int) -> LeafLayouts:
        need = plan.needs.get((op, k))
        if need is None:
            p = producer(op.operands[k])
            need = plan.shapes.get(p, value_shape(op.operands[k])) if p is not None else None
        return leaf_layouts(need) if need is not None else {}

    out: dict[str, ComputationLayout] = {}
    for op in comp.instructions:
        result = leaf_layouts(plan.shapes.get(op, op.shape))
        if op.opcode == "call":
            ks = range(len(op.operands))
            out[op.attr("to_apply")] = ComputationLayout([operand(op, k) for k in ks], result)
        elif op.opcode == "conditional":
            for i, name in enumerate(op.callees()):
                out[name] = ComputationLayout([operand(op, i + 1)], result)
        elif op.opcode == "while":
            out[op.attr("body")] = ComputationLayout([operand(op, 0)], result)
            out[op.attr("condition")] = ComputationLayout([operand(op, 0)], {})
    return out


def fusion_layouts(fusion: HloOp, comp: ComputationOp) -> Plan:
    """XLA's SetFusionLayouts: fused parameters as the fusion's operands, the fused root as
    the fusion, get-tuple-elements as their operand; the rest keep their layouts."""
    plan = Plan()
    out = fusion.shape
    if fusion.opcode == "async-start":  # (its result {1} is the wrapped computation's)
        assert isinstance(out, TupleShape)
        out = out.elements[1]
    for op in comp.instructions:
        if op.opcode == "parameter":
            plan.shapes[op] = value_shape(fusion.operands[op.attr("number")])
        elif op is comp.root:
            plan.shapes[op] = out
        elif op.opcode == "get-tuple-element":
            src = plan.shapes.get(producer(op.operands[0]))  # type: ignore[arg-type]
            if isinstance(src, TupleShape):
                plan.shapes[op] = src.elements[op.attr("index")]
    return plan


def assign_generic(module: ModuleOp, unset: frozenset[str], trace: TraceHook | None,
                   reverse: bool = False) -> bool:  # fmt: skip
    """Plan every computation (`GenericAssignment`), then relayout and copy as planned; the
    entry computation layout records the layouts chosen for its free leaves."""
    rctx = RewriteContext.of(module, trace)
    changed = copy_aliased_operands(module, rctx)
    changed |= clone_shared_branches(module, rctx)
    assignment = GenericAssignment(module, unset, reverse)
    plans = assignment.run()
    _, fused = assignment.order()
    comps = {c.comp_name: c for c in computations(module)}
    done: set[str] = set()

    def apply(comp: ComputationOp, plan: Plan) -> None:
        nonlocal changed
        relayout = AssignPlannedLayout(rctx, plan)
        copies = GenericCopyOperandIfLayoutsDiffer(rctx, plan)
        run_patterns(module, [relayout], [comp])
        run_patterns(module, [copies], [comp])
        changed |= bool(relayout.done or copies.done)
        # fusions inside take their layouts from the fusion instruction, now final
        for op in list(comp.instructions):
            called = op.opcode in ("fusion", "async-start") and op.callees()
            name = op.callees()[0] if called else None
            if name is not None and name in comps and fused.get(name) is op and name not in done:
                done.add(name)
                apply(comps[name], fusion_layouts(op, comps[name]))

    for comp, plan in plans.items():
        apply(comp, plan)
    record_entry_layout(module, assignment)
    return changed


def copy_aliased_operands(module: ModuleOp, rctx: RewriteContext) -> bool:
    """XLA's PrepareHloForLayoutAssignment: a send's operand, and each operand a
    layout-constrained custom-call aliases to its output, is read through a copy (so that
    the constraint never has to move a buffer another instruction shares)."""
    changed = False
    for c in computations(module):
        for op in list(c.instructions):
            which: list[int] = []
            if op.opcode == "send":
                which = [0]
            elif op.opcode == "custom-call" and op.attr("operand_layout_constraints") is not None:
                which = sorted({k for _, k, _ in parse_aliasing(op)})
            for k in which:
                v = op.operands[k]
                copy = create_op("copy", [v], value_shape(v), rctx.names.fresh("copy"), {})
                block = op.parent_block()
                assert block is not None
                block.insert_op_before(copy, op)
                op.operands[k] = copy.result
                changed = True
    return changed


def clone_shared_branches(module: ModuleOp, rctx: RewriteContext) -> bool:
    """XLA's PrepareHloForLayoutAssignment: a branch computation with several callers gets
    a clone (`<name>.clone`) per conditional calling it (one caller, when all are
    conditionals, keeps the original), so that each call site's layouts are its own."""
    callers: dict[str, list[HloOp]] = {}
    for c in computations(module):
        for op in c.instructions:
            for name in dict.fromkeys(op.callees()):
                callers.setdefault(name, []).append(op)
    comps = {c.comp_name: c for c in computations(module)}
    changed = False
    for name, ops in callers.items():
        conds = [op for op in ops if op.opcode == "conditional"]
        if len(ops) <= 1 or not conds or name not in comps:
            continue
        for cond in conds[: len(conds) - 1 if len(conds) == len(ops) else len(conds)]:
            original = comps[name]
            clone = original.clone()
            clone.properties["sym_name"] = StringAttr(rctx.names.fresh(name + ".clone"))
            clone.properties.pop("is_entry", None)
            for op in clone.instructions:
                op.inst_name = rctx.names.fresh(op.inst_name)
            block = original.parent_block()
            assert block is not None
            block.insert_op_after(clone, original)
            for attr in ("true_computation", "false_computation"):
                if cond.attr(attr) == name:
                    cond.set_attr(attr, clone.comp_name)
            branches = cond.attr("branch_computations")
            if branches:
                cond.set_attr("branch_computations",
                              tuple(clone.comp_name if b == name else b for b in branches))  # fmt: skip
            changed = True
    return changed


def record_entry_layout(module: ModuleOp, assignment: GenericAssignment) -> None:
    """XLA's PropagateComputationLayouts: the free leaves of `entry_computation_layout`
    take the layouts the entry got; the set ones (memory spaces included) stay."""
    ecl = module.attributes.get("hlo.entry_computation_layout")
    if ecl is None:
        return
    stored: tuple[Shape, ...] = ecl.data  # type: ignore[attr-defined]
    entry = entry_computation(module)
    given = assignment.entry_layout()
    by_number = {p.attr("number"): p.shape for p in entry.parameters()}
    new: list[Shape] = []
    # a parameter or the result with any leaf free takes every leaf's computed layout
    # (memory spaces kept): XLA's PropagateComputationLayouts
    for n, s in enumerate(stored[:-1]):
        new.append(relaid(s, leaf_layouts(by_number[n]), given.params[n]))
    new.append(relaid(stored[-1], leaf_layouts(entry.root.shape), given.result))
    if tuple(new) != stored:
        module.attributes["hlo.entry_computation_layout"] = ATTR_CLASSES["shapes"].new(tuple(new))


def relaid(stored: Shape, got: LeafLayouts, given: LeafLayouts) -> Shape:
    """`stored` with the layouts `got` where `given` leaves any leaf free."""
    if set(given) == set(got):
        return stored

    def walk(s: Shape, prefix: Index) -> Shape:
        if isinstance(s, TupleShape):
            return TupleShape(tuple(walk(e, (*prefix, i)) for i, e in enumerate(s.elements)))
        m2m = got.get(prefix)
        if not isinstance(s, ArrayShape) or m2m is None or s.layout is None:
            return s
        return s.with_layout(dataclasses.replace(s.layout, minor_to_major=m2m))

    return walk(stored, ())


@dataclass
class GenericCopyOperandIfLayoutsDiffer(CopyOperandIfLayoutsDiffer):
    """`user(x{a})` where `user` needs `{b}` -> `user(copy(x){b})`, XLA's base pass's copy:
    a broadcast, iota or constant is copied too (not re-created), a tuple is copied
    element by element.

    Guards: the plan names a needed layout for that operand and it differs."""

    def converted(self, v: SSAValue, need: Shape, before: Operation) -> SSAValue:
        if isinstance(need, TupleShape):
            return super().converted(v, need, before)
        return self.insert("copy", [v], need, before).result
