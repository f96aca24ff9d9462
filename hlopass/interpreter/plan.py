"""Planning a computation once: a straight-line Python function of prepared closures.

`Interpreter.call` used to walk the instructions of a computation and dispatch each one
by opcode on every call; a `while` loop paid that for every instruction of every
iteration. A plan is built once per (computation, float mode):

- values that depend on no parameter (constants, broadcasts and iotas of them, and pure
  instructions of only such values) are computed at planning time;
- tuple / get-tuple-element become plain Python tuple operations;
- the common elementwise ops on f32/f64/s32/s64/u32/u64/pred arrays become direct numpy
  calls with the semantics of their handlers (XLA's max/min of signed zeros, FTZ/DAZ),
  skipping the flush of an operand that a flushing step of the plan produced;
- everything else calls its handler with the instruction bound in advance.

The steps are compiled into one Python function (locals, no dictionary per value), so a
loop iteration costs a few microseconds per instruction. A plan may be built knowing which
parts of its arguments are already flushed (`clean_args`) and says which parts of its
result are (`run.clean_out`): a `while` body's second plan skips flushing the state that
its own previous iteration flushed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlopass.interpreter.numeric import daz, float_max_min, flushing

try:  # the C function; numpy's Python wrapper costs as much again on small arrays
    from numpy._core.multiarray import count_nonzero as _count_nonzero
except ImportError:  # pragma: no cover - other numpy layouts
    _count_nonzero = np.count_nonzero

_PRECOMPUTE_MAX_ELEMENTS = 1 << 20
_PURE_PRECOMPUTE = frozenset({
    "constant", "broadcast", "iota", "reshape", "transpose", "convert", "slice",
    "concatenate", "bitcast", "copy", "negate", "add", "subtract", "multiply", "divide",
    "maximum", "minimum", "compare", "select", "and", "or", "xor", "not", "abs",
})  # fmt: skip

_FLOAT_UFUNC = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                "divide": np.divide}  # fmt: skip
_INT_UFUNC = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
              "maximum": np.maximum, "minimum": np.minimum, "and": np.bitwise_and,
              "or": np.bitwise_or, "xor": np.bitwise_xor}  # fmt: skip
_PRED_UFUNC = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
               "maximum": np.logical_or, "minimum": np.logical_and}  # fmt: skip
_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}  # fmt: skip
_FAST_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_FAST_INTS = tuple(np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64))
# 0-d arrays: comparing with a Python float converts it on every call
_TINY = {dt: np.array(np.finfo(dt).tiny, dt) for dt in _FAST_FLOATS}
_ZERO = {dt: np.zeros((), dt) for dt in _FAST_FLOATS}
_abs, _less, _equal, _where, _copysign = np.abs, np.less, np.equal, np.where, np.copysign

# Clean-ness of a value: a bool for an array (flushed already, or not a float), a tuple of
# those for a tuple value.
Clean = bool | tuple


def _daz(x: np.ndarray) -> np.ndarray:
    """`numeric.daz` of an f32/f64 value (the only ones a plan flushes), in fewer numpy
    calls: a flushing plan runs it on nearly every float value of every iteration."""
    small = _less(_abs(x), _TINY[x.dtype])
    if not _count_nonzero(small):
        return x
    return _where(small, _copysign(_ZERO[x.dtype], x), x)  # zeros keep their sign


def _max_min(ufunc: Any, code: str) -> Callable[[Any, Any], np.ndarray]:
    """`numeric.float_max_min` for f32/f64: only a result that is zero can need its
    sign fixed (both operands zero), so the common case is one ufunc and one compare."""

    def run(a: Any, b: Any) -> np.ndarray:
        r = ufunc(a, b)
        if _count_nonzero(_equal(r, _ZERO[r.dtype])):
            return np.asarray(float_max_min(code, a, b))
        return np.asarray(r)

    return run


def _array_dtype(value: Any) -> np.dtype | None:
    shape = value.type.data
    if shape.is_tuple or shape.element_type in ("token", "opaque"):
        return None
    from hlopass.ir.literal import numpy_dtype

    try:
        return numpy_dtype(shape.element_type)
    except ValueError:
        return None


class _Step:
    """One instruction: `code` is the Python expression computing it from operand names."""

    __slots__ = ("code", "clean", "flushes")

    def __init__(self, code: str, clean: bool = False, flushes: bool = False):
        self.code = code
        self.clean = clean  # a float value already flushed (or not a float at all)
        self.flushes = flushes  # it reads its operands flushed (`_daz`)


def build_plan(
    interp: Any, comp: Any, clean_args: tuple[Clean, ...] = ()
) -> Callable[[Sequence[Any]], Any]:
    """The computation as one function of its argument list; `clean_args[k]` says which
    parts of argument k the caller guarantees flushed (missing: none). The function's
    `clean_out` says the same of its result."""
    ops, root = interp.schedule(comp)
    flush = flushing()
    names: dict[Any, str] = {}
    clean: dict[Any, Clean] = {}
    known: dict[Any, Any] = {}  # value -> planning-time value
    flushed: dict[Any, str] = {}  # value -> the name of its flushed copy (for flushing steps)
    ns: dict[str, Any] = {"_daz": _daz if flush else daz, "_np": np, "_asarray": np.asarray}
    lines = ["def run(args):"]
    dead = dead_after(ops, root)

    def bind(obj: Any) -> str:
        key = f"_k{len(ns)}"
        ns[key] = obj
        return key

    for k, op in enumerate(ops):
        name = f"v{k}"
        res = op.result
        names[res] = name
        opcode = op.opcode
        if opcode == "parameter":
            number = op.attr("number")
            lines.append(f"    {name} = args[{number}]")
            clean[res] = clean_args[number] if number < len(clean_args) else False
            continue
        if _precomputable(op, known):
            try:
                value = interp.eval(op, [known[v] for v in op.operands])
            except Exception:  # left to run time, where the error belongs to the run
                value = None
            if value is not None:
                known[res] = value
                if isinstance(value, np.ndarray) and flush:
                    value = daz(value)
                    clean[res] = True
                else:
                    clean[res] = not isinstance(value, np.ndarray)
                lines.append(f"    {name} = {bind(value)}")
                continue
        args = [names[v] for v in op.operands]
        # an array operand's flag (a tuple's element flags do not make the tuple "clean")
        flags = [clean.get(v, False) is True for v in op.operands]
        step = _fast(op, args, flags, flush, bind)
        if step is not None and step.flushes:  # flush each unflushed operand once
            for v, ok in zip(op.operands, flags, strict=True):
                if not ok and v not in flushed:
                    flushed[v] = f"{names[v]}_f"
                    lines.append(f"    {flushed[v]} = _daz({names[v]})")
            fargs = [
                names[v] if ok else flushed[v] for v, ok in zip(op.operands, flags, strict=True)
            ]
            step = _fast(op, fargs, [True] * len(args), flush, bind)
            assert step is not None
        if step is None:
            fn = interp.handler_of(op)
            step = _Step(f"{bind(fn)}({bind(interp)}, {bind(op)}, [{', '.join(args)}])")
        clean[res] = _clean_of(op, step, [clean.get(v, False) for v in op.operands])
        lines.append(f"    {name} = {step.code}")
        # a value's last reader ran: drop it (and its flushed copy), or a module of large
        # arrays keeps every intermediate alive until it returns
        gone = [n for v in dead.get(k, ()) for n in (names[v], flushed.get(v)) if n]
        if gone:
            lines.append(f"    del {', '.join(gone)}")
    lines.append(f"    return {names[root.result]}")
    exec(compile("\n".join(lines), f"<plan of {comp.comp_name}>", "exec"), ns)  # noqa: S102
    run = ns["run"]
    run.clean_out = clean[root.result]
    return run


def dead_after(ops: Sequence[Any], root: Any) -> dict[int, list[Any]]:
    """Per instruction index, the values (results of `ops`, not the root's) whose last
    reader it is."""
    last: dict[Any, int] = {}
    for k, op in enumerate(ops):
        for v in op.operands:
            last[v] = k
    dead: dict[int, list[Any]] = {}
    for v, k in last.items():
        if v is not root.result:
            dead.setdefault(k, []).append(v)
    return dead


def _clean_of(op: Any, step: _Step, operands: list[Clean]) -> Clean:
    """Tuples carry their elements' clean-ness through; other steps say their own."""
    if op.opcode == "tuple":
        return tuple(operands)
    if op.opcode == "get-tuple-element":
        of = operands[0]
        return of[op.attr("index")] if isinstance(of, tuple) else False
    return step.clean


def covers(have: Clean, need: Clean) -> bool:
    """Every part that `need` says is clean is clean in `have`."""
    if isinstance(need, tuple):
        if not isinstance(have, tuple):
            return not any(clean_leaves(need))
        return len(have) == len(need) and all(map(covers, have, need))
    return bool(have) or not need


def clean_leaves(c: Clean) -> list[bool]:
    return [x for i in c for x in clean_leaves(i)] if isinstance(c, tuple) else [c]


def _precomputable(op: Any, known: dict[Any, Any]) -> bool:
    if op.opcode not in _PURE_PRECOMPUTE or not all(v in known for v in op.operands):
        return False
    shape = op.shape
    return not shape.is_tuple and shape.num_elements <= _PRECOMPUTE_MAX_ELEMENTS


def _fast(op: Any, args: list[str], clean: list[bool], flush: bool, bind) -> _Step | None:
    opcode = op.opcode
    if opcode == "get-tuple-element":
        return _Step(f"{args[0]}[{op.attr('index')}]")
    if opcode == "tuple":
        return _Step("(" + "".join(a + ", " for a in args) + ")")
    operands = list(op.operands)
    if not operands or any(v.type.data.is_tuple for v in operands) or op.shape.is_tuple:
        return None
    dts = [_array_dtype(v) for v in operands]
    if any(d is None for d in dts) or len(set(dts)) != 1:
        return None
    if len({tuple(v.type.data.dims) for v in operands}) != 1:
        return None
    dt = dts[0]
    assert dt is not None

    def flushed(i: int) -> str:
        return args[i] if clean[i] or not flush else f"_daz({args[i]})"

    if dt in _FAST_FLOATS and opcode in _FLOAT_UFUNC and len(args) == 2:
        expr = f"{bind(_FLOAT_UFUNC[opcode])}({flushed(0)}, {flushed(1)})"
        return _Step(f"_daz(_asarray({expr}))" if flush else f"_asarray({expr})", True, flush)
    if dt in _FAST_FLOATS and opcode in ("maximum", "minimum"):
        fn = _max_min(np.maximum if opcode == "maximum" else np.minimum, opcode)
        return _Step(f"{bind(fn)}({flushed(0)}, {flushed(1)})", True, flush)
    if opcode == "compare" and op.attr("type") in (None, "FLOAT", "SIGNED", "UNSIGNED"):
        fn = bind(_COMPARE[op.attr("direction")])
        if dt in _FAST_FLOATS:
            return _Step(f"_asarray({fn}({flushed(0)}, {flushed(1)}))", True, flush)
        if dt in _FAST_INTS or dt == np.bool_:
            return _Step(f"_asarray({fn}({args[0]}, {args[1]}))", True)
    if dt in _FAST_INTS and opcode in _INT_UFUNC:
        return _Step(f"_asarray({bind(_INT_UFUNC[opcode])}({args[0]}, {args[1]}))", True)
    if dt == np.bool_ and opcode in _PRED_UFUNC:
        return _Step(f"_asarray({bind(_PRED_UFUNC[opcode])}({args[0]}, {args[1]}))", True)
    return None
