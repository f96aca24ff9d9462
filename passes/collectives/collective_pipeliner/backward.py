"""The backward rewrite of `collective-pipeliner` (XLA's `TransformLoopBackward`): each
moved collective (with the chain it is computed from) runs for iteration 0 before the
loop; every iteration computes the next iteration's value at its end, at an index carried
in a new last tuple element; the loop runs one iteration less and the last iteration is
peeled after it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.ir import Operation, SSAValue

from hlopass.dialects.hlo import ComputationOp, HloOp, ReturnOp, retype_result, shape_type
from hlopass.ir.shape import ArrayShape, Shape, TupleShape, scalar
from hlopass.passes.collectives.all_reduce_folder import unique_users
from hlopass.rewriting import constant_from_numpy, erase_dead, owner

from .analysis import Loop, gte_index
from .backward_match import Chain
from .forward import Cloner, copy_control
from .send_recv import update_validation


@dataclass
class Backward:
    """One while's backward rewrite (`apply`), given its chains."""

    cl: Cloner
    loop: Loop
    names: dict[str, str] = field(default_factory=dict)

    def _const(self, value: int, like: Shape, before: Operation) -> SSAValue:
        assert isinstance(like, ArrayShape)
        return constant_from_numpy(self.cl.rewriter, self.cl.ctx, np.asarray(value),
                                   scalar(like.element_type), before).result  # fmt: skip

    def _clone_chain(self, c: Chain, mapping: dict[SSAValue, SSAValue], before: Operation,
                     names: dict[str, str]) -> SSAValue:  # fmt: skip
        """XLA's `CloneBackwardChain`: the chain then the collective, each once."""
        for op in [*c.chain, c.collective]:
            if op.result not in mapping:
                self.cl.clone(op, mapping, before, names)
        return mapping[c.collective.result]

    def apply(self, op: HloOp, body: ComputationOp, cond: ComputationOp,
              chains: list[Chain]) -> None:  # fmt: skip
        init = owner(op.operands[0])
        assert init is not None and isinstance(op.shape, TupleShape)
        it = self.loop.index
        n = len(op.shape.elements)
        it_shape = op.shape.elements[it]
        state = TupleShape(op.shape.elements + tuple(c.collective.shape for c in chains)
                           + (it_shape,))  # fmt: skip
        users = list(unique_users(op.result))
        self._after(op, body, chains, users)
        # before the loop: iteration 0's collectives, at the loop's start
        ahead: dict[SSAValue, SSAValue] = {body.parameters()[0].result: init.result}
        for g in body.instructions:
            if g.opcode == "get-tuple-element" and gte_index(g.result) is not None:
                ahead[g.result] = init.operands[g.attr("index")]
        names: dict[str, str] = {}
        first = [self._clone_chain(c, ahead, op, names) for c in chains]
        cloned = [v for k, v in ahead.items() if owner(k) is not None]
        nxt = self._const(self.loop.start + self.loop.step, it_shape, op)
        new_init = self.cl.op("tuple", [*init.operands, *first, nxt], state, op)
        copy_control(body.root, owner(new_init), names)
        op.operands[0] = new_init
        if not unique_users(init.result):
            self.cl.rewriter.erase(init)
        erase_dead(self.cl.rewriter, cloned)
        for comp in (body, cond):
            retype_result(comp.parameters()[0], shape_type(state))
        retype_result(op, shape_type(state))
        self._body(body, chains, state, n)
        self._cond(cond, state)
        # (last: the copies before the loop keep the attribute as it was, as XLA's do)
        for inst in body.instructions:
            update_validation(inst, False, "backward", self.loop.count)

    def _body(self, body: ComputationOp, chains: list[Chain], state: TupleShape,
              n: int) -> None:  # fmt: skip
        """Each collective's value comes from the tuple; the next iteration's is computed
        at the end of the body, at the carried index, which then advances by the step."""
        param = body.parameters()[0]
        root = body.root
        ret = root.next_op
        assert isinstance(ret, ReturnOp) and param.next_op is not None
        top = param.next_op
        it = self.loop.index
        carried = self.cl.op("get-tuple-element", [param.result], state.elements[-1], top,
                             {"index": len(state.elements) - 1})  # fmt: skip
        ahead: dict[SSAValue, SSAValue] = {param.result: param.result}
        for g in body.instructions:
            if gte_index(g.result) == it:
                ahead[g.result] = carried
        names: dict[str, str] = {}
        nexts = [self._clone_chain(c, ahead, ret, names) for c in chains]
        for k, c in enumerate(chains):
            got = self.cl.op("get-tuple-element", [param.result], c.collective.shape, top,
                             {"index": n + k})  # fmt: skip
            c.collective.result.replace_all_uses_with(got)
        step = self._const(self.loop.step, state.elements[-1], ret)
        advanced = self.cl.op("add", [root.operands[it], step], state.elements[-1], ret)
        tup = self.cl.op("tuple", [*root.operands, *nexts, advanced], state, ret)
        copy_control(root, owner(tup), None)
        ret.operands[0] = tup
        self.cl.rewriter.erase(root)
        for c in chains:
            if not c.collective.result.uses:
                operands = list(c.collective.operands)
                self.cl.rewriter.erase(c.collective)
                erase_dead(self.cl.rewriter, operands)

    def _cond(self, cond: ComputationOp, state: TupleShape) -> None:
        """XLA's new condition: `i < start + (count - 1) * step` (`>` counting down)."""
        param = cond.parameters()[0]
        old = cond.root
        ret = old.next_op
        assert isinstance(ret, ReturnOp)
        it = self.loop.index
        i = self.cl.op("get-tuple-element", [param.result], state.elements[it], ret,
                       {"index": it})  # fmt: skip
        last = self.loop.start + (self.loop.count - 1) * self.loop.step
        bound = self._const(last, state.elements[it], ret)
        direction = "LT" if self.loop.step > 0 else "GT"
        cmp = self.cl.op("compare", [i, bound], old.shape, ret, {"direction": direction})
        ret.operands[0] = cmp
        operands = list(old.operands)
        self.cl.rewriter.erase(old)
        erase_dead(self.cl.rewriter, operands)

    def _after(self, op: HloOp, body: ComputationOp, chains: list[Chain],
               users: list[Operation]) -> None:  # fmt: skip
        """The last iteration, peeled after the loop: the body on the loop's result, its
        collectives read from the tuple; the loop's readers read its outputs."""
        after = op.next_op
        assert after is not None and isinstance(op.shape, TupleShape)
        n = len(op.shape.elements)
        mapping: dict[SSAValue, SSAValue] = {body.parameters()[0].result: op.result}
        for k, c in enumerate(chains):
            mapping[c.collective.result] = self.cl.op(
                "get-tuple-element", [op.result], c.collective.shape, after, {"index": n + k}
            )
        made = []
        for inst in list(body.instructions):
            if inst.opcode == "parameter" or inst is body.root or inst.result in mapping:
                continue
            made.append(self.cl.clone(inst, mapping, after, self.names))
            update_validation(made[-1], True, "backward", self.loop.count)
        outputs = [mapping[v] for v in body.root.operands]
        for u in users:
            if isinstance(u, HloOp) and u.opcode == "get-tuple-element":
                u.result.replace_all_uses_with(outputs[u.attr("index")])
                self.cl.rewriter.erase(u)
        erase_dead(self.cl.rewriter, [m.result for m in made])
