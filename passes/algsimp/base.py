"""The base class of every algsimp pattern: matching, guards common to all rewrites, builders.

A pattern names its opcodes, says whether it may change float results (`FLOAT_UNSAFE`), and
returns the value that replaces the matched instruction (or None). The guards every
replacement keeps (as XLA's `ReplaceInstructionIfCompatible` does) live here, once:
the shape and layout must be equal, an instruction with control predecessors or successors
stays, and a sharding is never dropped (a replacement with a different sharding is refused;
one without takes the old one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.driver.worklist import note_modified
from hlopass.ir.shape import ArrayShape, Shape
from hlopass.passes.algsimp.helpers import is_float_op, is_scalar_broadcast
from hlopass.rewriting import (
    OpcodeDispatchApplier,
    RewriteContext,
    constant_from_numpy,
    erase_dead,
    is_hlo,
    new_op,
    owner,
    replace_op,
    same_shape,
    scalar_constant,
    value_shape,
)

if TYPE_CHECKING:
    from hlopass.passes.algsimp import AlgebraicSimplifierPass


def sharding_text(op: HloOp | None) -> str | None:
    """The sharding of `op` as text (None when it has none)."""
    if op is None:
        return None
    s = op.attr("sharding")
    return None if s is None else str(getattr(s, "text", s))


@dataclass
class Simplification(RewritePattern):
    """Base: match `OPCODES`, call `rewrite`, replace the op with the value it returns."""

    ctx: RewriteContext
    opts: AlgebraicSimplifierPass
    OPCODES: ClassVar[tuple[str, ...]] = ()
    FLOAT_UNSAFE: ClassVar[bool] = False
    """The rewrite may change float results: for floats it needs `enable-floats-are-real`."""
    SIGNED_ZEROS_ONLY: ClassVar[bool] = False
    """A FLOAT_UNSAFE rewrite whose only change to a float result is the sign of a zero (or
    of a NaN): `no-signed-zeros` is enough for it."""
    LAYOUT_CHANGING: ClassVar[bool] = False
    """The rewrite builds a reshape/transpose whose layout XLA would have to choose: it does
    not run with `is-layout-sensitive` (layouts fixed)."""
    OPTION: ClassVar[str] = ""
    """The pass option (field name) that must be true for this pattern to run ("" = always)."""
    OPERAND_FROM: ClassVar[frozenset[str]] = frozenset()
    """Opcodes one of which must define some operand for the rewrite to apply (empty: no
    such need), e.g. `{"negate"}` for `multiply(negate(a), negate(b))`: a necessary
    condition only, read as data by `SimplificationApplier`, which then does not offer the
    pattern an instruction whose operands come from none of them (the pattern itself still
    checks everything). Most instructions match none of their opcode's patterns, and a
    refused offer cost a call and the pattern's first operand walks."""
    _rw: PatternRewriter | None = field(default=None, init=False, repr=False)
    _created: list[HloOp] = field(default_factory=list, init=False, repr=False)
    _float_guard: bool = field(default=False, init=False, repr=False)
    """FLOAT_UNSAFE without `floats_are_real`: float instructions are refused (fixed for
    the pass run; asked at every offer)."""

    def __post_init__(self) -> None:
        allowed = self.opts.floats_are_real or (
            self.SIGNED_ZEROS_ONLY and self.opts.no_signed_zeros
        )
        self._float_guard = self.FLOAT_UNSAFE and not allowed

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_hlo(op) or op.OPCODE not in self.OPCODES:
            return
        if self.OPTION and not getattr(self.opts, self.OPTION):
            return
        if self.LAYOUT_CHANGING and self.opts.is_layout_sensitive:
            return
        if op.inst_name in self.ctx.pinned:
            return  # another instruction names it in control-predecessors: it must stay
        if "control-predecessors" in op.properties:
            return  # it has control predecessors: XLA never replaces such an instruction
        self.apply(op, rewriter)

    def apply(self, op: HloOp, rewriter: PatternRewriter) -> None:
        """`match_and_rewrite` past the guards on the instruction alone (opcode, options,
        pinned), which `SimplificationApplier` checks once per instruction."""
        if self._float_guard and self._float_op(op, rewriter):
            return
        self._rw = rewriter
        self._created = []
        result = self.rewrite(op)
        if result is None:
            assert not self._created, f"{type(self).__name__} created ops without rewriting"
            return
        value = result.result if isinstance(result, HloOp) else result
        if value is op.result:
            return
        if not same_shape(value_shape(value), op.shape) or not self._keeps_sharding(op, value):
            # e.g. a layout or a sharding differs: undo what this rewrite built, keep the op
            erase_dead(rewriter, [value])
            return
        self.ctx.note(self, op, "-> " + (owner(value).inst_name if owner(value) else "?"))  # type: ignore[union-attr]
        replace_op(rewriter, op, value)

    def _float_op(self, op: HloOp, rewriter: PatternRewriter) -> bool:
        """`is_float_op(op)`, computed once per visit of `op`: every float-unsafe pattern of
        its opcode asks. A visit is known by the rewriter and its count of visits (the
        driver's `TrackingRewriter`; any other rewriter serves one visit), so an op
        revisited after a rewrite is asked afresh."""
        memo = self.ctx.float_op_memo  # [rewriter, its visit, answer] of the last visit
        visit = getattr(rewriter, "visits", -1)
        if memo[0] is not rewriter or memo[1] != visit:
            memo[:] = [rewriter, visit, is_float_op(op)]
        return memo[2]

    def _keeps_sharding(self, op: HloOp, value: SSAValue) -> bool:
        """A sharded `op` is replaced only by a value of the same sharding or of none, which
        then takes `op`'s (as XLA's `ReplaceInstruction` with `preserve_sharding` does)."""
        old = sharding_text(op)
        if old is None:
            return True
        new = owner(value)
        have = sharding_text(new)
        if have == old:
            return True
        if have is None and new is not None:
            new.set_attr("sharding", op.attr("sharding"))
            if self._rw is not None:
                note_modified(self._rw, new)
            return True
        return False

    def rewrite(self, op: HloOp) -> HloOp | SSAValue | None:
        raise NotImplementedError

    # builders (insert before the matched op)
    def new(self, opcode: str, operands: Sequence[SSAValue], shape: Shape,
            attrs: dict[str, Any] | None = None, like: HloOp | None = None) -> HloOp:  # fmt: skip
        assert self._rw is not None
        op = new_op(self._rw, self.ctx, opcode, operands, shape, attrs, like)
        self._created.append(op)
        return op

    def const(self, value: object, shape: ArrayShape) -> HloOp:
        """A scalar constant, broadcast to `shape` when `shape` is not a scalar."""
        assert self._rw is not None
        c = scalar_constant(self._rw, self.ctx, value, shape.element_type)
        self._created.append(c)
        if not shape.dims:
            return c
        return self.new("broadcast", [c.result], shape, {"dimensions": ()})

    def rebroadcast_scalar(self, op: HloOp) -> HloOp | None:
        """`op(broadcast(s)) -> broadcast(s)` of op's shape, for an op that only moves or
        picks its operand's elements (each is the scalar s); None when operand 0 is no
        broadcast of a scalar."""
        b = is_scalar_broadcast(op.operands[0])
        if b is None:
            return None
        return self.new("broadcast", [b.operands[0]], op.shape, {"dimensions": ()}, like=op)

    def array_const(self, arr: np.ndarray, shape: ArrayShape) -> HloOp:
        assert self._rw is not None
        c = constant_from_numpy(self._rw, self.ctx, arr, shape)
        self._created.append(c)
        return c


