"""Per-instruction checks of XLA's shape rules, run by the ops' `verify_` and by the importer
(which reports a failure at the instruction's place in the text)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from xdsl.ir import Operation, OpResult
from xdsl.utils.exceptions import VerifyException

from hlopass.dialects.opcodes import OPCODES
from hlopass.ir.shape import UNBOUNDED, ArrayShape, Shape, TupleShape, is_float

if TYPE_CHECKING:
    from hlopass.dialects.hlo import ComputationOp, HloOp

MIXED_PRECISION: ContextVar[bool] = ContextVar("allow_mixed_precision", default=False)
"""XLA's `HloVerifier(allow_mixed_precision=true)`: the operands and the result of an
elementwise op may be floats of different precisions (`minimum(f16, f32) -> f32`)."""


@contextmanager
def allow_mixed_precision(allow: bool = True) -> Iterator[None]:
    """Verify (and infer shapes) as XLA's verifier with `allow_mixed_precision` does."""
    token = MIXED_PRECISION.set(allow)
    try:
        yield
    finally:
        MIXED_PRECISION.reset(token)


def mixed_floats(*element_types: str) -> bool:
    """Floats of several precisions, allowed where mixed precision is (XLA ignores the
    precision of floating-point types then, not of integers or complex)."""
    return MIXED_PRECISION.get() and all(is_float(t) for t in element_types)


# Elementwise binary ops whose operands and result share one element type.
_SAME_TYPE_BINARY = frozenset({
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
    "atan2", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "mulhi",
})  # fmt: skip


def _static(shape: object, *others: object) -> TypeGuard[ArrayShape]:
    """All array shapes without dynamic dimensions (their sizes can be checked); narrows
    the first one to `ArrayShape`."""
    return all(isinstance(s, ArrayShape) and not s.dynamic for s in (shape, *others))


# Opcodes with a rule below; the rest pass trivially (the importer skips them outright).
# select and clamp are elementwise too, but broadcast scalars: they have rules of their own.
_ELEMENTWISE = frozenset(
    op for op, spec in OPCODES.items() if "elementwise" in spec.traits
) - {"select", "clamp"}  # fmt: skip
CHECKED_OPCODES = _ELEMENTWISE | {
    "select", "broadcast", "reshape", "transpose", "slice", "concatenate",
    "get-tuple-element", "tuple", "pad", "reduce", "dot", "convolution",
    "dynamic-slice", "dynamic-update-slice", "partition-id", "replica-id", "all-to-all",
    "dynamic-reshape",
}  # fmt: skip


def _bounded(*shapes: object) -> bool:
    """All array shapes whose sizes are known or bounded (`<=N` counts as N, as XLA's
    `ShapeUtil::Compatible` compares bounds); false when one has an unbounded `?`."""
    return all(
        isinstance(s, ArrayShape) and (not s.dynamic or UNBOUNDED not in s.dims) for s in shapes
    )


def _dims(shape: ArrayShape) -> str:
    return shape.text(False)


def _check_pad(name: str, shape: Shape, operands: list[Shape], attr: Callable[[str], Any]) -> None:
    """XLA's InferPadShape: one (low, high, interior) per dimension, interior >= 0, and
    `low + high + size + interior * (size - 1)` (never negative) for each result size."""
    o, v = operands
    if not _bounded(shape, o, v):
        return
    assert isinstance(shape, ArrayShape) and isinstance(o, ArrayShape) and isinstance(v, ArrayShape)
    padding = attr("padding") or ()
    if v.rank != 0:
        raise VerifyException(f"{name}: pad value {_dims(v)} is not a scalar")
    if len(padding) != o.rank:
        raise VerifyException(
            f"{name}: padding has {len(padding)} dimensions but the operand {_dims(o)} has "
            f"rank {o.rank}"
        )
    want = []
    for i, (p, d) in enumerate(zip(padding, o.dims, strict=True)):
        if p.interior < 0:
            raise VerifyException(
                f"{name}: interior padding {p.interior} of dimension {i} is negative"
            )
        size = p.low + p.high + d + p.interior * max(d - 1, 0)
        if size < 0:
            raise VerifyException(f"{name}: padding gives dimension {i} a negative size {size}")
        want.append(size)
    if tuple(want) != shape.dims or o.element_type != shape.element_type:
        want_text = f"{o.element_type}[{','.join(map(str, want))}]"
        raise VerifyException(f"{name}: pad of {_dims(o)} gives {want_text}, not {_dims(shape)}")


