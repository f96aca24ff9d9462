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
from functools import cache
from typing import ClassVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.driver.worklist import DEFAULT_RADIUS, Driver
from hlopass.passes.algsimp import (
    abs,
    barriers,
    bitcast,
    broadcast,
    collectives,
    compare,
    complex,
    concatenate,
    conditional,
    constants,
    convert,
    convolution,
    copy_bitcast,
    custom_call,
    dot,
    dot_reorder,
    dynamic_slice,
    factors,
    gather_scatter,
    identities,
    integer,
    maps,
    minmax,
    pad,
    power,
    reassociation,
    reduce,
    reduce_window,
    reverse,
    select,
    slice,
    sort,
    transpose_reshape,
    tuples,
)
from hlopass.passes.algsimp.base import Simplification, SimplificationApplier
from hlopass.rewriting import (
    OpcodeDispatchApplier,
    RewriteContext,
    Scope,
    TrackedPass,
    fusion_computations,
)

RADIUS = DEFAULT_RADIUS
"""How many uses away from a change an algsimp pattern's decision may look (`hlopass.driver.worklist`):
the deepest operand chains the patterns match (`maximum(minimum(x, broadcast(c)), ...)`)."""


@dataclass(frozen=True)
class AlgebraicSimplifierPass(TrackedPass):
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

    supports_non_canonical_dots: bool = True
    """The backend takes dots whose contracting dims are not the last ones (XLA's option):
    false keeps `reduce(dot)` over batch dims as it is (no dot contracting them)."""

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

    enable_conv_add_multiply_reorder: bool = False
    """Fold a per-output-feature scaling of `convolution + bias` into a constant kernel:
    `(conv(x, k) + bias) * c -> conv(x, k * c) + bias * c` (XLA's option)."""

    unconditionally_simplify_reduce_of_transpose_or_reshape: bool = False
    """Move a reduce before a reshape of the dims it keeps even when the reshape has other
    uses (XLA's option; by default only a reshape used once)."""

    run_to_fixed_point: bool = True
    """Reapply the patterns until nothing changes; false: one sweep over each computation."""

    enable_sink_broadcast: bool = True
    """Move a broadcast past the elementwise ops that use it (`f(broadcast(x)) ->
    broadcast(f(x))`; XLA's option)."""

    enable_negative_padding_replacement: bool = True
    """Rewrite a pad with negative edge padding into a slice of a pad without it (XLA's
    option)."""

    raise_slice_and_reduce_through_dot: bool = False
    """Move a slice or an add-reduce of a dot's result onto its operands (`slice(dot) ->
    dot(slice, slice)`, `reduce(dot) -> dot(reduce, reduce)`; XLA's option)."""

    raise_slice_and_reduce_through_dot_threshold: float = 2.0
    """Move a reduce onto a dot's operands only when that needs this many times fewer flops."""

    rewrite_reshape_transpose_as_slice_concatenate: bool = True
    """XLA's option for rewriting a depth-to-space `reshape(transpose(reshape(x)))` into a
    concatenate of slices; hlopass has no such rewrite, so either value leaves it alone."""

    enable_scalar_multiply_reduction: bool = False
    """Move the scalar factors of a convolution's operands (multiplies by a broadcast
    constant) to the smallest of its output and operands (XLA's option; floats-are-real)."""

    executing_on_cpu: bool = False
    """The module runs on a CPU (XLA's option): a dot is strength-reduced only when both
    operands hold nothing but batch and contracting dimensions (vector products)."""

    cudnn_batchnorm_forward_training_metadata: str = ""
    """The custom-call target of a batch-norm forward-training call: element 2 of its
    result (the variance) is known to be >= 0, so `abs` of it goes ("": none)."""

    # options of cases 444-564 (block D)
    rewrite_no_op_bitcast_convert_to_bitcast: bool = False
    """With fixed layouts, a bitcast-convert that leaves the bytes where they are (same
    shape, or the split/merged dim the most minor and densely packed) becomes a bitcast."""

    use_convert_constant_folding: bool = False
    """Fold `convert(constant)` into a constant of the new type (not to a wider type, not
    to a sub-byte type; the constant used once)."""

    disable_dynamic_slice_to_slice_conversion: bool = False
    """Keep a dynamic-slice whose start indices are all constants (no slice made of it)."""

    enable_remove_no_op_reduce_precision: bool = False
    """Remove a reduce-precision to the operand's own exponent and mantissa widths."""

    enable_conditional_simplification: bool = False
    """Rewrite a conditional whose branch index is `convert(pred)` into a pred conditional
    (the two branches swapped)."""

    enable_hoist_transpose_of_reshape: bool = False
    """Rewrite `reshape(transpose(reshape(x)))` whose transpose moves whole groups of the
    dims the inner reshape split into `transpose(reshape(x))`."""

    enable_move_dot_param_to_rhs: bool = False
    """Swap a dot whose lhs is parameter-like (a parameter under one-operand ops) and whose
    rhs is not into `transpose(dot(rhs, lhs))`."""

    enable_fold_transpose_into_scatter: bool = False
    """Rewrite `transpose(scatter(o, i, u))` into a scatter of the transposed operand and
    updates (dimension numbers remapped; not with batching dims)."""

    @property
    def floats_are_real(self) -> bool:
        return self.enable_floats_are_real or self.float_unsafe

    def enables(self, cls: type[Simplification]) -> bool:
        """`cls` may fire with these options (its option on; no layout change when layouts
        are fixed): the others are not offered any instruction, they would refuse it."""
        if cls.OPTION and not getattr(self, cls.OPTION):
            return False
        return not (cls.LAYOUT_CHANGING and self.is_layout_sensitive)

    def run_tracked(self, module: ModuleOp, scope: Scope, rctx: RewriteContext) -> bool:
        def make(cls: type) -> RewritePattern:
            return cls(rctx, self)

        fused = set() if self.include_fusions else fusion_computations(module, scope)
        before = computations(module)
        comps = [c for c in scope.select(before) if c.comp_name not in fused]
        # each op to its opcode's patterns, built when an op of that opcode first comes
        applier = SimplificationApplier([], rctx, (_enabled(self), make))
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


