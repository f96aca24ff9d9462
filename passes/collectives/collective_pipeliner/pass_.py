"""`collective-pipeliner` (XLA's `CollectivePipeliner`): collectives of a while body move
to a neighbouring iteration, where they overlap that iteration's computation.

`forward`: a collective whose value is stored into a loop-carried buffer by a
dynamic-update-slice at an index that follows the induction variable runs one iteration
later. The first iteration is peeled before the loop without the collective: it stores the
collective's operand. Each iteration then reads back what the previous one stored (at the
index it carried in an added tuple element), applies the collective and the formatting ops
between it and the store, stores the result, and stores its own operand; after the loop
the last stored operand gets the collective (`forward.py`).

`backward`: a collective computed (through its operand chain) from the induction variable
and loop-invariant tuple elements only runs one iteration earlier: before the loop for
iteration 0, at the end of each iteration for the next one (at an index carried in a new
last element); the loop runs one iteration less and its last iteration is peeled after it
(`backward.py`). In both, every value is computed by the same instructions from the same
values: outputs are bit-identical.

Guards (XLA's): a static trip count above 1 with an integer induction variable from a
constant (`i < N`, `<=`, `>`, `>=`, step a constant); the body's parameter and the while
feed only get-tuple-elements. Forward (`forward_match.py`): the collective has one operand,
one user (unless `pipeline-use-tree`), no control dependencies, and reaches exactly one
dynamic-update-slice through XLA's formatting ops; that store has one user, the root
(level 0; at level k its index is marked level k), one non-constant index, the others 0,
the index's range known and linear (XLA's range analysis, seeded with tuple element 0
only: constants, add, subtract, and a select whose compare the ranges decide), into a
buffer read once from the parameter and used by this store only; unless
`process-different-sized-ops`, the stored value has the collective operand's shape and no
scalar dependency. Backward (`backward_match.py`): no control dependencies (unless
`should-allow-control-dependencies`), a chain reading no other changing element and no
recv-done, whose instructions used outside it are invariant elements or scalars.
Stricter than XLA: the body and condition have one caller each and the body holds no
while or conditional (XLA clones those computations for its copies); token
sinks (`send`-like stores) are not matched; of XLA's callbacks only `should_process`
(`op-kind`) and `reuse_pipelined_op_buffer` (a constant) are offered, the others at the
defaults XLA's tests use. Not implemented, refused with one line: `forward-sink`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.passes.collectives.all_reduce_folder import ChannelIds, unique_users
from hlopass.rewriting import HloModulePass, RewriteContext, TraceHook, comps_by_name

from .analysis import Loop, analyse, parameter
from .backward import Backward
from .backward_match import backward_chains
from .forward import Cloner, Forward
from .forward_match import INSERTED, Matcher, Move

DIRECTIONS = ("forward", "backward", "forward-sink")
IMPLEMENTED = ("forward", "backward")
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
               "all-to-all")  # fmt: skip


def _callers(module: ModuleOp) -> dict[str, int]:
    counts: dict[str, int] = {}
    for comp in computations(module):
        for inst in comp.instructions:
            for name in inst.callees():
                counts[name] = counts.get(name, 0) + 1
    return counts


@dataclass(frozen=True)
class CollectivePipelinerPass(HloModulePass):
    """Push collectives stored into loop-carried buffers to the next loop iteration."""

    name: ClassVar[str] = "collective-pipeliner"
    OPCODES: ClassVar[tuple[str, ...]] = ("while", *COLLECTIVES)

    level_to_operate_on: int = 0
    """XLA's `level_to_operate_on`: 0 pipelines stores feeding the body's root; k > 0 the
    stores whose index a previous run (with `last-run=false`) marked with level k."""
    max_pipelining_per_loop: int = 0
    """XLA's `max_pipelining_per_loop`: stop collecting a loop's collectives once this many
    are found (checked after each one, as XLA does: 0 and 1 both move one)."""
    last_run: bool = True
    """XLA's `last_run`: false marks each moved collective and carried index with the
    `InsertedByPreviousStep` custom-call for a later run at the next level; true removes
    every such mark."""
    pipeline_use_tree: bool = False
    """XLA's `pipeline_use_tree`: the collective may have several users and elementwise
    ops may sit between it and the store."""
    process_different_sized_ops: bool = False
    """XLA's `process_different_sized_ops`: the stored value may differ in shape from the
    collective's operand (which then travels in a tuple element of its own)."""
    reuse_pipelined_op_buffer: bool = True
    """XLA's `reuse_pipelined_op_buffer` callback, for every collective: false carries each
    collective's operand in a tuple element of its own even when the stored value has
    its shape."""
    pipelining_direction: str = "forward"
    """XLA's `pipelining_direction`: forward, backward or forward-sink (refused: not
    implemented)."""
    should_allow_control_dependencies: bool = False
    """XLA's `should_allow_control_dependencies` (backward): a collective with control
    dependencies may move; its clones keep only the edges to instructions cloned with
    them (XLA's `UpdateControlDependencies`)."""
    op_kind: tuple[str, ...] = ("all-reduce",)
    """XLA's `should_process` callback (a C++ predicate XLA's users pass), as the opcodes
    it accepts, e.g. `op-kind=all-reduce,reduce-scatter`: a collective is considered when
    its opcode is listed."""

    def __post_init__(self) -> None:
        if self.pipelining_direction not in DIRECTIONS:
            raise ValueError(f"pipelining-direction must be one of {', '.join(DIRECTIONS)}, "
                             f"got {self.pipelining_direction!r}")  # fmt: skip
        if self.pipelining_direction not in IMPLEMENTED:
            raise ValueError(f"pipelining-direction={self.pipelining_direction} is not "
                             "implemented (forward and backward are)")  # fmt: skip
        bad = [k for k in self.op_kind if k not in COLLECTIVES]
        if bad or not self.op_kind:
            raise ValueError(f"op-kind must list collectives ({', '.join(COLLECTIVES)}), "
                             f"got {','.join(self.op_kind)!r}")  # fmt: skip

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        kinds = self.op_kind
        matcher = Matcher(self.level_to_operate_on, self.pipeline_use_tree,
                          self.process_different_sized_ops, lambda op: op.opcode in kinds)  # fmt: skip
        ids = ChannelIds.of(module)
        changed = False
        for comp in list(computations(module)):
            for op in [o for o in comp.instructions if o.opcode == "while"]:
                changed |= self._loop(op, module, matcher, rctx, ids)
        if self.last_run:
            changed |= _strip_marks(module)
        return changed

    def _loop(self, op: HloOp, module: ModuleOp, matcher: Matcher, rctx: RewriteContext,
              ids: ChannelIds) -> bool:  # fmt: skip
        comps = comps_by_name(module)
        body, cond = comps.get(op.attr("body") or ""), comps.get(op.attr("condition") or "")
        if body is None or cond is None:
            return False
        if not any(matcher.should_process(i) for i in body.instructions):
            return False
        loop = analyse(op, cond, body)
        if loop is None or loop.count <= 1:
            rctx.note(self, op, "kept: no static trip count above 1")
            return False
        callers = _callers(module)
        if callers.get(body.comp_name) != 1 or callers.get(cond.comp_name) != 1:
            rctx.note(self, op, "kept: body or condition has other callers")
            return False
        if any(i.opcode in ("while", "conditional") for i in body.instructions):
            # the peeled copies would share the inner loop's computations (XLA clones them)
            rctx.note(self, op, "kept: the body holds a while or conditional")
            return False
        if parameter(cond) is None or not _only_gtes(op, body):
            return False
        cloner = Cloner(rctx, PatternRewriter(op), ids)
        if self.pipelining_direction == "backward":
            chains = backward_chains(body, loop.index, matcher.should_process,
                                     self.max_pipelining_per_loop,
                                     self.should_allow_control_dependencies)  # fmt: skip
            if not chains:
                return False
            Backward(cloner, loop).apply(op, body, cond, chains)
            for c in chains:
                rctx.note(self, op, f"pipelined {c.collective.inst_name} backward")
            return True
        moves = self._moves(op, body, loop, matcher)
        if not moves:
            return False
        Forward(cloner, self.last_run, self.level_to_operate_on, loop.count).apply(
            op, body, cond, moves
        )
        for m in moves:
            rctx.note(self, op, f"pipelined {m.collective.inst_name} forward "
                      f"(store at tuple index {m.output})")  # fmt: skip
        return True

    def _moves(self, op: HloOp, body: ComputationOp, loop: Loop, matcher: Matcher) -> list[Move]:
        """XLA's `CollectCollectivesToMove` (forward)."""
        param = parameter(body)
        assert param is not None
        gte_count: dict[int, int] = {}
        for u in unique_users(param.result):
            gte_count[u.attr("index")] = gte_count.get(u.attr("index"), 0) + 1  # type: ignore[union-attr]
        order = {o: k for k, o in enumerate(body.instructions)}
        moves: list[Move] = []
        for inst in list(body.instructions):
            if not matcher.should_process(inst):
                continue
            m = matcher.supported(inst, body, loop, gte_count, order)
            if m is None:
                continue
            same = next((x for x in moves if x.dus is m.dus), None)
            if same is not None:
                # XLA's `MergeIntoExistingCollectivesForward`: one store, one move
                if inst not in same.formatting:
                    extra = [f for f in [inst, *m.formatting] if f not in same.formatting]
                    same.formatting = sorted(same.formatting + extra, key=order.__getitem__)
                    same.chain |= {inst} | m.chain
                continue
            m.reuse = self.reuse_pipelined_op_buffer
            moves.append(m)
            if len(moves) >= self.max_pipelining_per_loop:
                break
        return moves


def _only_gtes(op: HloOp, body: ComputationOp) -> bool:
    """XLA's guard: the body's parameter and the while feed only get-tuple-elements (an
    escaping tuple would not see the values moved to other iterations)."""
    param = parameter(body)
    if param is None:
        return False
    return all(isinstance(u, HloOp) and u.opcode == "get-tuple-element"
               for v in (param.result, op.result) for u in unique_users(v))  # fmt: skip


def _strip_marks(module: ModuleOp) -> bool:
    """XLA's last-run cleanup: every `InsertedByPreviousStep` custom-call by its operand."""
    marks = [o for c in computations(module) for o in c.instructions
             if o.opcode == "custom-call" and o.attr("custom_call_target") == INSERTED]  # fmt: skip
    for o in marks:
        level = o.operands[1] if len(o.operands) > 1 else None
        o.result.replace_all_uses_with(o.operands[0])
        o.detach()
        o.erase()
        if level is not None and level.owner is not None and not level.uses:
            lv = level.owner
            if isinstance(lv, HloOp) and lv.opcode == "constant":
                lv.detach()
                lv.erase()
    return bool(marks)
