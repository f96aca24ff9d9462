"""`constant-folding`: evaluate instructions whose operands are constants (XLA's HloConstantFolding).

An instruction folds when at least one operand is a `constant` and every operand is a
`constant`, a `broadcast` of a constant, an `iota`, or a `tuple` of those (XLA's default
level; the aggressive one needs no `constant`). Never folded: parameters, constants,
tuples, broadcasts and iotas themselves (algsimp would turn a splat constant back into a
broadcast: they would fight), fft, while loops (unless `fold-while=true`),
side-effecting, random, custom-call, infeed/outfeed instructions, calls of computations
holding any of those, instructions with control predecessors, `pad(broadcast,
constant)`, dynamic shapes, and anything with more than `max-elements` elements in its
result or an operand. The new constant keeps the instruction's shape, layout included; a
tuple-shaped result becomes a tuple constant (or, with `is-layout-sensitive`, a constant
per get-tuple-element user). Evaluation uses `hlopass.interpreter`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import ComputationOp, HloOp, computations, create_op
from hlopass.errors import HloError
from hlopass.ir.attrs import ShapedLiteral
from hlopass.ir.literal import Literal, numpy_dtype
from hlopass.ir.opcode_sets import EVERY_OPCODE
from hlopass.ir.shape import ArrayShape, Shape, TupleShape
from hlopass.rewriting import (
    ByClass,
    RewriteContext,
    Scope,
    TrackedPass,
    constant_from_numpy,
    erase_dead,
    fusion_computations,
    has_side_effect,
    hlo_class,
    instructions,
    is_control_predecessor,
    is_hlo,
    is_random,
    is_root,
    owner,
    replace_op,
    run_patterns,
    value_shape,
)

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


_FOLDING_SOURCES = frozenset(("constant", "iota", "broadcast", "tuple"))
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
    if opcode == "tuple":  # (XLA looks through tuples, recursively)
        return all(_is_foldable_operand(v) for v in o.operands)
    return True  # a constant or an iota


def _any_constant(op: HloOp) -> bool:
    """Some operand is a `constant`, looking through `tuple` operands (XLA's
    `AnyOperandsConstant`: what the default level asks besides the above)."""
    for v in op.operands:
        o = owner(v)
        if o is not None and (o.OPCODE == "constant" or (o.OPCODE == "tuple" and _any_constant(o))):
            return True
    return False


_DATA_MOVEMENT = frozenset({
    "bitcast", "bitcast-convert", "concatenate", "copy", "dynamic-slice",
    "dynamic-update-slice", "pad", "reshape", "reverse", "select", "slice", "transpose",
})  # fmt: skip
"""XLA's `IsPureDataMovement`: opcodes that only move or reinterpret bits (a pad copies
its padding value, a select one operand's bits): folding them cannot round differently."""

_STRUCTURAL = frozenset({"constant", "get-tuple-element", "parameter", "tuple"})
"""XLA's `IsStructural`: exempt from `fold-float-arithmetic=false` (they regroup values)."""


def _integral_or_pred(shape: Shape) -> bool:
    """Every array leaf of `shape` has an integer or pred element type."""
    return all(
        leaf.element_type == "pred" or re.fullmatch(r"[su]\d+", leaf.element_type) is not None
        for leaf in shape.leaves()
    )


def _is_float_arithmetic(op: HloOp) -> bool:
    """What `fold-float-arithmetic=false` keeps unfolded: an instruction that computes
    (not structural, no data movement, no called computation: those are judged by what
    they call) with a result or operand that is not all integers or preds."""
    if op.OPCODE in _STRUCTURAL or op.OPCODE in _DATA_MOVEMENT or op.callees():
        return False
    return not _integral_or_pred(op.shape) or not all(
        _integral_or_pred(value_shape(v)) for v in op.operands
    )


def _elided(op: HloOp) -> bool:
    """A constant whose value the text left out (`{...}`), or a tuple holding one."""
    if op.OPCODE == "constant":
        return op.attr("value").literal.elided
    return op.OPCODE == "tuple" and any(_elided(o) for o in map(owner, op.operands) if o)


def _rewrites_users(op: HloOp) -> bool:
    """XLA's `CanRewriteTupleUsers`: not the root, and every user an array-shaped
    get-tuple-element without control dependencies (each then becomes a leaf constant)."""
    if is_root(op):
        return False
    for use in op.result.uses:
        user = use.operation
        if (
            not isinstance(user, HloOp)
            or user.OPCODE != "get-tuple-element"
            or not isinstance(user.shape, ArrayShape)
            or user.attr("control-predecessors")
            or is_control_predecessor(user)
        ):
            return False
    return True


