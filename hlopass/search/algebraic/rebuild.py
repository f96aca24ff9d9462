"""A candidate (a node picked per e-class) built back into a copy of the module: each root
instruction's uses read the candidate's term for its class, built as new instructions whose
shapes `hlopass.shape_inference` infers and must match the e-graph's; the instructions no
longer read are left to DCE. The entry's instructions are then put in an order where each
follows what it reads (a candidate that needs a cycle is refused).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp, create_op
from hlopass.errors import HloError
from hlopass.ir.attrs import ShapedLiteral, SliceDim
from hlopass.ir.literal import Literal, numpy_dtype
from hlopass.ir.shape import ArrayShape, Shape, is_float
from hlopass.rewriting import RewriteContext, comps_by_name
from hlopass.search.algebraic.egraph import Graph, Node
from hlopass.search.algebraic.extract import Choice
from hlopass.search.algebraic.shapes import decode
from hlopass.search.algebraic.terms import Encoded
from hlopass.shape_inference import infer_shape
from hlopass.shape_inference.common import CannotInfer


class RebuildError(HloError):
    """A candidate that cannot be built (a cycle, or a shape XLA would infer otherwise)."""


def _value(text: str, et: str) -> np.ndarray:
    dt = numpy_dtype(et)
    if et == "pred":
        return np.asarray(text == "true", dtype=dt)
    return np.asarray(float(text) if is_float(et) else int(text)).astype(dt)


def _attrs(n: Node, shapes: list[ArrayShape]) -> tuple[str, dict[str, Any]]:
    """The opcode and attributes of a node's instruction."""
    op, a = n.op, n.args
    r = len(shapes[0].dims) if shapes else 0
    if op == "Ew1" or op == "Ew2":
        return str(a[0]), {}
    if op == "Bcast":
        return "broadcast", {"dimensions": ()}
    if op == "Reshape":
        return "reshape", {}
    if op == "T2":
        return "transpose", {"dimensions": (*range(r - 2), r - 1, r - 2)}
    if op == "Dot":
        rb = len(shapes[1].dims)
        batch = tuple(range(r - 2)) if rb == r else ()  # else a rank-2 right side
        ta, tb = int(a[2]), int(a[3])
        out: dict[str, Any] = {
            "lhs_contracting_dims": (r - 2 if ta else r - 1,),
            "rhs_contracting_dims": (rb - 1 if tb else rb - 2,),
        }
        if batch:
            out["lhs_batch_dims"] = out["rhs_batch_dims"] = batch
        return "dot", out
    if op in ("SliceC", "SliceR"):
        axis = r - 1 if op == "SliceC" else r - 2
        dims = tuple(
            SliceDim(int(a[1]), int(a[2])) if i == axis else SliceDim(0, d)
            for i, d in enumerate(shapes[0].dims)
        )
        return "slice", {"slice": dims}
    if op in ("CatC", "CatR"):
        return "concatenate", {"dimensions": (r - 1 if op == "CatC" else r - 2,)}
    raise RebuildError(f"error: no instruction for the term {op}")


class Builder:
    """Builds the picked terms into `module` (a copy of the encoded one)."""

    def __init__(
        self, module: ModuleOp, enc: Encoded, g: Graph, choice: Choice, top: Choice | None = None
    ):
        self.top = top or {}
        """Nodes for the roots' classes at the roots only (a term x -> f(x) has x's class
        under f: one level unrolled, the class's `choice` below)."""
        # the computation `enc` encodes, in the copy
        self.comp = comps_by_name(module)[enc.comp.comp_name]
        self.ops = list(self.comp.instructions)
        self.enc, self.g, self.choice = enc, g, choice
        self.names = RewriteContext.of(module, None).names
        self.built: dict[str, SSAValue] = {}
        self.new: list[HloOp] = []

    def value(self, cls: str, at_root: bool = False) -> SSAValue:
        if at_root and cls in self.top:
            return self._node(cls, self.top[cls])
        if cls in self.built:
            return self.built[cls]
        if cls not in self.choice:
            raise RebuildError(f"error: the candidate picks no term for e-class {cls}")
        v = self._node(cls, self.choice[cls])
        self.built[cls] = v
        return v

    def _node(self, cls: str, n: Node) -> SSAValue:
        if n.op == "Leaf":
            v = self.ops[int(n.args[0])].result
        else:
            shape = decode(*self.g.shape[cls])
            v = self._make(n, shape)
        return v

    def _make(self, n: Node, shape: ArrayShape) -> SSAValue:
        if n.op == "Const":
            lit = ShapedLiteral(shape, Literal(_value(str(n.args[0]), shape.element_type)))
            op = create_op("constant", [], shape, self.names.fresh("constant"), {"value": lit})
        else:
            kids = [self.value(k) for k in n.kids]
            shapes: list[Any] = [k.type.data for k in kids]  # type: ignore[attr-defined]
            code, attrs = _attrs(n, shapes)
            inferred: Shape = shape
            if code not in ("reshape", "broadcast", "slice"):  # (XLA infers none of these)
                try:
                    inferred = infer_shape(code, shapes, attrs)
                except CannotInfer as e:
                    raise RebuildError(f"error: {code} of this candidate: {e}") from None
            if not inferred.compatible(shape):
                raise RebuildError(
                    f"error: {code} infers {inferred.text(False)}, the e-graph "
                    f"says {shape.text(False)}"
                )
            op = create_op(code, kids, shape, self.names.fresh(code), attrs)
        self.comp.block.insert_op_before(op, self.comp.block.last_op)  # type: ignore[arg-type]
        self.new.append(op)
        return op.result

    def run(self) -> None:
        for i in self.enc.roots:
            v = self.value(self.g.root[i], at_root=True)
            old = self.ops[i].result
            if v is not old:
                old.replace_all_uses_with(v)
        _order(self.comp)


def _order(comp: Any) -> None:
    """Each instruction after the ones it reads, the old order kept where it can be."""
    block = comp.block
    ops = [o for o in block.ops if o is not block.last_op]
    mine = set(map(id, ops))
    state: dict[int, int] = {}
    out: list[Any] = []

    def visit(o: Any) -> None:
        s = state.get(id(o))
        if s == 2:
            return
        if s == 1:
            raise RebuildError("error: the candidate reads a value that depends on itself")
        state[id(o)] = 1
        for v in o.operands:
            if id(v.owner) in mine:
                visit(v.owner)
        state[id(o)] = 2
        out.append(o)

    for o in ops:
        visit(o)
    last = block.last_op
    for o in ops:
        o.detach()
    for o in out:
        block.insert_op_before(o, last)


def rebuild(
    module: ModuleOp, enc: Encoded, g: Graph, choice: Choice, top: Choice | None = None
) -> ModuleOp:
    """A copy of `module` (the one `enc` encodes) with the candidate's terms at its roots
    (`top`: other nodes for the roots' classes, at the roots only)."""
    from hlopass.pipeline import Runner, parse_pass_pipeline

    m = module.clone()
    Builder(m, enc, g, choice, top).run()
    Runner().run(parse_pass_pipeline("dce,cse"), m)
    return m
