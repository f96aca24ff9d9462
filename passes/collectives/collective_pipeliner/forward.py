"""The forward rewrite of `collective-pipeliner` (XLA's `TransformLoopForward`): the
first iteration is peeled before the loop with its moved collectives left out (the
un-reduced value is stored); each iteration applies the previous iteration's collective
to what it stored, then stores its own un-reduced value; after the loop the last stored
value gets its collective."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import ComputationOp, HloOp, ReturnOp, retype_result, shape_type
from hlopass.ir.shape import ArrayShape, Shape, TupleShape, scalar
from hlopass.passes.collectives.all_reduce_folder import ChannelIds, unique_users
from hlopass.rewriting import RewriteContext, constant_from_numpy, erase_dead, new_op, owner

from .forward_match import INSERTED, Move
from .send_recv import update_validation


def _shape(v: SSAValue) -> Shape:
    return v.type.data  # type: ignore[attr-defined]


def copy_control(src: HloOp, dst: HloOp | None, names: dict[str, str] | None) -> None:
    """`dst` waits for what `src` waits for (renamed through `names` when given, those
    not in it dropped): XLA's `UpdateControlDependencies` for a rebuilt tuple."""
    waits = src.attr("control-predecessors")
    if not waits or dst is None:
        return
    kept = tuple(w if names is None else names[w] for w in waits
                 if names is None or w in names)  # fmt: skip
    dst.set_attr("control-predecessors", kept or None)


@dataclass
class Cloner:
    """Clones instructions with fresh names and XLA's channel-id renumbering."""

    ctx: RewriteContext
    rewriter: PatternRewriter
    ids: ChannelIds

    def clone(self, op: HloOp, mapping: dict[SSAValue, SSAValue], before: Operation,
              names: dict[str, str] | None = None) -> HloOp:  # fmt: skip
        """`op` on mapped operands, inserted before `before` (XLA's
        `UpdateInstructionChannelId`: a collective with a channel gets a new one). Control
        predecessors follow XLA's `UpdateControlDependencies`: those cloned into the same
        computation (`names`, original name to clone name, filled here) are kept, renamed;
        the others are dropped."""
        new = op.clone(value_mapper=dict(mapping))
        new.inst_name = self.ctx.names.fresh(op.inst_name)
        waits = op.attr("control-predecessors")
        if waits:
            kept = tuple(names[w] for w in waits if names is not None and w in names)
            new.set_attr("control-predecessors", kept or None)
        if names is not None:
            names[op.inst_name] = new.inst_name
        if op.opcode not in ("send", "recv", "send-done", "recv-done") and op.attr("channel_id"):
            new.set_attr("channel_id", self.ids.take())
        self.rewriter.insert(new, InsertPoint.before(before))
        mapping[op.result] = new.result
        return new

    def op(self, opcode: str, operands: list[SSAValue], shape: Shape, before: Operation,
           attrs: dict | None = None) -> SSAValue:  # fmt: skip
        return new_op(self.rewriter, self.ctx, opcode, operands, shape, attrs,
                      before=before).result  # fmt: skip

    def zero(self, like: SSAValue, before: Operation) -> SSAValue:
        t = _shape(like).element_type  # type: ignore[attr-defined]
        return constant_from_numpy(self.rewriter, self.ctx, np.asarray(0), scalar(t), before).result

    def marked(self, v: SSAValue, level: int, before: Operation) -> SSAValue:
        """XLA's `InsertedByPreviousStep` custom-call on `v` (when `last-run` is false)."""
        lv = constant_from_numpy(self.rewriter, self.ctx, np.asarray(level + 1), scalar("s64"),
                                 before).result  # fmt: skip
        return self.op("custom-call", [v, lv], _shape(v), before,
                       {"custom_call_target": INSERTED})  # fmt: skip