@cache
def _enabled(opts: AlgebraicSimplifierPass) -> tuple[type[RewritePattern], ...]:
    """The pattern classes `opts` enables, in order, then the opt-barrier cleanup (asked
    once per distinct options: the pass is a frozen dataclass)."""
    return (*(c for c in PATTERNS if opts.enables(c)), barriers.OptBarrierDropUnusedElements)


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
    copy_bitcast.SwapCopyBitcastCopy,  # (XLA tries it before the other copy rewrites)
    bitcast.CopyNoop, bitcast.CopyOfCopy,
    slice.SliceNoop, slice.SliceOfSlice,
    concatenate.ConcatenateSingle, concatenate.ConcatenateDropEmpty,
    concatenate.ConcatenateFlatten,
    pad.PadNoop, pad.PadOfEmpty,
    dynamic_slice.DynamicSliceFull, dynamic_slice.DynamicUpdateSliceFull,
    reduce.ReduceTrivial, reduce.ReduceOfEmpty, reduce_window.ReduceWindowTrivial,
    dot.DotOfEmpty, dot.DotOfScalars, dot.DotToMultiply,
    dot_reorder.AssociativeReorderNestedDot,  # (before the other dot rewrites, as XLA)
    convolution.ConvolutionOfEmpty,
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
    convolution.ConvolutionToDot,
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
    # XLA's algebraic_simplifier_test, cases 1-200: the rewrites the first port lacked
    # (block A)
    identities.AddConstantToRight, identities.SubtractConstantToAdd,
    reassociation.DivideByConstantArray, reassociation.MultiplyOfConstantProducts,
    reassociation.MultiplyByBroadcastOfScalarProduct,
    reassociation.MultiplyOfBroadcastScalarChain, power.LogOfPower,
    concatenate.ConcatenateOfOnlyEmpty, concatenate.ConcatenateOfAdjacentSlices,
    concatenate.ConcatenateOfBroadcastToPad, maps.MapOfElementwise,
    reduce_window.ReduceWindowTrivialPadded, reduce.ReduceOfReduce,
    reduce.ReduceOfReshapeOfKeptDims,
    transpose_reshape.TransposeReshapeChainIdentity,
    select.SelectOfDynamicUpdateSlice,
    transpose_reshape.ReshapeOfRng,
    convolution.ConvolutionAddMultiplyReorder,
    bitcast.ReshapeOrCopyChainToBitcast,
    # cases 201-321 (block B)
    factors.ReshapeOfBroadcastKeepingDims, factors.ReshapeOfIotaToIotas,
    factors.BroadcastOfDegenerateReshape, factors.BroadcastOfIota, factors.IotaOfSizeOne,
    pad.PadTrivialInterior, pad.PadNegativeToSlice, integer.XorZero, integer.XorOfIdentical,
    transpose_reshape.TransposeOfScalarBroadcast, constants.TupleConstantToTuple,
    sort.SortOfOneElementRows, concatenate.ConcatenateOfOneRowCopies,
    dynamic_slice.DynamicSliceOfDegenerateReshape, slice.SliceOfReshape,
    reduce_window.ReduceWindowOfConvertedPad, convolution.ConvolutionOfPaddedInput,
    convolution.ConvolutionOfInteriorPaddedKernel, convolution.ConvolutionToBitcastDot,
    dot.DotOperatorReorder, dot.SliceOfDotToDotOfSlices, dot.ReduceOfDotToDotOfReduces,
    transpose_reshape.DepthToSpaceAsConcatenate,
    # cases 322-443 (block C)
    compare.CompareGreaterOfMaxMin, compare.CompareNeZeroOfSelectOfCompareGe,
    compare.AndOfLessThans,
    power.MultiplySqrtSelf, power.MultiplyRsqrtSelf, power.SqrtOfSquare,
    reassociation.DivideByBroadcast,
    abs.AbsOfBatchNormVariance,
    slice.SliceOfConcatenateOperands,
    dot.DotReorderContractingDims, dot.DotOfConcatenateAndConstant,
    dot.DotOfDynamicSliceOfConstant, dot.DotRemoveDegenerateDims,
    transpose_reshape.ReshapeToEmpty,
    reduce_window.ReduceWindowEffectiveBroadcast,
    dynamic_slice.AddOfDynamicUpdateSliceOfZeros, dynamic_slice.ReshapeOfDynamicUpdateSlice,
    gather_scatter.GatherOfPadWithPaddedBatchDims,
    convolution.ConvolutionScalarMultiplyReduction,
    # cases 444-564 (block D)
    convert.ConvertOfConstant, convert.BitcastConvertToBitcast, identities.ReducePrecisionNoop,
    pad.PadOfBroadcastReorder, constants.StridedIotaConstantToIota,
    dynamic_slice.DynamicSliceOfScaledIota, broadcast.BroadcastIsTranspose,
    transpose_reshape.TransposeOfBroadcast, minmax.ClampOfPartitionId,
    custom_call.SliceToDynamicOfPadToStatic, custom_call.LayoutConstraintToCopy,
    minmax.MaxOfNondecreasing, select.MultiplyOfConvertedPred,
    reverse.ReverseOfDegenerateReshape, bitcast.BitcastOfUnaryOfBitcast,
    convert.ConvertNarrowingUnsignedDivide, transpose_reshape.HoistTransposeOfReshape,
    gather_scatter.TransposeOfScatter, conditional.ConditionalOfConvertedPred,
    convert.BitcastConvertOfConcatenate, dot.MoveDotParamToRhs,
)  # fmt: skip
"""Every pattern, in the order the greedy applier tries them on an instruction."""

__all__ = ["PATTERNS", "AlgebraicSimplifierPass", "Simplification"]
