"""Growing a GEMM fusion from its dot (XLA's FuseTowardOperands, FuseDotOperand,
FuseTowardUsers, FuseDotOutput): which instructions join, built into a new block.

Each of the dot's operands is grown breadth-first toward its producers while the tiling
propagates and XLA finds it worth it, with at most `MAX_PARAMS_PER_OPERAND` fusion
parameters (a node that would exceed it is retried after the others, then made a
parameter); within one operand's growth an instruction read with the same iteration spec
is one node. The dot's single user is then taken while it distributes over addition
(with broadcasts of scalars or parameters as its other operands).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from xdsl.ir import Block, SSAValue

from hlopass.dialects.hlo import HloOp, create_op
from hlopass.rewriting import claim_name, is_root

from .dim_order import DimOrder, combine
from .profit import profitable
from .propagate import DotProps, Orders, arr, propagate_with_requirements
from .support import unique_users

MAX_PARAMS_PER_OPERAND = 4
"""XLA's TritonFusionAnalysis::kMaxParameterPerDotOperand."""


@dataclass
class Build:
    """The fusion being built: its block, its operands (outer values, in parameter order)
    and the names already taken in the module."""

    names: set[str]
    cc: tuple[int, int]
    level: int
    pinned: frozenset[str] = frozenset()
    """Instructions with control edges (either end): never replaced by the fusion."""
    block: Block = field(default_factory=Block)
    inputs: list[SSAValue] = field(default_factory=list)
    members: list[HloOp] = field(default_factory=list)
    """The original instructions cloned into the fusion (the dot and output side too)."""
    _next: dict[str, int] = field(default_factory=dict)

    def name(self, base: str) -> str:
        return claim_name(base, self.names, self._next)

    def param(self, outer: SSAValue) -> SSAValue:
        n = len(self.inputs)
        self.inputs.append(outer)
        p = create_op("parameter", [], arr(outer), self.name(f"parameter_{n}"), {"number": n})
        self.block.add_op(p)
        return p.result

    def clone(self, op: HloOp, operands: list[SSAValue]) -> SSAValue:
        c = op.clone()
        c.operands = operands
        c.inst_name = self.name(op.inst_name)
        self.block.add_op(c)
        self.members.append(op)
        return c.result


def _added_params(op: HloOp) -> int:
    """XLA's NumAddedParameters: fusing `op` replaces one input by its operands."""
    if op.opcode == "parameter" or (op.opcode == "constant" and arr(op.result).rank > 0):
        return 0
    return len(op.operands) - 1


@dataclass
class _Plan:
    nodes: list[tuple[SSAValue, DimOrder]] = field(default_factory=list)
    arcs: dict[int, list[int]] = field(default_factory=dict)
    fuse: dict[int, bool] = field(default_factory=dict)
    reuse: dict[tuple[int, tuple], int] = field(default_factory=dict)

    def node(self, value: SSAValue, order: DimOrder) -> tuple[int, bool]:
        key = (id(value), order.spec())
        got = self.reuse.get(key)
        if got is not None:
            return got, False
        self.nodes.append((value, order))
        self.reuse[key] = len(self.nodes) - 1
        return len(self.nodes) - 1, True


def _plan(root: SSAValue, order: DimOrder, max_params: int | None, props: DotProps, req: int,
          b: Build) -> tuple[_Plan, int]:  # fmt: skip
    """XLA's BuildFusionPlanTowardOperands."""
    plan = _Plan()
    first, _ = plan.node(root, order)
    inputs, queue, requeued = {first}, deque([first]), 0
    while len(queue) > requeued:
        n = queue.popleft()
        value, n_order = plan.nodes[n]
        op = value.owner
        assert isinstance(op, HloOp)
        if max_params is not None and len(inputs) + _added_params(op) > max_params:
            queue.append(n)  # other nodes may still lower the count
            requeued += 1
            continue
        requeued = 0
        got = None if op.opcode == "parameter" else profitable(
            op, True, None, n_order, props, b.cc, b.level
        )  # fmt: skip
        new_req = got if got is None or isinstance(got, str) else combine(req, got[1])
        if got is None or isinstance(got, str) or isinstance(new_req, str):
            plan.fuse[n] = False
            continue
        orders: Orders = got[0]
        req = new_req  # type: ignore[assignment]
        inputs.discard(n)
        plan.arcs[n] = []
        for v in op.operands:
            k, new = plan.node(v, orders[v])
            plan.arcs[n].append(k)
            if new:
                inputs.add(k)
                queue.append(k)
        plan.fuse[n] = True
    for n in queue:
        plan.fuse[n] = False
    return plan, req


def _build(plan: _Plan, b: Build) -> SSAValue:
    """XLA's BuildFusionTowardOperands: the plan's nodes cloned (operands first, in operand
    order, so parameters are numbered as XLA numbers them), the rest parameters."""
    made: dict[int, SSAValue] = {}
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:
        n, ready = stack.pop()
        if n in made:
            continue
        value = plan.nodes[n][0]
        if not plan.fuse[n]:
            made[n] = b.param(value)
        elif ready:
            made[n] = b.clone(value.owner, [made[k] for k in plan.arcs[n]])  # type: ignore[arg-type]
        else:
            stack.append((n, True))
            stack.extend((k, False) for k in reversed(plan.arcs[n]))
    return made[0]


def fuse_toward_operands(root: SSAValue, order: DimOrder, max_params: int | None,
                         props: DotProps, req: int, b: Build) -> tuple[SSAValue, int]:  # fmt: skip
    plan, req = _plan(root, order, max_params, props, req, b)
    return _build(plan, b), req


def fuse_toward_users(op: HloOp, fused: SSAValue, order: DimOrder, props: DotProps, req: int,
                      b: Build) -> HloOp:  # fmt: skip
    """XLA's FuseTowardUsers: the lowest original instruction the fusion now computes."""
    while True:
        us = unique_users(op)
        # (a root read by one user too stays the root: fusing the user would compute it twice).
        # Any user the tiling propagates through joins, not only those distributive over
        # addition: XLA dropped that filter with split-K's rewrite after fusion (acb7dbb).
        if len(us) != 1 or is_root(op):
            return op
        user = us[0]
        if user.inst_name in b.pinned or user.attr("control-predecessors"):
            return op
        where = list(user.operands).index(op.result)
        got = profitable(user, False, where, order, props, b.cc, b.level)
        new_req = got if isinstance(got, str) else combine(req, got[1])
        if isinstance(got, str) or isinstance(new_req, str):
            return op
        user_order = got[0][user.result]
        req = new_req
        operands: list[SSAValue] = []
        if len(user.operands) == 1:
            operands = [fused]
        else:
            back = propagate_with_requirements(user, True, user_order, props)
            both = back if isinstance(back, str) else combine(req, back[1])
            if isinstance(back, str) or isinstance(both, str):
                return op
            req = both
            for v in user.operands:
                if v is op.result:
                    operands.append(fused)
                    continue
                value, req = fuse_toward_operands(v, back[0][v], None, props, req, b)
                operands.append(value)
        fused = b.clone(user, operands)
        op, order = user, user_order