@dataclass
class Forward:
    """One while's forward rewrite (`apply`), given its moves."""

    cl: Cloner
    last_run: bool
    level: int
    trip_count: int
    names: dict[str, str] = field(default_factory=dict)
    """Body instruction name -> its clone in the peeled iteration."""

    def apply(self, op: HloOp, body: ComputationOp, cond: ComputationOp,
              moves: list[Move]) -> None:  # fmt: skip
        init = owner(op.operands[0])
        assert init is not None and isinstance(op.shape, TupleShape)
        n = len(op.shape.elements)
        indices: list[SSAValue] = []
        for m in moves:
            if m.index not in indices:
                indices.append(m.index)
        specials = [m for m in moves if m.special]
        carried: list[SSAValue] = []
        for m in moves:
            carried += [v for v in m.carried if v not in carried]
        extra = indices + [m.collective.operands[0] for m in specials] + carried
        peeled = self._peel(op, init, body, moves)
        root = body.root
        new_init = self.cl.op("tuple", [peeled[v] for v in list(root.operands) + extra],
                              TupleShape(op.shape.elements + tuple(_shape(v) for v in extra)),
                              op)  # fmt: skip
        state = _shape(new_init)
        copy_control(root, owner(new_init), self.names)
        erase_dead(self.cl.rewriter, [v for v in peeled.values() if v.owner is not init])
        op.operands[0] = new_init
        if not unique_users(init.result):
            self.cl.rewriter.erase(init)
        for comp in (body, cond):
            retype_result(comp.parameters()[0], shape_type(state))
        outer_users = list(unique_users(op.result))
        retype_result(op, shape_type(state))
        pos = {id(v): n + k for k, v in enumerate(extra)}
        spos = {id(m): n + len(indices) + k for k, m in enumerate(specials)}
        self._body(body, moves, extra, pos, spos)
        self._after(op, outer_users, moves, pos, spos)

    def _peel(self, op: HloOp, init: HloOp, body: ComputationOp,
              moves: list[Move]) -> dict[SSAValue, SSAValue]:  # fmt: skip
        """Clone the body before `op` on the init tuple, the moved collectives and their
        formatting chains left out: XLA's peeled first iteration."""
        mapping: dict[SSAValue, SSAValue] = {}
        names = self.names
        skip = {c for m in moves for c in m.chain}
        by_collective = {m.collective: m for m in moves}
        by_dus = {m.dus: m for m in moves}
        for inst in list(body.instructions):
            if inst.opcode == "parameter":
                mapping[inst.result] = init.result
            elif inst.opcode == "get-tuple-element" and owner(inst.operands[0]) is not None \
                    and owner(inst.operands[0]).opcode == "parameter":  # type: ignore[union-attr]  # fmt: skip
                mapping[inst.result] = init.operands[inst.attr("index")]
            elif inst in by_collective:
                mapping[inst.result] = mapping[inst.operands[0]]
            elif inst in skip or inst is body.root:
                continue
            elif inst in by_dus and by_dus[inst].special:
                mapping[inst.result] = mapping[inst.operands[0]]
            elif inst in by_dus:
                m = by_dus[inst]
                mapping[inst.operands[1]] = mapping[m.collective.operands[0]]
                self.cl.clone(inst, mapping, op, names)
            else:
                update_validation(self.cl.clone(inst, mapping, op, names), True, "forward",
                                  self.trip_count)  # fmt: skip
                update_validation(inst, False, "forward", self.trip_count)
        return mapping

    def _process(self, m: Move, stacked: SSAValue, data: SSAValue, idx: SSAValue,
                 carried: dict[SSAValue, SSAValue], before: Operation) -> SSAValue:  # fmt: skip
        """XLA's `extract_and_process_slice`: slice `data` at `idx` if it is bigger than the
        collective's operand, apply the collective and the formatting ops, store the
        result into `stacked` at `idx`."""
        zero = self.cl.zero(idx, before)
        rank = len(m.dus.operands) - 2
        starts = [idx if k == m.sliced else zero for k in range(rank)]
        want = _shape(m.collective.operands[0])
        if _shape(data) != want:
            assert isinstance(want, ArrayShape)
            data = self.cl.op("dynamic-slice", [data, *starts], want, before,
                              {"dynamic_slice_sizes": want.dims})  # fmt: skip
        # the collective reads the slice; its formatting ops read carried values, even
        # where one of them is the collective's own operand (from the previous iteration)
        done = self.cl.clone(m.collective, {m.collective.operands[0]: data}, before).result
        mapping = dict(carried)
        if not self.last_run:
            done = self.cl.marked(done, self.level, before)
        mapping[m.collective.result] = done
        for f in m.formatting:
            done = self.cl.clone(f, mapping, before).result
        return self.cl.op("dynamic-update-slice", [stacked, done, *starts], m.dus.shape, before)

    def _body(self, body: ComputationOp, moves: list[Move], extra: list[SSAValue],
              pos: dict[int, int], spos: dict[int, int]) -> None:  # fmt: skip
        param = body.parameters()[0]
        state = param.shape
        assert isinstance(state, TupleShape) and param.next_op is not None
        top = param.next_op
        load = {id(v): self.cl.op("get-tuple-element", [param.result], state.elements[pos[id(v)]],
                                  top, {"index": pos[id(v)]}) for v in extra}  # fmt: skip
        carried = {v: load[id(v)] for m in moves for v in m.carried}
        dead: list[SSAValue] = []
        for m in moves:
            d = m.dus
            idx = load[id(m.index)]
            if not self.last_run:
                idx = self.cl.marked(idx, self.level, d)
            buffer = d.operands[0]
            data = buffer
            if m.special:
                data = self.cl.op("get-tuple-element", [param.result],
                                  state.elements[spos[id(m)]], top, {"index": spos[id(m)]})  # fmt: skip
            new = self._process(m, buffer, data, idx, carried, d)
            if not m.special:
                zero = self.cl.zero(m.index, d)
                starts = [m.index if k == m.sliced else zero for k in range(len(d.operands) - 2)]
                new = self.cl.op("dynamic-update-slice", [new, m.collective.operands[0], *starts],
                                 d.shape, d)  # fmt: skip
            d.result.replace_all_uses_with(new)
            dead.append(d.operands[1])
            self.cl.rewriter.erase(d)
        root = body.root
        ret = root.next_op
        assert isinstance(ret, ReturnOp)
        tup = self.cl.op("tuple", list(root.operands) + extra, state, ret)
        copy_control(root, owner(tup), None)
        ret.operands[0] = tup
        self.cl.rewriter.erase(root)
        erase_dead(self.cl.rewriter, dead)
        # the old collectives and their chains: dead now, but collectives count as side
        # effects for the generic cleanup (XLA removes them with the store)
        left = [o for m in moves for o in (m.collective, *m.formatting) if o.parent is not None]
        while any(not o.result.uses for o in left):
            for o in [o for o in left if not o.result.uses]:
                self.cl.rewriter.erase(o)
                left.remove(o)

    def _after(self, op: HloOp, users: list[Operation], moves: list[Move],
               pos: dict[int, int], spos: dict[int, int]) -> None:  # fmt: skip
        """After the loop: the last iteration's collectives (XLA's output side)."""
        after = op.next_op
        assert after is not None and isinstance(op.shape, TupleShape)
        el = op.shape.elements

        def gte(k: int) -> SSAValue:
            return self.cl.op("get-tuple-element", [op.result], el[k], after, {"index": k})

        carried = {v: gte(pos[id(v)]) for m in moves for v in m.carried}
        results: dict[int, SSAValue] = {}
        for m in moves:
            stacked = gte(m.output)
            data = gte(spos[id(m)]) if m.special else stacked
            results[m.output] = self._process(m, stacked, data, gte(pos[id(m.index)]),
                                              carried, after)  # fmt: skip
        # (only now: `after` may be one of the replaced get-tuple-elements)
        for u in users:
            if isinstance(u, HloOp) and u.attr("index") in results:
                u.result.replace_all_uses_with(results[u.attr("index")])
                self.cl.rewriter.erase(u)
