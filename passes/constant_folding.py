"""`constant-folding`: evaluate instructions whose operands are constants (XLA's HloConstantFolding).

An instruction folds when at least one operand is a `constant` and every operand is a
`constant`, a `broadcast` of a constant, or an `iota` (XLA's default level). Never folded:
parameters, constants, tuples, broadcasts and iotas themselves (algsimp would turn a splat
constant back into a broadcast: they would fight), fft, while loops (unless
`fold-while=true`), side-effecting, random, custom-call, infeed/outfeed instructions,
calls of computations holding any of those, instructions with control predecessors,
`pad(broadcast, constant)`, non-array results, and anything with more than
`max-elements` elements in its result or an operand. The new constant keeps the
instruction's shape, layout included. Evaluation uses `hlopass.interpreter`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.errors import HloError
from hlopass.literal import numpy_dtype
from hlopass.rewriting import (
    ByClass,
    HloModulePass,
    RewriteContext,
    Scope,
    TraceHook,
    constant_from_numpy,
    fusion_computations,
    has_side_effect,
    hlo_class,
    instructions,
    is_control_predecessor,
    is_hlo,
    is_random,
    owner,
    replace_op,
    run_patterns,
    value_shape,
)
from hlopass.shape import ArrayShape

XLA_MAX_ELEMENTS = 45_000_000
"""XLA's default-level limit on result and operand elements."""

_NEVER_FOLD = frozenset({
    "parameter", "constant", "tuple", "broadcast", "iota", "fft", "custom-call", "infeed",
    "outfeed", "after-all", "rng", "rng-bit-generator", "rng-get-and-update-state",
    "send", "send-done", "recv", "recv-done", "domain", "opt-barrier", "add-dependency",
    "replica-id", "partition-id", "async-start", "async-update", "async-done",
    "copy-start", "copy-done", "get-dimension-size", "set-dimension-size",
})  # fmt: skip


def _elements(value: SSAValue) -> int:
    return sum(leaf.num_elements for leaf in value_shape(value).leaves())


_FOLDING_SOURCES = frozenset(("constant", "iota", "broadcast"))
"""Every opcode whose instruction `_is_foldable_operand` may accept (`_may_fold_from`)."""


def _may_fold_from(value: SSAValue) -> bool:
    """The opcode defining `value` is one `_is_foldable_operand` may accept: a necessary
    condition, one look-up (the drivers ask it of every instruction)."""
    o = owner(value)
    return o is not None and o.OPCODE in _FOLDING_SOURCES


def _is_foldable_operand(value: SSAValue) -> bool:
    o = owner(value)
    if o is None:
        return False
    opcode = o.OPCODE  # (the class attribute: `opcode` is a property call)
    if opcode not in _FOLDING_SOURCES:  # (the one list of them)
        return False
    if opcode == "broadcast":
        inner = owner(o.operands[0])
        return inner is not None and inner.OPCODE == "constant"
    return True  # a constant or an iota


def _changes_sub_byte_width(op: HloOp) -> bool:
    """A bitcast(-convert) between element types of different widths, one of them narrower
    than a byte (s4, u2, ...): XLA does not fold those."""
    src, dst = value_shape(op.operands[0]), op.shape
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape):
        return False
    narrow = [_bit_width(s.element_type) for s in (src, dst)]
    return narrow[0] != narrow[1] and any(w < 8 for w in narrow)


def _bit_width(element_type: str) -> int:
    """Bits of one element: the number in the type's name (s4, f8e4m3fn, u32); pred is 8."""
    digits = "".join(ch for ch in element_type[1:].split("e")[0] if ch.isdigit())
    return int(digits) if element_type != "pred" and digits else 8


_FOLDS = ByClass(lambda t: hlo_class(t) and t.OPCODE not in _NEVER_FOLD)  # type: ignore[attr-defined]
"""Instructions whose opcode may fold."""


class LoopBoundExceeded(Exception):
    """A while loop ran past `max_loop_iterations`/`max_loop_elements`: not folded."""


