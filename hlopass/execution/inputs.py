"""Seeded random arguments for a module's entry computation: `random_inputs(module, seed)`.

Values a test or a pass author can feed both to `hlopass.evaluate` and to XLA and expect the
same answer from: every start index in range, no duplicate scatter indices where duplicates
make the result implementation-defined, reduction inits that are the combiner's identity.

Floats: uniform in [-2, 2) (complex: both parts), rounded to the element type. Integers:
the full range for types of 8 bits or fewer, [-100, 100] (unsigned [0, 200]) for wider
ones; pred: fair coin. Integer parameters that feed the start indices of dynamic-slice,
dynamic-update-slice, gather or scatter (directly, or through fusion/call parameters and
bitcast/reshape/copy/convert) are drawn in range: every slice/window fits. Scatter indices
are unique where the scatter says `unique_indices=true` or its combiner is not an
order-independent add/multiply/maximum/minimum/and/or (else duplicates make the result
implementation-defined), and sorted where it says `indices_are_sorted=true`.
"""

from __future__ import annotations

import numpy as np

_PASS_THROUGH = ("bitcast", "reshape", "copy", "convert")
_ORDER_FREE = ("add", "multiply", "maximum", "minimum", "and", "or")


def _source(v, env, scalar):
    """The entry parameter `v` is read from through value-keeping ops, or None."""
    op = v.owner
    while op.opcode in _PASS_THROUGH and (scalar or op.opcode in ("copy", "convert")):
        op = op.operands[0].owner
    return env.get(op.attr("number")) if op.opcode == "parameter" else None


def _add(found, src, his, ivd=None, unique=False, sorted_=False):
    """Narrows parameter `src`'s index bounds to `his` (the tightest use wins)."""
    if src is None:
        return
    c = found.setdefault(src, {"his": list(his), "ivd": ivd, "unique": False, "sorted": False})
    if "his" not in c:
        return
    if len(c["his"]) == len(his):
        c["his"] = [min(a, b) for a, b in zip(c["his"], his, strict=True)]
    c["unique"] |= unique
    c["sorted"] |= sorted_


def _dims(v):
    return v.type.data.dims


def _reduce_init(op, comps, env, found):
    # XLA may apply the init value more than once: only its identity is portable.
    oc = op.opcode
    n = len(op.operands) // 2 if oc != "select-and-scatter" else 1
    inits = op.operands[n:] if oc != "select-and-scatter" else op.operands[2:]
    combiner = comps.get(op.attr("to_apply") if oc != "select-and-scatter" else op.attr("scatter"))
    root = combiner.root if combiner is not None else None
    if root is not None and n == 1 and root.opcode in _ORDER_FREE:
        src = _source(inits[0], env, True)
        if src is not None:
            found[src] = {"identity": root.opcode}


def _scatter_indices(op, comps, env, found):
    n = (len(op.operands) - 1) // 2
    base, upd = _dims(op.operands[0]), _dims(op.operands[n + 1])
    inserted = set(op.attr("inserted_window_dims"))
    obatch = set(op.attr("input_batching_dims") or ())
    window = [d for d in range(len(base)) if d not in inserted and d not in obatch]
    size = [1] * len(base)
    for j, d in enumerate(window):
        size[d] = upd[op.attr("update_window_dims")[j]]
    his = [max(0, base[d] - size[d]) for d in op.attr("scatter_dims_to_operand_dims")]
    combiner = comps.get(op.attr("to_apply"))
    root = combiner.root if combiner is not None else None
    order_free = root is not None and root.opcode in _ORDER_FREE and all(
        o.owner.opcode == "parameter" for o in root.operands)  # fmt: skip
    _add(found, _source(op.operands[n], env, False), his, op.attr("index_vector_dim"),
         unique=bool(op.attr("unique_indices")) or not order_free,
         sorted_=bool(op.attr("indices_are_sorted")))  # fmt: skip