def _check_reduce(
    name: str, shape: Shape, operands: list[Shape], attr: Callable[[str], Any]
) -> None:
    """XLA's InferReduceShape: N inputs of one shape and N scalar inits, distinct reduced
    dimensions in range, and each result the input without the reduced dimensions."""
    if len(operands) % 2 or not operands:
        raise VerifyException(
            f"{name}: reduce takes inputs and as many init values, got {len(operands)} operands"
        )
    n = len(operands) // 2
    inputs, inits = operands[:n], operands[n:]
    dims = attr("dimensions") or ()
    if not _bounded(shape if n == 1 else inputs[0], *inputs, *inits):
        return
    first = inputs[0]
    assert isinstance(first, ArrayShape)
    for s in inputs[1:]:
        if s.dims != first.dims:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: reduce inputs {_dims(first)} and {s.text(False)} differ in dimensions"
            )
    for s in inits:
        if s.rank != 0:  # type: ignore[union-attr]
            raise VerifyException(f"{name}: reduce init value {s.text(False)} is not a scalar")
    if len(set(dims)) != len(dims) or any(not 0 <= d < first.rank for d in dims):
        raise VerifyException(
            f"{name}: reduce dimensions={{{','.join(map(str, dims))}}} are not distinct "
            f"dimensions of {_dims(first)}"
        )
    kept = tuple(d for i, d in enumerate(first.dims) if i not in dims)
    results = shape.elements if isinstance(shape, TupleShape) else (shape,)
    if len(results) != n or (n > 1 and not isinstance(shape, TupleShape)):
        raise VerifyException(f"{name}: reduce of {n} input(s) does not give {shape.text(False)}")
    for r in results:
        if not isinstance(r, ArrayShape) or (_bounded(r) and r.dims != kept):
            raise VerifyException(
                f"{name}: reduce of {_dims(first)} over dimensions={{{','.join(map(str, dims))}}} "
                f"gives dimensions {list(kept)}, not {r.text(False)}"
            )


def _check_dot(name: str, shape: Shape, operands: list[Shape], attr: Callable[[str], Any]) -> None:
    """XLA's InferDotOpShape: batch and contracting dimensions in range, distinct, paired
    with equal sizes; the result is batch, then lhs free, then rhs free dimensions."""
    lhs, rhs = operands[:2]
    if not _bounded(shape, lhs, rhs):
        return
    assert (
        isinstance(shape, ArrayShape)
        and isinstance(lhs, ArrayShape)
        and isinstance(rhs, ArrayShape)
    )
    lb, lc = attr("lhs_batch_dims") or (), attr("lhs_contracting_dims") or ()
    rb, rc = attr("rhs_batch_dims") or (), attr("rhs_contracting_dims") or ()
    for side, s, batch, contracting in (("lhs", lhs, lb, lc), ("rhs", rhs, rb, rc)):
        used = (*batch, *contracting)
        for d in used:
            if not 0 <= d < s.rank:
                raise VerifyException(
                    f"{name}: dot {side} dimension {d} is out of range for {_dims(s)}"
                )
        if len(set(used)) != len(used):
            raise VerifyException(f"{name}: dot {side} batch and contracting dimensions repeat")
    for kind, a, b in (("batch", lb, rb), ("contracting", lc, rc)):
        if len(a) != len(b):
            raise VerifyException(
                f"{name}: dot has {len(a)} lhs but {len(b)} rhs {kind} dimensions"
            )
        for x, y in zip(a, b, strict=True):
            if lhs.dims[x] != rhs.dims[y]:
                raise VerifyException(
                    f"{name}: dot {kind} dimension {x} of {_dims(lhs)} and {y} of "
                    f"{_dims(rhs)} differ in size"
                )
    want = (
        *(lhs.dims[d] for d in lb),
        *(d for i, d in enumerate(lhs.dims) if i not in lb and i not in lc),
        *(d for i, d in enumerate(rhs.dims) if i not in rb and i not in rc),
    )
    if want != shape.dims:
        raise VerifyException(
            f"{name}: dot of {_dims(lhs)} and {_dims(rhs)} gives dimensions {list(want)}, not {_dims(shape)}"
        )