def _literal_of(value: Any, shape: Shape) -> Literal | None:
    """The interpreter's `value` as a literal of `shape` (None where it does not fit, or
    where no text can hold it)."""
    if isinstance(shape, TupleShape):
        if not isinstance(value, tuple) or len(value) != len(shape.elements):
            return None
        leaves = [_literal_of(v, e) for v, e in zip(value, shape.elements, strict=True)]
        if any(leaf is None for leaf in leaves):
            return None
        return Literal(elements=tuple(leaf for leaf in leaves if leaf is not None))
    assert isinstance(shape, ArrayShape)  # (_foldable_shape)
    arr = np.asarray(value)
    if arr.shape != shape.dims:
        return None
    arr = arr.astype(numpy_dtype(shape.element_type), copy=False)
    if arr.dtype.kind == "c" and (np.isnan(np.real(arr)) & ~np.isnan(np.imag(arr))).any():
        return None  # no text form: XLA's parser reads a `(nan, x)` element as (nan, nan)
    return Literal(arr)


def _literal_value(literal: Literal) -> Any:
    """A literal as the interpreter holds values: an array, or a tuple of values."""
    if literal.elements is not None:
        return tuple(_literal_value(e) for e in literal.elements)
    return literal.array


def _foldable_shape(shape: Shape) -> bool:
    """An array, or a tuple of them (nested), none dynamic: what a constant can hold."""
    if isinstance(shape, ArrayShape):
        return not shape.is_dynamic
    return isinstance(shape, TupleShape) and all(_foldable_shape(e) for e in shape.elements)


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
            return _literal_value(o.attr("value").literal)
        if o.OPCODE == "broadcast":
            return self.value(o, [self.operand_value(o.operands[0])])
        if o.OPCODE == "tuple":
            return tuple(self.operand_value(v) for v in o.operands)
        return self.value(o, [])