def _index_constraints(module) -> dict[int, dict]:
    from hlopass.dialects.hlo import computations, entry_computation

    comps = {c.comp_name: c for c in computations(module)}
    found: dict[int, dict] = {}

    def walk(comp, env, depth=0):
        for op in comp.instructions:
            oc = op.opcode
            if oc in ("fusion", "call") and depth < 8:
                callee = comps.get(op.callees()[0])
                if callee is not None:
                    walk(
                        callee,
                        {i: _source(v, env, False) for i, v in enumerate(op.operands)},
                        depth + 1,
                    )
            elif oc == "dynamic-slice":
                base = _dims(op.operands[0])
                sizes = op.attr("dynamic_slice_sizes")
                for k, v in enumerate(op.operands[1:]):
                    _add(found, _source(v, env, True), [max(0, base[k] - sizes[k])])
            elif oc == "dynamic-update-slice":
                base, upd = _dims(op.operands[0]), _dims(op.operands[1])
                for k, v in enumerate(op.operands[2:]):
                    _add(found, _source(v, env, True), [max(0, base[k] - upd[k])])
            elif oc == "gather":
                base = _dims(op.operands[0])
                sizes = op.attr("slice_sizes")
                his = [max(0, base[d] - sizes[d]) for d in op.attr("start_index_map")]
                _add(found, _source(op.operands[1], env, False), his, op.attr("index_vector_dim"),
                     sorted_=bool(op.attr("indices_are_sorted")))  # fmt: skip
            elif oc in ("reduce", "reduce-window", "select-and-scatter"):
                _reduce_init(op, comps, env, found)
            elif oc == "scatter":
                _scatter_indices(op, comps, env, found)

    entry = entry_computation(module)
    walk(entry, {p.attr("number"): p.attr("number") for p in entry.parameters()})
    return found


def _random_array(rng, shape, dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind == "c":
        return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(dtype)
    if dtype.kind in "iu" or dtype.name.startswith(("int", "uint")):
        import ml_dtypes

        info = ml_dtypes.iinfo(dtype)
        if info.bits > 8:
            lo, hi = (0, 200) if info.min == 0 else (-100, 100)
        else:
            lo, hi = int(info.min), int(info.max)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


def _identity(opcode: str, shape, dtype: np.dtype) -> np.ndarray:
    import ml_dtypes

    kind = dtype.kind
    is_int = kind in "iu" or dtype.name.startswith(("int", "uint"))
    if opcode in ("add", "or"):
        v = 0
    elif opcode == "multiply":
        v = 1
    elif opcode == "and":
        v = True if kind == "b" else -1
    elif kind == "b":
        v = opcode == "minimum"
    elif is_int:
        info = ml_dtypes.iinfo(dtype)
        v = info.min if opcode == "maximum" else info.max
    else:
        v = -np.inf if opcode == "maximum" else np.inf
    return (
        np.full(shape, v).astype(dtype)
        if not (is_int and v == -1)
        else np.full(shape, -1, np.int64).astype(dtype)
    )


def _random_indices(rng, shape, dtype, c) -> np.ndarray:
    shape = tuple(shape)
    his = c["his"]
    ivd = c["ivd"]
    if ivd is None:  # scalar start index
        return np.asarray(rng.integers(0, his[0], shape, endpoint=True)).astype(dtype)
    vector = ivd < len(shape)
    k = shape[ivd] if vector else 1
    if len(his) != k:
        return np.zeros(shape, dtype)
    batch_shape = tuple(s for i, s in enumerate(shape) if not (vector and i == ivd))
    count = int(np.prod(batch_shape, dtype=np.int64))
    space = [h + 1 for h in his]
    total = int(np.prod(space, dtype=np.int64))
    if c["unique"] and count <= total:
        flat = rng.choice(total, count, replace=False)
    else:
        flat = rng.integers(0, total, count)
    if c["sorted"]:
        flat = np.sort(flat)
    rows = np.stack(np.unravel_index(flat, space), axis=-1) if k else np.zeros((count, 0), np.int64)
    rows = rows.reshape(batch_shape + (k,))
    out = np.moveaxis(rows, -1, ivd) if vector else rows[..., 0]
    return np.ascontiguousarray(out).astype(dtype)


def random_inputs(module, seed: int = 0) -> list:
    """Seeded random arguments for the entry computation (tuples for tuple parameters)."""
    from hlopass.dialects.hlo import entry_computation
    from hlopass.errors import HloInputError
    from hlopass.ir.literal import numpy_dtype
    from hlopass.ir.shape import UNBOUNDED

    rng = np.random.default_rng(seed)
    constraints = _index_constraints(module)

    def build(shape, number):
        if shape.is_tuple:
            return tuple(build(e, None) for e in shape.elements)
        if shape.element_type in ("token", "opaque"):  # no data: the interpreter's stand-in
            return np.zeros((0,), np.uint8)
        if UNBOUNDED in shape.dims:  # `?`: no size to draw (XLA's verifier rejects it too)
            raise HloInputError(
                f"error: parameter {number} ({shape}) has an unbounded dimension: no inputs "
                "can be drawn for it"
            )
        dtype = numpy_dtype(shape.element_type)
        c = constraints.get(number) if number is not None else None
        if c is not None and "identity" in c:
            return _identity(c["identity"], tuple(shape.dims), dtype)
        if c is not None and (dtype.kind in "iu" or dtype.name.startswith(("int", "uint"))):
            return _random_indices(rng, shape.dims, dtype, c)
        return _random_array(rng, tuple(shape.dims), dtype)

    return [build(p.shape, p.attr("number")) for p in entry_computation(module).parameters()]
