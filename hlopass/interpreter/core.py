"""The interpreter's engine: walks computations in order and dispatches each instruction.

Values are `np.ndarray` (dtype from `hlopass.ir.literal.numpy_dtype`) or tuples of values.
Each op family registers its evaluators in `HANDLERS` with `@handler("opcode", ...)`.
"""

from __future__ import annotations

import contextlib
import math
import os
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlopass.dialects.hlo import ComputationOp, HloOp, computations, entry_computation
from hlopass.errors import HloResourceError, UnsupportedOpError
from hlopass.interpreter.numeric import flushing
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape, Shape, TupleShape

Value = Any  # np.ndarray | tuple[Value, ...]
Handler = Callable[["Interpreter", HloOp, list[Value]], Value]
HANDLERS: dict[str, Handler] = {}


def handler(*opcodes: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for opcode in opcodes:
            HANDLERS[opcode] = fn
        return fn

    return register


def unsupported(op: HloOp, why: str = "") -> UnsupportedOpError:
    what = op.opcode
    if op.opcode == "custom-call":
        what = f"custom-call target {op.attr('custom_call_target')!r}"
    extra = f": {why}" if why else ""
    return UnsupportedOpError(
        f"interpreter does not support {what} (instruction {op.inst_name}){extra}"
    )


def dtype_of(shape: Shape) -> np.dtype:
    assert isinstance(shape, ArrayShape), shape
    return numpy_dtype(shape.element_type)


def element_type(op: HloOp) -> str:
    shape = op.shape
    assert isinstance(shape, ArrayShape)
    return shape.element_type


def coerce(value: Any, shape: Shape) -> Value:
    """An argument as the interpreter's value of `shape`; ValueError saying what differs.

    One rule for dtypes: a numpy array (or numpy scalar) must have exactly the parameter's
    dtype (nothing is cast behind the caller's back); a Python number or nested list is
    converted when that keeps its kind (float -> f32 yes, float -> s32 no)."""
    if isinstance(shape, TupleShape):
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.elements):
            raise ValueError(
                f"expected a tuple of {len(shape.elements)} values for {shape.text(False)}"
            )
        return tuple(coerce(v, s) for v, s in zip(value, shape.elements, strict=False))
    assert isinstance(shape, ArrayShape)
    if shape.element_type in ("token", "opaque"):
        return np.zeros((0,), np.uint8)
    dtype = dtype_of(shape)
    expected = shape.text(False)
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype != dtype:
            raise ValueError(f"is {_numpy_name(arr.dtype)}{list(arr.shape)}, expected {expected}")
    else:
        try:
            natural = np.asarray(value)
        except ValueError as e:  # ragged nested lists
            raise ValueError(f"is not an array ({e}), expected {expected}") from None
        if natural.dtype.kind not in "biufc" or not np.can_cast(natural.dtype, dtype, "same_kind"):
            raise ValueError(f"is a Python {natural.dtype.kind!r}-kind value, expected {expected}")
        arr = natural.astype(dtype)
    if arr.shape != tuple(shape.dims):
        raise ValueError(f"has shape {list(arr.shape)}, expected {expected}")
    return arr


def _numpy_name(dtype: np.dtype) -> str:
    """numpy's dtype in XLA's spelling where there is one (float32 -> f32)."""
    from hlopass.ir.shape import ELEMENT_BITS

    for et in ELEMENT_BITS:
        if et not in ("token", "opaque") and numpy_dtype(et) == dtype:
            return et
    return str(dtype)


def flatten(value: Value) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in flatten(v)]
    return [value]


def memory_limit() -> int:
    """Bytes one instruction's result may take: `$HLOPASS_INTERP_MAX_BYTES`, else half the
    machine's memory (a bigger array could only end in MemoryError or the OOM killer)."""
    env = os.environ.get("HLOPASS_INTERP_MAX_BYTES")
    if env:
        return int(env)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 1 << 34


def _check_size(op: HloOp) -> None:
    """Refuse, naming the instruction, a result bigger than `memory_limit()`."""
    shape = op.shape
    leaves = shape.leaves() if isinstance(shape, TupleShape) else [shape]
    size = 0
    for leaf in leaves:
        if isinstance(leaf, ArrayShape) and leaf.element_type not in ("token", "opaque"):
            size += math.prod(max(d, 0) for d in leaf.dims) * dtype_of(leaf).itemsize
    limit = memory_limit()
    if size > limit:
        raise HloResourceError(
            f"instruction {op.inst_name} ({op.opcode} giving {shape.text(False)}) needs "
            f"{_bytes_text(size)}, more than the interpreter's limit of {_bytes_text(limit)} "
            "(HLOPASS_INTERP_MAX_BYTES)"
        )


