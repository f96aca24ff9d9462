"""`algsimp`: algebraic simplification (XLA's AlgebraicSimplifier), one pattern per rewrite.

One module per rewrite family (`identities`, `reassociation`, `reduce`, `slice`, ...), each
pattern's docstring starting with its rewrite; shared predicates in `helpers`, the common
guards (shape, sharding, control predecessors) in `base`. The options carry the names of
XLA's `AlgebraicSimplifierOptions` where they change what a researcher would toggle.
Rewrites that can change floating-point results (reassociation, `x * 0 -> 0`,
`log(exp(x)) -> x`, ...) run only with `enable-floats-are-real` (or its older name
`float-unsafe`); for integers they always run. `a / c -> a * (1/c)` is not one of them: XLA
does it for every float constant without fast math.
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

    no_signed_zeros: bool = False
    """Take -0 and +0 as one value (LLVM's `nsz`): the rewrites whose only change to a float
    result is the sign of a zero or of a NaN run (`reduce(negate(x), 0, add) ->
    negate(reduce(x, 0, add))`, which XLA does without fast math). The `gpu` pipeline sets
    it, so its plans are XLA's; no other rounding changes."""

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

    enable_select_of_compare_to_min_max: bool = False
    """Rewrite an integer `select(compare(a, b, GT|GE|LT|LE), a, b)` into `maximum(a, b)`
    or `minimum(a, b)` (hlopass's own option: XLA's algsimp keeps such selects)."""

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


PATTERNS: tuple[type[Simplification], ...] = (
    # Each family exports its rewrites (`PATTERNS`, in the order they fire). Only the
    # order among rewrites of one opcode matters: an instruction is offered its opcode's
    # patterns alone, in this order, until one fires. That order is kept as the rewrites
    # were added, and families sharing opcodes interleave in it (broadcast sinking
    # between each elementwise family's first rewrites and its later ones, identities'
    # constant-to-right after every other add rewrite, ...): such a family comes in
    # groups, each after the other families' rewrites of its opcodes that fired before
    # it (the comment says which).
    *tuples.PATTERNS,
    *copy_bitcast.PATTERNS,
    *maps.PATTERNS,
    *sort.PATTERNS,
    *conditional.PATTERNS,
    *identities.IDENTITY_OPERANDS,
    *reassociation.ADD,
    *integer.CANCELLATIONS,
    *reassociation.MULTIPLY,  # after integer's multiply by zero and unsigned divides
    *power.ROOTS_AND_EXPONENTS,
    *reassociation.DIVIDES,  # after power's divide by sqrt
    *power.DIVIDE_BY_EXP,  # after reassociation's divides of divides
    *minmax.BOUNDS,
    *compare.CONSTANT_RESULTS,
    *select.PREDICATES,
    *constants.PATTERNS,
    *broadcast.BROADCASTS,
    *transpose_reshape.NO_OPS,
    *bitcast.COPIES,
    *slice.SLICES,
    *concatenate.PATTERNS,
    *pad.PATTERNS,
    *dynamic_slice.DYNAMIC_SLICES,
    *reduce.PATTERNS,
    *reduce_window.PATTERNS,
    *dot.EMPTY_AND_SCALAR,
    *dot_reorder.PATTERNS,
    *slice.OF_CONCATENATE_OPERANDS,  # after dot's slice of a dot
    *convolution.CONVOLUTIONS,
    *convert.CHAINS,
    *complex.PATTERNS,
    *abs.NON_NEGATIVE,
    *reverse.PATTERNS,
    *gather_scatter.GATHERS,
    *broadcast.SINK,  # after each family's own rewrites of the ops it sinks past
    *abs.BATCH_NORM_VARIANCE,  # after abs sinking
    *compare.IOTA,  # after compare sinking
    *integer.SIGNED_DIVISION,  # after divide and remainder sinking
    *dot.REWRITES,  # after dot_reorder
    *power.RSQRT,  # after divide, rsqrt, sqrt and log sinking
    *transpose_reshape.OF_PRODUCERS,  # after bitcast's copies, dot's transpose of a dot
    *bitcast.CHAINS,  # after transpose_reshape's
    *broadcast.SINK_WITH_SCALAR,  # after the signed divides, rsqrt, iota compares
    *minmax.KNOWN_RANGES,  # after clamp and maximum sinking
    *gather_scatter.COMBINING,  # after add sinking, transpose_reshape's transposes
    *identities.CONSTANT_TO_RIGHT,  # after every other add and subtract rewrite
    *collectives.PATTERNS,
    *power.CUBE,  # after power sinking with a scalar
    *reassociation.CONSTANT_ARRAYS,  # after multiply and divide sinking, power's divides
    *convolution.ADD_MULTIPLY,  # after the multiply reassociations
    *select.OF_DYNAMIC_UPDATE_SLICE,  # after broadcast's select sinking
    *factors.PATTERNS,
    *broadcast.IS_TRANSPOSE,  # after factors' broadcasts
    *integer.XOR_CONSTANTS,  # after xor sinking with a scalar
    *transpose_reshape.RESTRUCTURE,  # after factors' and bitcast's reshapes
    *dynamic_slice.OF_UPDATES,  # after the other add and reshape rewrites
    *transpose_reshape.HOIST,  # after dynamic_slice's reshape
    *compare.COMPOUND,  # after compare and `and` sinking with a scalar
    *power.ROOT_PRODUCTS,  # after every other multiply rewrite
    *select.MULTIPLY_OF_PRED,  # the same
    *convert.FOLDING,  # convert
    *custom_call.PATTERNS,
)
"""Every pattern, in the order the greedy applier tries them on an instruction."""

__all__ = ["PATTERNS", "AlgebraicSimplifierPass", "Simplification"]