def _window_size(size: int, dilation: int) -> int:
    return (size - 1) * dilation + 1 if size > 0 else 0


def _check_convolution(
    name: str, shape: Shape, operands: list[Shape], attr: Callable[[str], Any]
) -> None:
    """XLA's InferConvolveShape: feature counts agree (with the group counts), the window
    matches the kernel, and each output spatial size is that of the strided windows over
    the dilated, padded input."""
    lhs, rhs = operands[:2]
    if not _bounded(shape, lhs, rhs):
        return
    assert (
        isinstance(shape, ArrayShape)
        and isinstance(lhs, ArrayShape)
        and isinstance(rhs, ArrayShape)
    )
    labels = attr("dim_labels")
    if "?" in str(labels):
        raise VerifyException(f"{name}: convolution dim_labels={labels} leave a dimension unknown")
    (ib, if_, isp), (ki, ko, ksp), (ob, of, osp) = labels.input, labels.kernel, labels.output
    nsp = len(isp)
    if not (lhs.rank == rhs.rank == shape.rank == nsp + 2):
        raise VerifyException(
            f"{name}: convolution dim_labels={labels} need rank {nsp + 2}, operands are "
            f"{_dims(lhs)} and {_dims(rhs)}, result {_dims(shape)}"
        )
    window = attr("window")
    wdims = window.dims if window is not None else ()
    if len(wdims) != nsp:
        raise VerifyException(f"{name}: window has {len(wdims)} dimensions, the convolution {nsp}")
    fgc = attr("feature_group_count") or 1
    bgc = attr("batch_group_count") or 1
    if fgc < 1 or bgc < 1 or lhs.dims[if_] != rhs.dims[ki] * fgc or lhs.dims[ib] % bgc:
        raise VerifyException(
            f"{name}: convolution input {_dims(lhs)} and kernel {_dims(rhs)} disagree in "
            f"features (feature_group_count={fgc}, batch_group_count={bgc})"
        )
    want = [0] * shape.rank
    want[ob], want[of] = lhs.dims[ib] // bgc, rhs.dims[ko]
    for s, w in enumerate(wdims):
        # XLA's rule is equality: each window size is the kernel's spatial size (a window
        # smaller or larger than the kernel is refused, whatever the stride and dilation)
        if w.size != rhs.dims[ksp[s]]:
            raise VerifyException(
                f"{name}: window size {w.size} in spatial dimension {s} differs from the "
                f"kernel's size {rhs.dims[ksp[s]]} there (kernel {_dims(rhs)}, window "
                f"size={'x'.join(str(d.size) for d in wdims)})"
            )
        if w.stride < 1 or w.lhs_dilation < 1 or w.rhs_dilation < 1:
            raise VerifyException(
                f"{name}: window dimension {s} has stride {w.stride}, lhs_dilate "
                f"{w.lhs_dilation}, rhs_dilate {w.rhs_dilation}: each must be at least 1"
            )
        padded = _window_size(lhs.dims[isp[s]], w.lhs_dilation) + w.pad_low + w.pad_high
        span = _window_size(w.size, w.rhs_dilation)
        want[osp[s]] = 0 if padded < span else (padded - span) // w.stride + 1
    if tuple(want) != shape.dims:
        raise VerifyException(
            f"{name}: convolution of {_dims(lhs)} and {_dims(rhs)} gives dimensions {want}, "
            f"not {_dims(shape)}"
        )


def _check_start_indices(name: str, opcode: str, operand: ArrayShape, indices: list[Shape]) -> None:
    """One integer scalar per dimension (or XLA's older form: one vector of them)."""
    ok = (len(indices) == operand.rank and all(s.rank == 0 for s in indices)) or (  # type: ignore[union-attr]
        len(indices) == 1 and indices[0].rank == 1 and indices[0].dims == (operand.rank,)  # type: ignore[union-attr]
    )
    if not ok:
        raise VerifyException(
            f"{name}: {opcode} of {_dims(operand)} needs {operand.rank} scalar start "
            f"indices, got {len(indices)} operand(s)"
        )


