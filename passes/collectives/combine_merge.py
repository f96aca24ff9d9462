"""The combined instruction of XLA's collective combiners: its merged metadata, frontend
attributes and sharding (`collective_combiner_utils.cc`, `CreateTupleSharding`), the
dimension all-gathers and reduce-scatters of several dimensions combine on, the bitcast
shapes that swap one dimension for it, and the relay of the members' control edges."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.attrs import Metadata, Raw
from hlopass.ir.shape import ArrayShape, Shape, TupleShape, default_layout

from .combine_utils import forget_waited_on, frontend_attributes, waited_on


def merged_frontend_attributes(ops: Sequence[HloOp]) -> Raw | None:
    """XLA's `MergeFrontendAttributes`: every key, its distinct values sorted and joined
    by commas, the keys sorted."""
    values: dict[str, set[str]] = {}
    for op in ops:
        for k, v in frontend_attributes(op.attr("frontend_attributes")).items():
            values.setdefault(k, set()).add(v)
    if not values:
        return None
    body = ",".join(f'{k}="{",".join(sorted(values[k]))}"' for k in sorted(values))
    return Raw("{" + body + "}")


def merged_metadata(ops: Sequence[HloOp]) -> Metadata | None:
    """XLA's `MergeMetadata`: the first's metadata, with the source locations joined
    (`file:line,...`, lines then 0) and the op names merged under their common prefix."""
    first = ops[0].attr("metadata")
    mds = [op.attr("metadata") for op in ops]
    fields = dict(first.fields) if first is not None else {}
    places = [f"{_unquote(md.get('source_file'))}:{md.get('source_line') or 0}"
              for md in mds if md is not None and _unquote(md.get("source_file"))]  # fmt: skip
    names = [_unquote(md.get("op_name")) for md in mds if md is not None]
    names = [n for n in names if n]
    if places:
        fields["source_file"] = json.dumps(",".join(places))
        fields.pop("source_line", None)
        fields.pop("source_end_line", None)
    if names:
        fields["op_name"] = json.dumps(_merged_names(names))
    return Metadata(tuple(fields.items())) if fields else None


def _unquote(text: str | None) -> str:
    if not text:
        return ""
    return text[1:-1] if len(text) >= 2 and text[0] == '"' else text


def _merged_names(names: list[str]) -> str:
    """XLA's `MergeOpNames`: `prefix/(a:b:c)` with the common prefix cut at a `/`."""
    if len(names) == 1 or all(n == names[0] for n in names):
        return names[0]
    prefix = names[0]
    for n in names[1:]:
        i = 0
        while i < min(len(prefix), len(n)) and prefix[i] == n[i]:
            i += 1
        prefix = prefix[:i]
    cut = prefix.rfind("/")
    prefix = prefix[: cut + 1] if cut >= 0 else ""
    return prefix + "(" + ":".join(n[len(prefix) :] for n in names) + ")"


def tuple_sharding(ops: Sequence[HloOp]) -> Raw | None:
    """XLA's `CreateTupleSharding`: none when no member has a sharding, else a tuple of
    theirs (replicated for a member without one)."""
    texts = [op.attr("sharding") for op in ops]
    if all(t is None for t in texts):
        return None
    parts = [str(getattr(t, "text", t)) if t is not None else "{replicated}" for t in texts]
    return Raw("{" + ", ".join(parts) + "}")


def permuted(shape: ArrayShape, a: int, b: int) -> ArrayShape:
    """XLA's `ShapeUtil::PermuteDimensions` by the swap of dimensions `a` and `b`: the
    layout follows, so a bitcast to the result moves no data."""
    perm = list(range(len(shape.dims)))
    perm[a], perm[b] = perm[b], perm[a]
    dims = tuple(shape.dims[p] for p in perm)
    dynamic = tuple(shape.dynamic[p] for p in perm) if shape.dynamic else ()
    layout = shape.layout or default_layout(len(shape.dims))
    layout = replace(layout, minor_to_major=tuple(perm[d] for d in layout.minor_to_major))
    return ArrayShape(shape.element_type, dims, dynamic, layout)


def most_frequent_dim(ops: Sequence[HloOp]) -> int:
    """XLA's `FindMostFrequentGatherDim` (and the scatter one): the most common
    `dimensions` value (the lowest on a tie), 0 if some member has too few dimensions."""
    freq: dict[int, int] = {}
    low_rank = min(len(op.shape.dims) for op in ops)  # type: ignore[attr-defined]
    for op in ops:
        d = int(op.attr("dimensions")[0])
        freq[d] = freq.get(d, 0) + 1
    best = max(sorted(freq), key=lambda d: freq[d])
    return best if best < low_rank else 0


def tuple_of(shapes: Sequence[Shape]) -> TupleShape:
    return TupleShape(tuple(shapes))


def relay_control_dependencies(olds: Sequence[HloOp], new: HloOp) -> None:
    """`new` takes the place of `olds` in control edges: their predecessors become its,
    and instructions that waited for one of them wait for `new`."""
    preds: list[str] = []
    for old in olds:
        preds += [p for p in (old.attr("control-predecessors") or ()) if p not in preds]
    if preds:
        new.set_attr("control-predecessors", tuple(preds))
    comp = new.parent_op()
    assert isinstance(comp, ComputationOp)
    gone = {o.inst_name for o in olds}
    if not gone & waited_on(new):
        return
    for other in comp.instructions:
        waits = other.attr("control-predecessors")
        if waits and gone & set(waits):
            renamed = dict.fromkeys(new.inst_name if w in gone else w for w in waits)
            other.set_attr("control-predecessors", tuple(renamed))
    forget_waited_on(comp)