def _bounded_interpreter(module: ModuleOp, opts: ConstantFoldingPass) -> Any:
    """The interpreter, with while loops counted against the pass's loop bounds (a loop that
    never ends would otherwise hang the pass). The budget is per folded instruction
    (`reset`) and shared by the loops nested in it."""
    from hlopass.interpreter.core import Interpreter, flatten

    class BoundedInterpreter(Interpreter):
        iterations_left = 0
        elements_left = 0
        # integer power as XLA's folder computes it (its HloEvaluator), also inside the
        # computations a fold runs: not as XLA-CPU's compiled code (they differ)
        xla_evaluator = True

        def reset(self) -> None:
            self.iterations_left = opts.max_loop_iterations
            self.elements_left = opts.max_loop_elements

        def handler_of(self, op: HloOp) -> Any:
            # planned computations call handlers directly: route nested loops through the
            # bounded `eval` below too
            if op.OPCODE == "while":
                return lambda interp, op, operands: interp.eval(op, operands)
            return super().handler_of(op)

        def eval(self, op: HloOp, operands: list[Any]) -> Any:
            if op.OPCODE != "while":
                return super().eval(op, operands)
            cond, body = self.comp(op.attr("condition")), self.comp(op.attr("body"))
            state = operands[0]
            elements = max(1, sum(np.size(leaf) for leaf in flatten(state)))
            while bool(self.call(cond, [state])):
                self.iterations_left -= 1
                self.elements_left -= elements
                if self.iterations_left < 0 or self.elements_left < 0:
                    raise LoopBoundExceeded(op.inst_name)
                state = self.call(body, [state])
            return state

    return BoundedInterpreter(module)


@dataclass
class Evaluator:
    """Evaluates one instruction (and the operands it needs) with the interpreter."""

    module: ModuleOp
    opts: ConstantFoldingPass
    _interp: Any = None

    def interpreter(self) -> Any:
        if self._interp is None:
            try:
                # a fresh one per run: earlier passes may have changed called computations
                self._interp = _bounded_interpreter(self.module, self.opts)
            except ImportError as e:
                raise HloError(f"error: constant-folding needs hlopass.interpreter: {e}") from None
        return self._interp

    def edited(self) -> None:
        """A fold changed a computation: the interpreter's schedules of it are stale."""
        self._interp = None

    def value(self, op: HloOp, operand_values: list[Any]) -> Any:
        with np.errstate(all="ignore"):
            return self.interpreter().eval(op, operand_values)

    def operand_value(self, value: SSAValue) -> Any:
        o = owner(value)
        assert o is not None
        if o.OPCODE == "constant":
            return o.attr("value").literal.array
        if o.OPCODE == "broadcast":
            return self.value(o, [self.operand_value(o.operands[0])])
        return self.value(o, [])


@dataclass
class FoldConstantInstruction(RewritePattern):
    """`f(constant, constant...) -> constant(f(...))`, evaluated by the interpreter."""

    ctx: RewriteContext
    opts: ConstantFoldingPass
    evaluator: Evaluator
    comps: dict[str, ComputationOp]
    foldable_comps: dict[str, bool]

    def wants(self, op: Operation) -> bool:
        """Whether folding `op` is worth asking at all (`worklist.Driver`): never for an
        opcode that does not fold, nor for an instruction without operands or whose first
        operand cannot fold (`_foldable` needs all of them to): most instructions. An
        instruction whose operand becomes a constant is touched, and asked again then."""
        operands = op._operands  # pyright: ignore[reportPrivateUsage]
        return _FOLDS(op) and bool(operands) and _may_fold_from(operands[0])

    def select(self, ops: list[Operation]) -> list[Operation]:
        """`wants` over a list (the opcode tested per op class)."""
        return [
            op
            for op in _FOLDS.ops(ops)
            if op._operands and _may_fold_from(op._operands[0])  # pyright: ignore[reportPrivateUsage]
        ]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_hlo(op) or not self._foldable(op):  # type: ignore[arg-type]
            return
        try:
            self.evaluator.interpreter().reset()
            operand_values = [self.evaluator.operand_value(v) for v in op.operands]
            result = self.evaluator.value(op, operand_values)
        except LoopBoundExceeded:
            return  # a loop too long to fold (maybe endless): left as it is
        except HloError as e:
            if "needs hlopass.interpreter" in str(e):
                raise
            return  # an opcode the interpreter cannot run stays as it is
        except (
            ValueError,
            TypeError,
            NotImplementedError,
            KeyError,
            IndexError,
            ZeroDivisionError,
        ):
            return
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        arr = np.asarray(result)
        if arr.shape != shape.dims:
            return
        arr = arr.astype(numpy_dtype(shape.element_type), copy=False)
        if arr.dtype.kind == "c" and (np.isnan(arr.real) & ~np.isnan(arr.imag)).any():
            return  # no text form: XLA's parser reads a `(nan, x)` element as (nan, nan)
        c = constant_from_numpy(rewriter, self.ctx, arr, shape, before=op)
        if op.attr("metadata") is not None:  # XLA's folded constant keeps the op's metadata
            c.set_attr("metadata", op.attr("metadata"))
        self.ctx.note(self, op, f"-> {c.inst_name}")
        replace_op(rewriter, op, c.result)
        self.evaluator.edited()

    def _foldable(self, op: HloOp) -> bool:
        opcode = op.OPCODE
        if opcode in _NEVER_FOLD:
            return False
        # the operands first: almost every instruction has one that is no constant (a
        # loop, not `all(...)`: its generator cost more than the test, on every visit)
        operands = op._operands  # (iterated only: the tuple, not the property)  # pyright: ignore[reportPrivateUsage]
        if not operands:
            return False
        for v in operands:
            if not _is_foldable_operand(v):
                return False
        if has_side_effect(op) or is_random(op):
            return False
        if opcode == "while" and not self.opts.folds_while:
            return False
        if not isinstance(op.shape, ArrayShape) or op.shape.is_dynamic:
            return False
        if op.attr("control-predecessors") or is_control_predecessor(op):
            return False
        # every foldable operand is the result of an HloOp, so this keeps all of them
        owners = [o for o in map(owner, operands) if o is not None]
        # (XLA's aggressive level folds operands that are only broadcasts or iotas too)
        if self.opts.level != "aggressive" and not any(o.OPCODE == "constant" for o in owners):
            return False
        if opcode in ("bitcast", "bitcast-convert") and _changes_sub_byte_width(op):
            return False
        if opcode == "pad" and owners[0].OPCODE == "broadcast":
            return False
        limit = self.opts.max_elements
        if op.shape.num_elements > limit or any(_elements(v) > limit for v in operands):
            return False
        if any(o.OPCODE == "constant" and o.attr("value").literal.elided for o in owners):
            return False
        return all(self._comp_foldable(name) for name in op.callees())

    def _comp_foldable(self, name: str) -> bool:
        """No side effects, rng, after-all, custom-call, infeed/outfeed inside (recursively)."""
        known = self.foldable_comps.get(name)
        if known is not None:
            return known
        self.foldable_comps[name] = False  # recursion guard
        comp = self.comps.get(name)
        ok = comp is not None
        if comp is not None:
            for inner in instructions(comp):
                if (
                    has_side_effect(inner)
                    or is_random(inner)
                    or inner.OPCODE
                    in ("after-all", "custom-call", "infeed", "outfeed", "opt-barrier")
                    or (inner.OPCODE == "while" and not self.opts.folds_while)
                    or not all(self._comp_foldable(c) for c in inner.callees())
                ):
                    ok = False
                    break
        self.foldable_comps[name] = ok
        return ok