def _check_dynamic_slice(
    name: str, shape: Shape, operands: list[Shape], attr: Callable[[str], Any]
) -> None:
    """XLA's InferDynamicSliceShape: the operand, its start indices, and a result of
    `dynamic_slice_sizes` each within the operand."""
    if not operands or not _bounded(shape, *operands):
        return
    o = operands[0]
    assert isinstance(o, ArrayShape) and isinstance(shape, ArrayShape)
    _check_start_indices(name, "dynamic-slice", o, operands[1:])
    sizes = tuple(attr("dynamic_slice_sizes") or ())
    if len(sizes) != o.rank or any(not 0 <= z <= d for z, d in zip(sizes, o.dims, strict=True)):
        raise VerifyException(
            f"{name}: dynamic_slice_sizes={{{','.join(map(str, sizes))}}} do not fit {_dims(o)}"
        )
    if sizes != shape.dims:
        raise VerifyException(
            f"{name}: dynamic-slice of sizes {list(sizes)} does not give {_dims(shape)}"
        )


def _check_dynamic_update_slice(
    name: str, shape: Shape, operands: list[Shape], attr: Callable[[str], Any]
) -> None:
    """XLA's InferDynamicUpdateSliceShape: operand, an update of the same rank that fits
    in it, start indices; the result has the operand's dimensions."""
    if len(operands) < 2:
        raise VerifyException(
            f"{name}: dynamic-update-slice takes an operand, an update and start indices"
        )
    if not _bounded(shape, *operands):
        return
    o, u = operands[0], operands[1]
    assert isinstance(o, ArrayShape) and isinstance(u, ArrayShape) and isinstance(shape, ArrayShape)
    _check_start_indices(name, "dynamic-update-slice", o, operands[2:])
    if u.rank != o.rank or any(a > b for a, b in zip(u.dims, o.dims, strict=True)):
        raise VerifyException(f"{name}: update {_dims(u)} does not fit in {_dims(o)}")
    if shape.dims != o.dims:
        raise VerifyException(
            f"{name}: dynamic-update-slice of {_dims(o)} does not give {_dims(shape)}"
        )


_RULES: dict[str, Callable[[str, Shape, list[Shape], Callable[[str], Any]], None]] = {
    "pad": _check_pad,
    "reduce": _check_reduce,
    "dot": _check_dot,
    "convolution": _check_convolution,
    "dynamic-slice": _check_dynamic_slice,
    "dynamic-update-slice": _check_dynamic_update_slice,
}


def verify_instruction(op: HloOp) -> None:
    opcode = op.OPCODE
    if opcode not in CHECKED_OPCODES:
        return
    props = op.properties
    check_instruction(
        opcode,
        props["name"].data,  # type: ignore[attr-defined]
        op.results[0].type.data,  # type: ignore[attr-defined]
        [v.type.data for v in op.operands],  # type: ignore[attr-defined]
        op.attr,
    )