class SimplificationApplier(OpcodeDispatchApplier):
    """The dispatch of algsimp's patterns: an instruction goes to its opcode's patterns
    (all enabled by the pass's options: `AlgebraicSimplifierPass.enables`), and the guard
    every `Simplification` shares (not a pinned instruction) is checked once for all.

    Which of them an instruction is offered depends only on its opcode and the set of
    opcodes defining its operands (each pattern's `OPERAND_FROM`): that list, in pattern
    order, is worked out once per such pair and kept (a few hundred pairs on Mixtral,
    against a set test per pattern for each of its ~34k instructions)."""

    def __init__(
        self,
        patterns: Sequence[RewritePattern],
        ctx: RewriteContext,
        lazy: tuple[tuple[type[RewritePattern], ...], Callable[[type], RewritePattern]]
        | None = None,
    ):
        super().__init__(patterns)
        self.ctx = ctx
        self._lazy = lazy
        """(classes, make): patterns built only for the opcodes a computation holds, each
        once (`_select`): algsimp has some 260, a small module meets a dozen opcodes, and
        building them all per module was most of algsimp's time on the corpus
        (benchmarks/core_passes.py)."""
        self._made: dict[type, RewritePattern] = {}
        self._kinds: dict[str, list[tuple[RewritePattern, bool, frozenset[str]]]] = {}
        # (opcode, operand source opcodes) -> what to call, in order (`_offers_for`)
        self._offers: dict[tuple[str, frozenset[str]], tuple[Callable[..., None], ...]] = {}
        # opcodes none of whose patterns reads the operand sources: keyed with no sources
        self._blind: dict[str, bool] = {}
        # `apply` skips the opcode check: every Simplification must name its opcodes
        assert all(p.OPCODES for p in patterns if isinstance(p, Simplification))

    def _select(self, opcode: str | None) -> list[RewritePattern]:
        if self._lazy is None:
            return super()._select(opcode)
        classes, make = self._lazy
        out = []
        for cls in _classes_for(classes, opcode):
            p = self._made.get(cls)
            if p is None:
                p = self._made[cls] = make(cls)
            out.append(p)
        return out

    def _kinds_of(self, opcode: str) -> list[tuple[RewritePattern, bool, frozenset[str]]]:
        """(pattern, is a Simplification, OPERAND_FROM) of each of opcode's patterns
        (isinstance is slow: asked once)."""
        kinds = self._kinds.get(opcode)
        if kinds is None:
            kinds = self._kinds[opcode] = [
                (p, True, p.OPERAND_FROM) if isinstance(p, Simplification)
                else (p, False, frozenset())
                for p in self._for(opcode)
            ]  # fmt: skip
            self._blind[opcode] = not any(needs for _, _, needs in kinds)
        return kinds

    def _offers_for(self, opcode: str, sources: frozenset[str]) -> tuple[Callable[..., None], ...]:
        """The calls an unpinned instruction of `opcode` whose operands come from
        `sources` is offered to, in pattern order."""
        offers = tuple(
            pattern.apply if simplification else pattern.match_and_rewrite  # type: ignore[attr-defined]
            for pattern, simplification, needs in self._kinds_of(opcode)
            if not needs or not needs.isdisjoint(sources)
        )
        self._offers[opcode, sources] = offers
        return offers

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_hlo(op):
            super().match_and_rewrite(op, rewriter)
            return
        opcode = op.OPCODE
        names = self.ctx.pinned
        if (names and op.inst_name in names) or "control-predecessors" in op.properties:
            self._pinned(op, rewriter)
            return
        blind = self._blind.get(opcode)
        if blind is None:
            self._kinds_of(opcode)
            blind = self._blind[opcode]
        sources = _NO_SOURCES if blind else operand_sources(op)
        offers = self._offers.get((opcode, sources))
        if offers is None:
            offers = self._offers_for(opcode, sources)
        for offer in offers:
            offer(op, rewriter)
            if rewriter.has_done_action:
                return

    def _pinned(self, op: HloOp, rewriter: PatternRewriter) -> None:
        """Another instruction names `op` in control-predecessors, or `op` has some: it must
        stay, so only the patterns that are not Simplifications (which check that
        themselves) see it."""
        for pattern, simplification, _ in self._kinds_of(op.OPCODE):
            if not simplification:
                pattern.match_and_rewrite(op, rewriter)
                if rewriter.has_done_action:
                    return


_NO_SOURCES: frozenset[str] = frozenset()

_BY_OPCODE: dict[tuple[tuple[type, ...], str | None], tuple[type, ...]] = {}
"""(pattern classes, opcode) -> those offered that opcode, in order: the same few pattern
lists serve every module of a process (`SimplificationApplier._select`)."""


def _classes_for(classes: tuple[type, ...], opcode: str | None) -> tuple[type, ...]:
    found = _BY_OPCODE.get((classes, opcode))
    if found is None:
        assert all(c.OPCODES for c in classes if issubclass(c, Simplification))  # type: ignore[attr-defined]
        found = _BY_OPCODE[classes, opcode] = tuple(
            c
            for c in classes
            if not getattr(c, "OPCODES", ()) or opcode in c.OPCODES  # type: ignore[attr-defined]
        )
    return found


def operand_sources(op: HloOp) -> frozenset[str]:
    """The opcodes of the instructions defining `op`'s operands."""
    out: set[str] = set()
    for v in op.operands:  # (HloOp's own property: a tuple, made once per instruction)
        o = owner(v)
        if o is not None:
            out.add(o.OPCODE)
    return frozenset(out)
