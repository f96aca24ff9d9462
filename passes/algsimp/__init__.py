"""`algsimp`: algebraic simplification (XLA's AlgebraicSimplifier), one pattern per rewrite.

One module per rewrite family (`identities`, `reassociation`, `reduce`, `slice`, ...), each
pattern's docstring starting with its rewrite; shared predicates in `helpers`, the common
guards (shape, sharding, control predecessors) in `base`. The options carry the names of
XLA's `AlgebraicSimplifierOptions` where they change what a researcher would toggle.
Rewrites that can change floating-point results (reassociation, `x * 0 -> 0`,
`a / c -> a * (1/c)` for a `c` that is not a power of two, `log(exp(x)) -> x`, ...) run only
with `enable-floats-are-real` (or its older name `float-unsafe`); for integers they always run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.passes.algsimp import (
    abs,
    barriers,
    bitcast,
    broadcast,
    collectives,
    compare,
    complex,
    concatenate,
    constants,
    convert,
    convolution,
    dot,
    dynamic_slice,
    gather_scatter,
    identities,
    integer,
    minmax,
    pad,
    power,
    reassociation,
    reduce,
    reduce_window,
    reverse,
    select,
    slice,
    transpose_reshape,
    tuples,
)
from hlopass.passes.algsimp.base import Simplification, SimplificationApplier
from hlopass.rewriting import (
    HloModulePass,
    OpcodeDispatchApplier,
    RewriteContext,
    Scope,
    TraceHook,
    fusion_computations,
)
from hlopass.worklist import DEFAULT_RADIUS, Driver

RADIUS = DEFAULT_RADIUS
"""How many uses away from a change an algsimp pattern's decision may look (`hlopass.worklist`):
the deepest operand chains the patterns match (`maximum(minimum(x, broadcast(c)), ...)`)."""


@dataclass(frozen=True)
class AlgebraicSimplifierPass(HloModulePass):
    """Algebraic simplifications (XLA's algsimp), run to a fixed point per computation."""

    name: ClassVar[str] = "algsimp"

    float_unsafe: bool = False
    """Also apply rewrites that may change floating-point results (the older name of
    `enable-floats-are-real`; either one turns them on)."""

    include_fusions: bool = False
    """Also simplify fused computations (XLA skips them)."""

    enable_floats_are_real: bool = False
    """XLA's fast-math switch: treat floats as real numbers (no inf, nan or rounding), which
    allows reassociation, `x * 0 -> 0`, `x - x -> 0`, `log(exp(x)) -> x`, ..."""

    is_layout_sensitive: bool = False
    """Layouts are fixed (after layout assignment): no rewrite may change a layout, and
    rewrites that would need a new layout (e.g. transpose -> reshape) do not fire."""

    enable_dot_strength_reduction: bool = True
    """Rewrite dots with a degenerate (vector or size-1) side into multiply + reduce."""

    enable_dot_to_multiply_rewrite: bool = True
    """Rewrite a dot that contracts nothing (an outer product) or of scalars into a multiply."""

    enable_conv_simplification: bool = True
    """Rewrite a convolution with a 1x..x1 window (no stride, padding, dilation or groups)
    into a dot."""

    enable_conv_operand_swap: bool = True
    """Swap a convolution's input and kernel when the window is larger than the input
    (fewer window positions to sum over)."""

    use_associative_reordering: bool = False
    """Reorder dot chains `(A B) C <-> A (B C)` when it saves flops (XLA's option)."""

    associative_reordering_threshold: float = 2.0
    """Reorder a dot chain only when the other order needs this many times fewer flops."""

    run_to_fixed_point: bool = True
    """Reapply the patterns until nothing changes; false: one sweep over each computation."""

    @property
    def floats_are_real(self) -> bool:
        return self.enable_floats_are_real or self.float_unsafe

    def enables(self, cls: type[Simplification]) -> bool:
        """`cls` may fire with these options (its option on; no layout change when layouts
        are fixed): the others are not offered any instruction, they would refuse it."""
        if cls.OPTION and not getattr(self, cls.OPTION):
            return False
        return not (cls.LAYOUT_CHANGING and self.is_layout_sensitive)

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        return self.run_scoped(ctx, module, Scope(), trace)

    def run_scoped(self, ctx: Context, module: ModuleOp, scope: Scope,
                   trace: TraceHook | None = None) -> bool:  # fmt: skip
        scope.tracked = True
        rctx = RewriteContext.of(module, trace, scope)
        patterns: list[RewritePattern] = [cls(rctx, self) for cls in PATTERNS if self.enables(cls)]
        patterns.append(barriers.OptBarrierDropUnusedElements(rctx, self))
        fused = set() if self.include_fusions else fusion_computations(module, scope)
        before = computations(module)
        comps = [c for c in scope.select(before) if c.comp_name not in fused]
        applier = SimplificationApplier(patterns, rctx)  # each op to its opcode's patterns
        driver = Driver(applier, True, RADIUS, scope.exhaustive)
        changed = False
        for comp in comps:
            if not self.run_to_fixed_point:
                if _one_sweep(applier, comp):
                    scope.changed.add(comp)
                    changed = True
                continue
            walk = driver.rewrite(comp.block, scope.seeds_of(comp))
            if scope.record(comp, walk):
                changed = True
                scope.settled.add(comp)  # the driver stops after a walk changing nothing
        if len(computations(module)) != len(before):  # a rewrite added a reducer
            known = set(before)
            scope.changed.update(c for c in computations(module) if c not in known)
        return changed


def _one_sweep(applier: OpcodeDispatchApplier, comp: ComputationOp) -> bool:
    """Offer each instruction of `comp` (as it was before the sweep) to the patterns once,
    in order; what a rewrite creates or changes is not revisited."""
    changed = False
    for op in list(comp.block.ops):
        if op.parent is None or not isinstance(op, HloOp):
            continue  # erased by an earlier rewrite, or the return
        rewriter = PatternRewriter(op)
        applier.match_and_rewrite(op, rewriter)
        changed |= rewriter.has_done_action
    return changed


PATTERNS: tuple[type[Simplification], ...] = (  # the single-instruction replacements
    identities.AddZero, reassociation.AddConstantReassociation,
    reassociation.AddConstantChain, reassociation.SubtractConstantChain,
    reassociation.AddFactorCommonMultiplicand,
    identities.SubtractZero, integer.SubtractSelf,
    identities.MultiplyOne, integer.MultiplyZero, reassociation.MultiplyNegNeg,
    reassociation.MultiplyConstantReassociation,
    identities.DivideOne, integer.DivideUnsignedPowerOfTwo, reassociation.DivideByConstant,
    power.DivideBySqrt, reassociation.DivideOfDivides, reassociation.DivideOfDivide,
    reassociation.DivideByDivide, power.ExpDivideExp, power.DivideByExp, power.DivideByPower,
    power.ExpMultiplyExp, power.PowerOfExp, power.LogOfSqrt,
    integer.RemainderUnsignedPowerOfTwo,
    identities.AndTrue, identities.OrFalse, identities.AndOrSelf,
    identities.NegateNegate, identities.NotNot,
    power.LogOfExp, power.PowerOne, power.PowerZero, power.PowerTwo, power.PowerMinusOne,
    minmax.MaxMinSelf, minmax.MaxOfLowest, minmax.MinOfHighest, minmax.MaxMinAbsorb,
    minmax.ClampOfClamp,
    compare.CompareSelf, compare.CompareUnsignedZero, compare.ComparePredicateConstant,
    select.SelectSameBranches, select.SelectConstantPredicate, select.SelectOfNot,
    select.SelectBooleans,
    tuples.GetTupleElementOfTuple,
    constants.SplatConstantToBroadcast, constants.IotaConstantToIota,
    broadcast.BroadcastOfBroadcast, broadcast.BroadcastNoop, broadcast.BroadcastToReshape,
    transpose_reshape.ReshapeNoop, transpose_reshape.ReshapeOfReshape,
    transpose_reshape.ReshapeOfScalarBroadcast,
    transpose_reshape.TransposeIdentity, transpose_reshape.TransposeOfTranspose,
    bitcast.CopyNoop, bitcast.CopyOfCopy,
    slice.SliceNoop, slice.SliceOfSlice,
    concatenate.ConcatenateSingle, concatenate.ConcatenateDropEmpty,
    concatenate.ConcatenateFlatten,
    pad.PadNoop, pad.PadOfEmpty,
    dynamic_slice.DynamicSliceFull, dynamic_slice.DynamicUpdateSliceFull,
    reduce.ReduceTrivial, reduce.ReduceOfEmpty, reduce_window.ReduceWindowTrivial,
    dot.DotOfEmpty, dot.DotOfScalars, dot.DotToMultiply, convolution.ConvolutionOfEmpty,
    convert.ConvertNoop, convert.ConvertRoundTrip, complex.RealOfComplex,
    complex.ComplexOfRealImag,
    # families added after the split (each with XLA's guards)
    abs.AbsOfNonNegative, abs.SquareOfAbs,
    complex.RealOfReal, complex.ImagOfReal,
    power.PowerHalfToSqrt, power.ExpOfZero,
    select.SelectToOrAnd,
    minmax.MinMaxToClamp,
    reverse.ReverseOfReverse, reverse.ReverseDegenerate, reverse.ReverseOfScalarBroadcast,
    compare.CompareAgainstTypeBound, compare.CompareAbsLessThanZero,
    integer.XorSelf, integer.AddOfSubtractCancel, integer.RemainderOfIota,
    integer.SubtractOfSubtractCancel, integer.SubtractOfAddCancel, integer.AddMinusOperand,
    slice.SliceOfScalarBroadcast, slice.SliceOfConcatenate, slice.SliceOfPad,
    slice.SliceOfReverse,
    dynamic_slice.DynamicSliceConstantIndices, dynamic_slice.DynamicSliceOfScalarBroadcast,
    dynamic_slice.DynamicUpdateSliceEmptyUpdate,
    gather_scatter.GatherOfEffectiveScalar, gather_scatter.ScatterEmptyUpdates,
    convert.ConvertNarrowing, convert.BitcastConvertChain,
    transpose_reshape.TransposeIsReshape,
    concatenate.ConcatenateOfSameScalarBroadcast,
    reduce.ReduceOfScalarBroadcast,
    broadcast.BroadcastSinkBinary, select.SelectNestedSamePredicate, bitcast.BitcastOfBitcast,
    bitcast.MoveToBitcast,
    compare.CompareIotaAgainstBound, dynamic_slice.DynamicUpdateSliceOfBroadcastToPad,
    # families completed for issue 18 (XLA's algebraic_simplifier.cc, its guards)
    integer.DivideSignedPowerOfTwo, integer.RemainderSignedPowerOfTwo,
    integer.RemainderOfRemainder, integer.RemainderOfIotaPlusDivisor,
    dot.DotStrengthReduction, dot.DotOfTransposes,
    reduce.ReduceOfConcatenate, reduce.ReduceOfBroadcastIdempotent,
    slice.SliceOfBroadcast, slice.SliceRedundantStride, pad.PadOfScalarBroadcast,
    select.SelectOfCompareToMinMax, select.SelectOfPredCompare, power.DivideByRsqrt,
    convolution.ConvolutionToDot, dot.DotAssociativeReordering,
    dynamic_slice.DynamicSliceOfIota, dynamic_slice.DynamicSliceTrivialIndex,
    dynamic_slice.DynamicUpdateSliceTrivialIndex, broadcast.BroadcastDropDegenerateDims,
    transpose_reshape.ReshapeOfIota,
    broadcast.BroadcastSinkUnary, power.RsqrtOfReciprocal, power.RsqrtOfPowerMinusTwo,
    dynamic_slice.DynamicSliceOfTranspose, reduce_window.ReduceWindowOfPad,
    broadcast.BroadcastSinkBinaryWithScalar, broadcast.BroadcastSinkTernary,
    dynamic_slice.DynamicSliceOfBroadcast, reduce.ReduceOfBatchDot,
    reverse.ReverseOfElementwiseWithConstant, pad.PadOfBroadcast,
    # gather/scatter, batch dots, convolution swap, collectives (issue 18, part B)
    gather_scatter.GatherOfEmpty, gather_scatter.GatherOfPad, gather_scatter.GatherOfReshapeOfPad,
    gather_scatter.GatherOfVerySmallVector, gather_scatter.ScatterOfWholeWindowToMap,
    gather_scatter.AddOfScatters, gather_scatter.AddOfScatter,
    dot.DotOfBatchTransposes, dot.TransposeOfDot, convolution.ConvolutionOperandSwap,
    convolution.ConvolutionToMultiply,
    collectives.AllGatherOfBroadcast, collectives.AllToAllOfBroadcast,
    collectives.AllReduceMinMaxOfBroadcast, collectives.AllReduceSumOfBroadcast,
    # reductions, windows, slices, powers (issue 18, part A)
    reduce.ReduceArgMinMaxOfConstantBroadcast, reduce_window.ReduceWindowOfEmpty,
    reduce_window.ReduceWindowOfScalar, reduce_window.ReduceWindowCumSumOfBroadcast,
    reduce_window.ReduceWindowToReduce, slice.SliceOfReduceWindow, power.PowerThree,
    reduce.ReduceVariadicSingle, reduce_window.ReduceWindowVariadicSingle,
    reduce.ReduceOfBroadcastCommute, reduce.ReduceAddOfBroadcast, reduce.ReduceOfNegate,
    slice.SliceOfPadPaddingOnly, slice.SliceUndoesPad,
    reduce.ReduceMaxOfArgMaxOperand,
)  # fmt: skip
"""Every pattern, in the order the greedy applier tries them on an instruction."""

__all__ = ["PATTERNS", "AlgebraicSimplifierPass", "Simplification"]
