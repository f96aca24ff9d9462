"""The interpreter's engine: walks computations in order and dispatches each instruction.

Values are `np.ndarray` (dtype from `hlopass.literal.numpy_dtype`) or tuples of values.
Each op family registers its evaluators in `HANDLERS` with `@handler("opcode", ...)`.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlopass.dialects.hlo import ComputationOp, HloOp, computations, entry_computation
from hlopass.errors import UnsupportedOpError
from hlopass.interpreter.numeric import flushing
from hlopass.literal import numpy_dtype
from hlopass.shape import ArrayShape, Shape, TupleShape

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
    """An argument as the interpreter's value of `shape` (dtype and dims checked)."""
    if isinstance(shape, TupleShape):
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.elements):
            raise ValueError(
                f"expected a tuple of {len(shape.elements)} values for {shape.text(False)}"
            )
        return tuple(coerce(v, s) for v, s in zip(value, shape.elements, strict=False))
    assert isinstance(shape, ArrayShape)
    if shape.element_type in ("token", "opaque"):
        return np.zeros((0,), np.uint8)
    arr = np.asarray(value)
    if arr.shape != tuple(shape.dims):
        raise ValueError(f"has shape {arr.shape}, expected {shape.text(False)}")
    dtype = dtype_of(shape)
    if arr.dtype != dtype:
        if arr.dtype.kind == "f" and dtype.kind in "iub":
            raise ValueError(f"has dtype {arr.dtype}, expected {shape.element_type}")
        arr = arr.astype(dtype)
    return arr


def flatten(value: Value) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in flatten(v)]
    return [value]


class Interpreter:
    """Evaluates the computations of one module."""

    def __init__(self, module: Any):
        self.module = module
        comps = computations(module) if module is not None else []
        self.comps: dict[str, ComputationOp] = {c.comp_name: c for c in comps}
        self._schedules: dict[int, tuple[list[HloOp], HloOp]] = {}
        self._plans: dict[tuple[int, bool], Callable[[Sequence[Value]], Value]] = {}

    def entry(self) -> ComputationOp:
        return entry_computation(self.module)

    def comp(self, name: str) -> ComputationOp:
        return self.comps[name]

    def schedule(self, comp: ComputationOp) -> tuple[list[HloOp], HloOp]:
        """Instructions the root depends on, in text order, and the root."""
        key = id(comp)
        cached = self._schedules.get(key)
        if cached is None:
            root = comp.root
            live = {id(root)}
            instrs = list(comp.instructions)
            for op in reversed(instrs):
                if id(op) in live:
                    for v in op.operands:
                        live.add(id(v.owner))
            cached = ([op for op in instrs if id(op) in live], root)
            self._schedules[key] = cached
        return cached

    def call(self, comp: ComputationOp | str, args: Sequence[Value]) -> Value:
        if isinstance(comp, str):
            comp = self.comp(comp)
        return self.plan(comp)(args)

    def plan(self, comp: ComputationOp) -> Callable[[Sequence[Value]], Value]:
        """The computation prepared once per float mode (`hlopass.interpreter.plan`)."""
        key = (id(comp), flushing())
        run = self._plans.get(key)
        if run is None:
            from hlopass.interpreter.plan import build_plan

            run = self._plans[key] = build_plan(self, comp)
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