@dataclass
class FoldConstantInstruction(RewritePattern):
    """`f(constant, constant...) -> constant(f(...))`, evaluated by the interpreter."""

    OPCODES: ClassVar[tuple[str, ...]] = tuple(o for o in EVERY_OPCODE if o not in _NEVER_FOLD)

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
        if not _FOLDS(op):
            return False
        operands = op.operands  # (an instruction's, `_FOLDS` says: a tuple, indexed in C)
        return bool(operands) and _may_fold_from(operands[0])

    def select(self, ops: list[Operation]) -> list[Operation]:
        """`wants` over a list (the opcode tested per op class)."""
        return [
            op
            for op in _FOLDS.ops(ops)
            if (operands := op.operands) and _may_fold_from(operands[0])
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
        literal = _literal_of(result, op.shape)
        if literal is None:
            return
        if isinstance(op.shape, TupleShape) and self.opts.is_layout_sensitive:
            self._fold_into_users(op, literal, rewriter)
            return
        c = self._constant(rewriter, literal, op.shape, op)
        self.ctx.note(self, op, f"-> {c.inst_name}")
        replace_op(rewriter, op, c.result)
        self.evaluator.edited()

    def _constant(self, rewriter: PatternRewriter, literal: Literal, shape: Shape,
                  like: HloOp) -> HloOp:  # fmt: skip
        """A new constant of `shape` holding `literal`, before `like`, with its metadata."""
        if isinstance(shape, ArrayShape):
            assert literal.array is not None  # (_literal_of built it for this shape)
            c = constant_from_numpy(rewriter, self.ctx, literal.array, shape, before=like)
        else:
            c = create_op("constant", [], shape, self.ctx.names.fresh("constant"),
                          {"value": ShapedLiteral(shape, literal)})  # fmt: skip
            rewriter.insert(c, InsertPoint.before(like))
        if like.attr("metadata") is not None:  # XLA's folded constant keeps the op's metadata
            c.set_attr("metadata", like.attr("metadata"))
        return c

    def _fold_into_users(self, op: HloOp, literal: Literal, rewriter: PatternRewriter) -> None:
        """`gte_i(op)` -> `constant(leaf i)` for each user of a tuple-shaped `op` (the
        layout-sensitive fold: no tuple constant), then `op` goes once unused."""
        assert literal.elements is not None
        for use in list(op.result.uses):
            user = use.operation
            assert isinstance(user, HloOp)  # (_rewrites_users: a get-tuple-element)
            leaf = literal.elements[user.attr("index")]
            c = self._constant(rewriter, leaf, user.shape, user)
            self.ctx.note(self, user, f"-> {c.inst_name}")
            rewriter.replace_all_uses_with(user.result, c.result)
            rewriter.erase(user)
        erase_dead(rewriter, [op.result])
        self.evaluator.edited()

    def _foldable(self, op: HloOp) -> bool:
        opcode = op.OPCODE
        if opcode in _NEVER_FOLD:
            return False
        # the operands first: almost every instruction has one that is no constant (a
        # loop, not `all(...)`: its generator cost more than the test, on every visit)
        operands = op.operands
        if not operands:
            return False
        for v in operands:
            if not _is_foldable_operand(v):
                return False
        if has_side_effect(op) or is_random(op):
            return False
        if opcode == "while" and not self.opts.folds_while:
            return False
        if not _foldable_shape(op.shape):
            return False
        if op.attr("control-predecessors") or is_control_predecessor(op):
            return False
        if not self.opts.fold_float_arithmetic and _is_float_arithmetic(op):
            return False
        if (
            isinstance(op.shape, TupleShape)
            and self.opts.is_layout_sensitive
            and not _rewrites_users(op)
        ):
            return False  # (no tuple constant then: its users take the leaves)
        # every foldable operand is the result of an HloOp, so this keeps all of them
        owners = [o for o in map(owner, operands) if o is not None]
        # (XLA's aggressive level folds operands that are only broadcasts or iotas too)
        if self.opts.level != "aggressive" and not _any_constant(op):
            return False
        if opcode in ("bitcast", "bitcast-convert") and _changes_sub_byte_width(op):
            return False
        if opcode == "pad" and owners[0].OPCODE == "broadcast":
            return False
        limit = self.opts.max_elements
        if _elements(op.result) > limit or any(_elements(v) > limit for v in operands):
            return False
        if any(_elided(o) for o in owners):
            return False
        return all(self._comp_foldable(name) for name in op.callees())

    def _comp_foldable(self, name: str) -> bool:
        """No side effects, rng, after-all, custom-call, infeed/outfeed inside (recursively),
        nor float arithmetic with `fold-float-arithmetic=false`."""
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
                    or (not self.opts.fold_float_arithmetic and _is_float_arithmetic(inner))
                    or not all(self._comp_foldable(c) for c in inner.callees())
                ):
                    ok = False
                    break
        self.foldable_comps[name] = ok
        return ok


@dataclass(frozen=True)
class ConstantFoldingPass(TrackedPass):
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

    fold_float_arithmetic: bool = True
    """XLA's option. False folds only what cannot round differently on a backend than in
    the evaluator: instructions whose result and operands are integers or preds, data
    movement of any type (bitcast(-convert), concatenate, copy, dynamic-(update-)slice,
    pad, reshape, reverse, select, slice, transpose), and calls, fusions, reduces, ...
    whose called computations hold nothing else (for late pipelines, whose numerics are
    fixed already)."""

    is_layout_sensitive: bool = False
    """XLA's option (after layout assignment): no tuple constant is ever built. A
    tuple-shaped instruction folds only when it is not the root and every user is an
    array-shaped get-tuple-element without control dependencies: each user becomes the
    constant of its leaf (with the user's layout)."""

    def run_tracked(self, module: ModuleOp, scope: Scope, rctx: RewriteContext) -> bool:
        from hlopass.passes.constant_propagation import propagate_call_constants

        changed = self.propagate_into_calls and propagate_call_constants(
            module, rctx, scope.changed, scope
        )
        fused = fusion_computations(module, scope)
        all_comps = computations(module)
        comps = [c for c in scope.select(all_comps) if c.comp_name not in fused]
        pattern = FoldConstantInstruction(
            rctx, self, Evaluator(module, self), {c.comp_name: c for c in all_comps}, {}
        )
        # radius 2: whether an instruction folds depends on its operands' definitions and,
        # through a broadcast or a tuple operand (of a broadcast), on theirs: a fold two
        # uses up (`add(c, broadcast(xor(c1, c2)))`, `while(tuple(broadcast(...)))`)
        return run_patterns(module, [pattern], comps, scope, radius=2) or changed