@dataclass(frozen=True)
class ConstantFoldingPass(HloModulePass):
    """Replace instructions computed from constants with the constant they compute."""

    name: ClassVar[str] = "constant-folding"

    max_elements: int = XLA_MAX_ELEMENTS
    """Fold only when the result and every operand have at most this many elements."""

    fold_while: bool = False
    """Also fold while loops with constant operands (what XLA's aggressive level does)."""

    level: str = "default"
    """XLA's `HloConstantFolding::Level`: `default`, or `aggressive` (folds while loops too)."""

    propagate_into_calls: bool = True
    """Interprocedural: a `call` parameter that every call site passes the same constant
    becomes that constant inside the callee (then folded there)."""

    def __post_init__(self) -> None:
        if self.level not in ("default", "aggressive"):
            raise ValueError(f"level must be 'default' or 'aggressive', not {self.level!r}")

    @property
    def folds_while(self) -> bool:
        return self.fold_while or self.level == "aggressive"

    max_loop_iterations: int = 1000
    """With `fold-while`: fold an instruction only if the while loops its evaluation runs
    (nested ones included) end within this many iterations in total. A loop that runs
    longer, or never ends, stays unfolded."""

    max_loop_elements: int = XLA_MAX_ELEMENTS
    """With `fold-while`: also leave the loops unfolded once they have carried this many
    state elements in total (iterations times the elements of the loop state), which
    bounds the work of loops with few iterations over large states."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        return self.run_scoped(ctx, module, Scope(), trace)

    def run_scoped(self, ctx: Context, module: ModuleOp, scope: Scope,
                   trace: TraceHook | None = None) -> bool:  # fmt: skip
        scope.tracked = True
        from hlopass.passes.constant_propagation import propagate_call_constants

        rctx = RewriteContext.of(module, trace, scope)
        changed = self.propagate_into_calls and propagate_call_constants(
            module, rctx, scope.changed, scope
        )
        fused = fusion_computations(module, scope)
        all_comps = computations(module)
        comps = [c for c in scope.select(all_comps) if c.comp_name not in fused]
        pattern = FoldConstantInstruction(
            rctx, self, Evaluator(module, self), {c.comp_name: c for c in all_comps}, {}
        )
        # radius 0: whether an instruction folds depends on it and its operands' definitions,
        # which change only by replacing an operand (the instruction is then touched)
        return run_patterns(module, [pattern], comps, scope, radius=0) or changed