def _bytes_text(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.3g} {unit}" if unit != "B" else f"{n} B"
        n /= 1024  # type: ignore[assignment]
    return f"{n:.3g} TiB"


class Interpreter:
    """Evaluates the computations of one module."""

    def __init__(self, module: Any):
        self.module = module
        comps = computations(module) if module is not None else []
        self.comps: dict[str, ComputationOp] = {c.comp_name: c for c in comps}
        self._schedules: dict[int, tuple[list[HloOp], HloOp]] = {}
        self._plans: dict[tuple[int, bool, tuple], Callable[[Sequence[Value]], Value]] = {}
        # the most iterations one `while` loop may run (None: no limit, as in XLA);
        # beyond it `control.IterationLimitError` (`hlopass run --max-iterations`)
        self.max_iterations: int | None = None

    def entry(self) -> ComputationOp:
        return entry_computation(self.module)

    def comp(self, name: str) -> ComputationOp:
        return self.comps[name]

    def schedule(self, comp: ComputationOp) -> tuple[list[HloOp], HloOp]:
        """Instructions the root (or a send) depends on, in text order, and the root."""
        key = id(comp)
        cached = self._schedules.get(key)
        if cached is None:
            root = comp.root
            instrs = list(comp.instructions)
            # a send is seen by its receiver only: it runs though nothing here uses it
            live = {id(root)} | {id(op) for op in instrs if op.opcode in ("send", "send-done")}
            for op in reversed(instrs):
                if id(op) in live:
                    for v in op.operands:
                        live.add(id(v.owner))
            cached = ([op for op in instrs if id(op) in live], root)
            for op in cached[0]:
                _check_size(op)
            self._schedules[key] = cached
        return cached

    def call(self, comp: ComputationOp | str, args: Sequence[Value]) -> Value:
        if isinstance(comp, str):
            comp = self.comp(comp)
        try:
            return self.plan(comp)(args)
        except MemoryError:
            raise HloResourceError(
                f"out of memory evaluating computation {comp.comp_name} (set "
                "HLOPASS_INTERP_MAX_BYTES lower to be told which instruction is too big)"
            ) from None

    def plan(
        self, comp: ComputationOp, clean_args: tuple = ()
    ) -> Callable[[Sequence[Value]], Value]:
        """The computation prepared once per float mode and per knowledge of which parts of
        its arguments are flushed already (`hlopass.interpreter.plan`)."""
        key = (id(comp), flushing(), clean_args)
        run = self._plans.get(key)
        if run is None:
            from hlopass.interpreter.plan import build_plan

            run = self._plans[key] = build_plan(self, comp, clean_args)
        return run

    def handler_of(self, op: HloOp) -> Handler:
        fn = HANDLERS.get(op.opcode)
        if fn is None:
            # raised when the instruction runs: a plan of a computation holding an
            # unsupported op is fine as long as that op is never reached
            def fail(interp: Interpreter, op: HloOp, operands: list[Value]) -> Value:
                raise unsupported(op)

            return fail
        return fn

    def eval(self, op: HloOp, operands: list[Value]) -> Value:
        fn = HANDLERS.get(op.opcode)
        if fn is None:
            raise unsupported(op)
        return fn(self, op, operands)


_INTERPRETERS: weakref.WeakKeyDictionary[Any, Interpreter] = weakref.WeakKeyDictionary()


def interpreter_for(module: Any) -> Interpreter:
    try:
        interp = _INTERPRETERS.get(module)
    except TypeError:
        return Interpreter(module)
    if interp is None:
        interp = Interpreter(module)
        with contextlib.suppress(TypeError):  # not weak-referenceable: never cached
            _INTERPRETERS[module] = interp
    return interp


def forget(module: Any) -> None:
    """Drop the cached interpreter of `module` (its schedules go stale when passes edit it)."""
    with contextlib.suppress(TypeError):
        _INTERPRETERS.pop(module, None)


def module_of(op: HloOp) -> Any:
    node = op.parent_op()
    while node is not None and not isinstance(node, ComputationOp):
        node = node.parent_op()
    return node.parent_op() if node is not None else None