def check_instruction(
    opcode: str,
    name: str,
    shape: Shape,
    operand_shapes: list[Shape],
    attr: Callable[[str], Any],
) -> None:
    """XLA's shape rules for one instruction, on plain values: `attr(name)` gives an
    attribute's Python value. Raises `VerifyException` naming the instruction `name`."""
    if opcode in _ELEMENTWISE:
        # `s is shape` (the common case: shapes are shared through the importer's caches)
        # short-cuts the comparisons but not the order of the checks.
        for s in operand_shapes:
            if s is shape and isinstance(s, ArrayShape):
                continue
            if not isinstance(s, ArrayShape) or not isinstance(shape, ArrayShape):
                raise VerifyException(f"{name}: elementwise op on a non-array")
            if s.dims != shape.dims:
                raise VerifyException(
                    f"{name}: operand shape {s.text(False)} does not match "
                    f"result {shape.text(False)}"
                )
        if opcode in _SAME_TYPE_BINARY:
            et = shape.element_type  # type: ignore[union-attr]
            for s in operand_shapes:
                if s is not shape and s.element_type != et:  # type: ignore[union-attr]
                    if mixed_floats(et, s.element_type):  # type: ignore[union-attr]
                        continue
                    raise VerifyException(
                        f"{name}: {opcode} of {s.text(False)} does not give {shape.text(False)}"
                        if len({o.element_type for o in operand_shapes}) == 1  # type: ignore[union-attr]
                        else f"{name}: {opcode} operands have different element types: "
                        + " and ".join(o.text(False) for o in operand_shapes)
                    )
        elif opcode == "compare" and shape.element_type != "pred":  # type: ignore[union-attr]
            raise VerifyException(f"{name}: compare gives pred, not {shape.text(False)}")
    elif opcode == "select" and _static(shape, *operand_shapes):
        pred, on_true, on_false = operand_shapes
        for s in (on_true, on_false):
            if s.dims != shape.dims:  # type: ignore[union-attr]
                raise VerifyException(
                    f"{name}: operand shape {s.text(False)} does not match result {shape.text(False)}"
                )
        if pred.rank and pred.dims != shape.dims:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: predicate shape {pred.text(False)} does not match result {shape.text(False)}"
            )
    elif opcode == "broadcast" and _static(shape, *operand_shapes):
        (o,) = operand_shapes
        dims = attr("dimensions")
        if len(dims) != o.rank:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: broadcast dimensions={{{','.join(map(str, dims))}}} has {len(dims)} "
                f"entries but the operand {o.text(False)} has rank {o.rank}"  # type: ignore[union-attr]
            )
        for i, d in enumerate(dims):
            if not 0 <= d < shape.rank:  # type: ignore[union-attr]
                raise VerifyException(
                    f"{name}: broadcast dimension {d} is out of range for {shape.text(False)}"
                )
            if o.dims[i] != shape.dims[d] and o.dims[i] != 1:  # type: ignore[union-attr]
                raise VerifyException(
                    f"{name}: broadcast maps operand dimension {i} of {o.text(False)} to "
                    f"dimension {d} of {shape.text(False)}, of a different size"
                )
    elif opcode == "reshape" and _static(shape, *operand_shapes):
        (o,) = operand_shapes
        if o.num_elements != shape.num_elements:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: reshape of {o.text(False)} to {shape.text(False)} changes the "
                "number of elements"
            )
    elif opcode == "transpose" and _static(shape, *operand_shapes):
        (o,) = operand_shapes
        perm = attr("dimensions")
        if sorted(perm) != list(range(o.rank)):  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: transpose dimensions={{{','.join(map(str, perm))}}} is not a "
                f"permutation of the {o.rank} dimensions of {o.text(False)}"  # type: ignore[union-attr]
            )
        if tuple(o.dims[p] for p in perm) != shape.dims:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: transpose of {o.text(False)} does not give {shape.text(False)}"
            )
    elif opcode == "slice" and _static(shape, *operand_shapes):
        (o,) = operand_shapes
        ranges = attr("slice")
        if len(ranges) != o.rank:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: slice has {len(ranges)} ranges but the operand has rank {o.rank}"  # type: ignore[union-attr]
            )
        want = []
        for i, r in enumerate(ranges):
            if not (0 <= r.start <= r.limit <= o.dims[i] and r.stride > 0):  # type: ignore[union-attr]
                raise VerifyException(
                    f"{name}: slice range [{r.start}:{r.limit}:{r.stride}] is out of bounds "
                    f"for dimension {i} of {o.text(False)}"
                )
            want.append(-(-(r.limit - r.start) // r.stride))
        if tuple(want) != shape.dims:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: slice of {o.text(False)} gives dimensions {want}, not {shape.text(False)}"
            )
    elif opcode in ("partition-id", "replica-id"):
        if not isinstance(shape, ArrayShape) or shape.element_type != "u32" or shape.rank:
            raise VerifyException(f"{name}: {opcode} gives u32[], not {shape.text(False)}")
    elif opcode in _RULES:
        _RULES[opcode](name, shape, operand_shapes, attr)
    elif opcode == "all-to-all":
        # XLA's parser: an array all-to-all names its one split dimension, if any
        dims = attr("dimensions")
        if dims is not None and len(dims) != 1:
            raise VerifyException(
                f"{name}: all-to-all takes one split dimension, got dimensions="
                f"{{{','.join(map(str, dims))}}}"
            )
    elif opcode == "dynamic-reshape":
        # one size operand per result dimension (XLA's parser aborts otherwise)
        if isinstance(shape, ArrayShape) and len(operand_shapes) != 1 + shape.rank:
            raise VerifyException(
                f"{name}: dynamic-reshape to {shape.text(False)} takes the operand and "
                f"{shape.rank} size operand(s), got {len(operand_shapes) - 1}"
            )
    elif opcode == "concatenate":
        dims = attr("dimensions") or ()
        if len(dims) != 1:
            raise VerifyException(
                f"{name}: concatenate takes exactly one dimension, got {len(dims)}"
            )
        if not operand_shapes or not _bounded(shape, *operand_shapes):
            return
        (d,) = dims
        if not 0 <= d < shape.rank:  # type: ignore[union-attr]
            raise VerifyException(f"{name}: concatenate dimension {d} is out of range")
        total = 0
        for s in operand_shapes:
            if s.rank != shape.rank or any(  # type: ignore[union-attr]
                a != b
                for i, (a, b) in enumerate(zip(s.dims, shape.dims, strict=True))
                if i != d  # type: ignore[union-attr]
            ):
                raise VerifyException(
                    f"{name}: cannot concatenate {s.text(False)} into {shape.text(False)} "
                    f"along dimension {d}"
                )
            total += s.dims[d]  # type: ignore[union-attr]
        if total != shape.dims[d]:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: concatenated operands have {total} along dimension {d}, "
                f"result {shape.text(False)} has {shape.dims[d]}"  # type: ignore[union-attr]
            )
    if opcode == "get-tuple-element":
        (t,) = operand_shapes
        index = attr("index")
        if not isinstance(t, TupleShape) or not 0 <= index < len(t.elements):
            raise VerifyException(f"{name}: tuple index {index} out of range")
        if not t.elements[index].compatible(shape):
            raise VerifyException(f"{name}: result shape does not match tuple element")
    if opcode == "tuple" and (
        not isinstance(shape, TupleShape) or len(shape.elements) != len(operand_shapes)
    ):
        raise VerifyException(f"{name}: tuple shape does not match its operands")


def verify_module(
    module: Operation,
    only: Collection[ComputationOp] | None = None,
    touched: Mapping[ComputationOp, Collection[Operation]] | None = None,
) -> None:
    """Verify `module` (xDSL's `verify`, which runs the checks above per instruction).

    With `only`: the module-level checks (its traits: unique computation names, ...) and
    the computations in `only`, each with its instructions; instead of the module-wide
    isolation walk, the instructions of those computations are checked to use only values
    of their own computation. What a pass reported as unchanged is left alone, as a pass
    that changed nothing is (XLA's `HloPassPipeline` verifies only after a pass that
    changed the module). With `touched` as well: in a computation listed there, the
    computation's own checks and the instructions listed (those a pass created or
    edited); the others have the operands, attributes and type they verified with."""
    if only is None:
        module.verify()
        return
    from xdsl.traits import IsolatedFromAbove

    todo = {c for c in only if c.parent is not None}
    # the module's own traits (unique computation names, ...) but the isolation walk
    for trait in type(module).get_irdl_definition().traits:  # type: ignore[attr-defined]
        if not isinstance(trait, IsolatedFromAbove):
            trait.verify(module)
    # in module order (the dialect imports this module: its op classes are not at hand)
    for comp in cast("list[ComputationOp]", [c for c in module.regions[0].block.ops if c in todo]):
        block = comp.block
        some = touched.get(comp) if touched is not None else None
        ops = list(block.ops) if some is None else [o for o in some if o.parent is block]
        for op in ops:
            for v in op.operands:
                if isinstance(v, OpResult) and v.op.parent is not block:
                    raise VerifyException(
                        f"{getattr(op, 'inst_name', op.name)} in computation {comp.comp_name} "
                        "uses a value defined outside it"
                    )
        if some is None:
            comp.verify()
            continue
        comp.verify(verify_nested_ops=False)
        for op in ops:
            op.verify()
