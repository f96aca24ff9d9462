"""`dot-merger`: merge dots that share an operand into one dot (XLA's DotMerger).

`x = dot(a, b)` and `y = dot(a, c)` become `z = dot(a, concatenate(b', c'))` with `x` and
`y` sliced back out of `z` (XLA runs it in the GPU pipeline: several small dots then make
one kernel that reads `a` once). Each output element is the same contraction as before, so
values are kept exactly.

As XLA's: the shared operand is followed back through transposes and reshapes to its
*source* while no source dimension mixes categories (batch, non-contracting,
contracting; reshapes are tracked as factors of dimensions, see `atoms`); dots are grouped
by (source, the categories of the source's non-size-1 dimensions, queue id, element types
of both operands and of the result, precision config). Dots with control edges, or whose
operands are a sub-byte value converted up, stay apart. Within a group, a set is merged
only when no dot of it reaches another (a merge would make a cycle), the concatenated
operand and output stay within `max-size-to-merge` bytes, the sizes differ by at most
20x, and XLA's runtime estimate says reading the shared operand once saves time. The
merged dot's shared operand is the source with size-1 dimensions dropped and consecutive
contracting dimensions collapsed; the other operands are brought to one `[batch,
non-contracting, contracting]` form (non-contracting last when the first one's last
dimension is non-contracting), concatenated, and each result is sliced, reshaped and
transposed back to its dot's shape; chains of transposes and reshapes after the slices
are then shortened (`consumers`).

Differs from XLA's: bitcasts are not followed; a reshape is followed only where each
dimension boundary falls between factors (XLA's ShapeTracker maps some more); the other
(concatenated) operand is followed only through transposes and size-1 reshapes, so a
reshape there stays in front of the concatenation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.ir.attrs import SliceDim
from hlopass.ir.shape import ArrayShape, array
from hlopass.passes.layout.layouts import set_shape
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    control_predecessor_names,
    erase_dead,
    fusion_computations,
    instructions,
    new_op,
)
from hlopass.text.exporter import instruction_post_order

from .consumers import simplify_consumers
from .plan import Reachability, Usage, categories, equivalence_classes, find_dots_to_merge

B, N, C = "B", "N", "C"


def _dims(value: SSAValue) -> tuple[int, ...]:
    return value.type.data.dims  # type: ignore[attr-defined]


@dataclass
class _Builder:
    """Inserts the new instructions at the end of one computation (re-sorted afterwards)."""

    ctx: RewriteContext
    rewriter: PatternRewriter
    comp: ComputationOp
    pattern: RewritePattern
    """The pattern the trace hook is told about."""
    made: set = field(default_factory=set)

    def new(self, opcode: str, operands: list[SSAValue], shape: ArrayShape,
            attrs: dict | None = None, like: HloOp | None = None) -> SSAValue:  # fmt: skip
        end = self.comp.body.block.last_op
        return new_op(self.rewriter, self.ctx, opcode, operands, shape, attrs, like, end).result

    def reshape(self, value: SSAValue, dims: tuple[int, ...],
                shape: ArrayShape | None = None) -> SSAValue:  # fmt: skip
        """`value` reshaped to `dims` (`shape`, when given, is the result's, layout too);
        a reshape of a reshape built here reshapes the first one's operand."""
        inner = value.owner
        if (isinstance(inner, HloOp) and inner.opcode == "reshape" and inner in self.made
                and inner.result.first_use is None):  # fmt: skip
            value = inner.operands[0]
            self.made.discard(inner)
            self.rewriter.erase(inner)
        if _dims(value) == tuple(dims) and (shape is None or value.type.data == shape):  # type: ignore[attr-defined]
            return value
        et = value.type.data.element_type  # type: ignore[attr-defined]
        out = self.new("reshape", [value], shape or array(et, dims))
        self.made.add(out.owner)  # type: ignore[arg-type]
        return out

    def transpose(self, value: SSAValue, perm: list[int],
                  shape: ArrayShape | None = None) -> SSAValue:  # fmt: skip
        """`value` transposed by `perm`; a reshape where only size-1 dims move."""
        src = _dims(value)
        dims = tuple(src[p] for p in perm)
        moved = [p for p in perm if src[p] != 1]
        if moved == sorted(moved):
            return self.reshape(value, dims, shape)
        et = value.type.data.element_type  # type: ignore[attr-defined]
        return self.new("transpose", [value], shape or array(et, dims), {"dimensions": tuple(perm)})


def _groups(cats: list[str], kept: list[int]) -> list[tuple[str, list[int]]]:
    """The merged dot's shared operand: the source's non-size-1 dims `kept` (their
    categories `cats`), consecutive contracting ones collapsed where there are several."""
    groups = [(c, [s]) for c, s in zip(cats, kept, strict=True)]
    where = [i for i, (c, _) in enumerate(groups) if c == C]
    if len(where) > 1 and where == list(range(where[0], where[-1] + 1)):
        merged = [s for i in where for s in groups[i][1]]
        groups = groups[: where[0]] + [(C, merged)] + groups[where[-1] + 1 :]
    return groups


def _dnums(dot: HloOp, side: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    key = "lhs" if side == 0 else "rhs"
    return dot.attr(f"{key}_batch_dims") or (), dot.attr(f"{key}_contracting_dims") or ()


def _partners(u: Usage) -> dict[int, int]:
    """Per dim of the concat operand's source: the shared operand's dim it is paired with
    (batch or contracting, size > 1)."""
    sb, sc = _dnums(u.dot, u.side)
    ob, oc = _dnums(u.dot, 1 - u.side)
    out = {}
    for k, i in enumerate(sb):
        if u.atoms.of_operand[i]:
            out[u.concat_map[ob[k]]] = i
    for k, i in enumerate(sc):
        if u.atoms.of_operand[i]:
            out[u.concat_map[oc[k]]] = i
    return out  # type: ignore[return-value]


def _concat_operand(b: _Builder, u: Usage, groups: list, nc_last: bool) -> SSAValue:
    """The dot's other operand as `[batch, nc, contracting]` (or `[batch, contracting, nc]`)
    with its non-contracting dims flattened into one, built from its source: its batch and
    contracting dims are split into the shared operand's atoms and regrouped as the shared
    source's dims."""
    a = u.atoms
    ob, oc = _dnums(u.dot, 1 - u.side)
    o_dims = _dims(u.dot.operands[1 - u.side])
    nc = [j for j in range(len(o_dims)) if j not in ob and j not in oc]
    partner = _partners(u)
    split: list[int] = []
    at: dict[int, int] = {}  # atom -> dim of the split source
    kept: dict[int, int] = {}  # unsplit dim of the source -> dim of the split source
    for y, n in enumerate(_dims(u.concat_source)):
        if y in partner:
            for x in a.of_operand[partner[y]]:
                at[x] = len(split)
                split.append(a.sizes[x])
        else:
            kept[y] = len(split)
            split.append(n)
    bs = [at[x] for cat, ss in groups if cat == B for s in ss for x in a.of_source[s]]
    cs = [[at[x] for s in ss for x in a.of_source[s]] for cat, ss in groups if cat == C]
    ns = [kept[u.concat_map[j]] for j in nc if u.concat_map[j] is not None]  # type: ignore[index]
    flat_cs = [d for g in cs for d in g]
    order = bs + (ns + flat_cs if nc_last else flat_cs + ns)
    perm = order + [d for d in range(len(split)) if d not in order]
    x = b.reshape(u.concat_source, tuple(split))
    x = b.transpose(x, perm)
    nc_size = _product(o_dims[j] for j in nc)
    c_sizes = [_product(split[d] for d in g) for g in cs]
    b_sizes = [_product(a.sizes[x] for x in a.of_source[s]) for cat, ss in groups if cat == B
               for s in ss]  # fmt: skip
    shape = b_sizes + ([nc_size] + c_sizes if nc_last else c_sizes + [nc_size])
    return b.reshape(x, tuple(shape))


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _restore(b: _Builder, u: Usage, merged: SSAValue, sl: list[SliceDim],
             groups: list, shared_is_lhs: bool) -> SSAValue:  # fmt: skip
    """Slice `u.dot`'s part out of the merged dot, split it into atoms, transpose them into
    `u.dot`'s order and reshape to its shape (the last of these with the dot's layout)."""
    dot, a = u.dot, u.atoms
    sb, sc = _dnums(dot, u.side)
    ob, oc = _dnums(dot, 1 - u.side)
    o_dims = _dims(dot.operands[1 - u.side])
    s_nc = [i for i in range(len(a.of_operand)) if i not in sb and i not in sc]
    o_nc = [("o", j) for j in range(len(o_dims)) if j not in ob and j not in oc]
    # the slice, split: [batch atoms, shared nc atoms, concat nc dims] (or nc dims first)
    b_atoms = [("a", x) for cat, ss in groups if cat == B for s in ss for x in a.of_source[s]]
    n_atoms = [("a", x) for cat, ss in groups if cat == N for s in ss for x in a.of_source[s]]
    labels = b_atoms + (n_atoms + o_nc if shared_is_lhs else o_nc + n_atoms)
    # the dot's own order: batch (in its batch order), then lhs nc, then rhs nc
    s_part = [("a", x) for i in s_nc for x in a.of_operand[i]]
    target = [("a", x) for i in sb for x in a.of_operand[i]]
    target += s_part + o_nc if u.side == 0 else o_nc + s_part
    size = {lab: (a.sizes[lab[1]] if lab[0] == "a" else o_dims[lab[1]]) for lab in labels}
    out = dot.shape
    assert isinstance(out, ArrayShape)
    x = b.new("slice", [merged], array(out.element_type, tuple(d.limit - d.start for d in sl)),
              {"slice": tuple(sl)})  # fmt: skip
    x = b.reshape(x, tuple(size[lab] for lab in labels))
    x = b.transpose(x, [labels.index(lab) for lab in target])
    x = b.reshape(x, out.dims)
    if x.type.data != out:  # type: ignore[attr-defined]
        set_shape(x.owner, out)  # type: ignore[arg-type]  # (built here: the dot's layout)
    return x


def _has_op_name(dot: HloOp) -> bool:
    md = dot.attr("metadata")
    return md is not None and dict(md.fields).get("op_name") not in (None, '""')


def _new_dot(b: _Builder, group: list[Usage], shared: SSAValue, concat: SSAValue,
             groups: list, cdim: int, shared_is_lhs: bool) -> SSAValue:  # fmt: skip
    """The merged dot: [batch, lhs nc, rhs nc] of the shared operand (dims `groups`) and the
    concatenated one ([batch, nc, contracting] or [batch, contracting, nc], nc at `cdim`)."""
    first = group[0]
    sizes = _dims(shared)
    nb = sum(cat == B for cat, _ in groups)
    n_cat = _dims(concat)[cdim]
    s_b, s_n = ([n for n, (c, _) in zip(sizes, groups, strict=True) if c == k] for k in (B, N))
    out_dims = s_b + (s_n + [n_cat] if shared_is_lhs else [n_cat] + s_n)
    shared_nums = tuple(tuple(i for i, (c, _) in enumerate(groups) if c == k) for k in (B, C))
    concat_nums = (tuple(range(nb)), tuple(i for i in range(nb, len(_dims(concat))) if i != cdim))
    lhs, rhs = (shared_nums, concat_nums) if shared_is_lhs else (concat_nums, shared_nums)
    attrs = {"lhs_batch_dims": lhs[0], "lhs_contracting_dims": lhs[1],
             "rhs_batch_dims": rhs[0], "rhs_contracting_dims": rhs[1]}  # fmt: skip
    attrs = {k: v for k, v in attrs.items() if v}
    for k in ("operand_precision", "algorithm"):  # (equal for the group: the class key)
        if first.dot.attr(k) is not None:
            attrs[k] = first.dot.attr(k)
    named = [u.dot for u in group if _has_op_name(u.dot)]  # XLA: the first one named
    operands = [shared, concat] if shared_is_lhs else [concat, shared]
    et = first.dot.shape.element_type  # type: ignore[attr-defined]
    return b.new("dot", operands, array(et, tuple(out_dims)), attrs, named[0] if named else None)


def merge_group(b: _Builder, group: list[Usage], replacements: dict) -> HloOp:
    """Build one merged dot for the dots of `group` (one source, same categories); what
    replaces each goes into `replacements` (applied once all merges are built: as XLA's,
    a later merge may use an earlier merged dot as its source)."""
    first = group[0]
    # the shared operand goes on the side it is on more often (the right on a tie)
    shared_is_lhs = len(group) < 2 * sum(u.side == 0 for u in group)
    src_dims = _dims(first.source)
    kept = [d for d, n in enumerate(src_dims) if n != 1]
    groups = _groups(categories(first), kept)  # (the same for every dot of the group)
    shared = b.reshape(first.source, tuple(_product(src_dims[s] for s in ss) for _, ss in groups))
    o_dims = _dims(first.dot.operands[1 - first.side])
    nc_last = len(o_dims) > 0 and len(o_dims) - 1 in _dnums(first.dot, 1 - first.side)[1]
    parts = [_concat_operand(b, u, groups, nc_last) for u in group]
    nb = sum(cat == B for cat, _ in groups)
    cdim = nb if nc_last else len(_dims(parts[0])) - 1
    cdims = list(_dims(parts[0]))
    cdims[cdim] = sum(_dims(p)[cdim] for p in parts)
    et = parts[0].type.data.element_type  # type: ignore[attr-defined]
    concat = b.new("concatenate", parts, array(et, tuple(cdims)), {"dimensions": (cdim,)})
    merged = _new_dot(b, group, shared, concat, groups, cdim, shared_is_lhs)
    out_dims = _dims(merged)
    sdim = len(out_dims) - 1 if shared_is_lhs else nb
    start = 0
    for u, part in zip(group, parts, strict=True):
        size = _dims(part)[cdim]
        sl = [SliceDim(0, n) for n in out_dims]
        sl[sdim] = SliceDim(start, start + size)
        start += size
        replacements[u.dot] = _restore(b, u, merged, sl, groups, shared_is_lhs)
        b.ctx.note(b.pattern, u.dot, f"into {merged.owner.inst_name}")  # type: ignore[attr-defined]
    return merged.owner  # type: ignore[return-value]


def _resort(comp: ComputationOp) -> None:
    """Put the instructions back in an order where each follows its operands."""
    block = comp.body.block
    end = block.last_op
    assert end is not None
    for op in instruction_post_order(comp):
        op.detach()
        block.insert_op_before(op, end)


@dataclass
class MergeDots(RewritePattern):
    """`dot(a, b), dot(a, c)` -> slices of `dot(a, concatenate(b, c))`, in one computation.

    Guards: see the module docstring (the same source and dimension categories, types and
    precision, no control edges, no path between the dots, XLA's size and cost limits)."""

    # matched on the computation (XLA's pass walks them), so no `OPCODES`: that would tell
    # `OpcodeDispatchApplier` to offer it only dots; the grammar page reads this instead
    TARGETS: ClassVar[tuple[str, ...]] = ("dot",)

    ctx: RewriteContext
    max_size_to_merge: int = 64 << 20

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, ComputationOp):
            return
        pinned = control_predecessor_names(self.ctx.module)
        ops = instructions(op)
        classes = equivalence_classes(ops, pinned)
        merged: dict[HloOp, SSAValue] = {}
        new_dots: list[HloOp] = []
        if not classes:
            return
        b = _Builder(self.ctx, rewriter, op, self)
        reach = Reachability(instruction_post_order(op))
        for usages in classes:
            while True:
                free = [u for u in usages if u.dot not in merged]
                group = (
                    find_dots_to_merge(free, reach, self.max_size_to_merge) if len(free) > 1 else []
                )
                if len(group) < 2:
                    break
                new_dots.append(merge_group(b, group, merged))
                reach.merge([u.dot for u in group])
        if not merged:
            return
        gone = []
        for dot, value in merged.items():
            dot.result.replace_all_uses_with(value)
        for dot in merged:
            gone.extend(dot.operands)
            rewriter.erase(dot)
        erase_dead(rewriter, gone)
        _resort(op)  # (the chains below are then in order too)
        for dot in new_dots:
            for use in list(dot.result.uses):
                if isinstance(use.operation, HloOp) and use.operation.opcode == "slice":
                    simplify_consumers(rewriter, self.ctx, use.operation, pinned)


@dataclass(frozen=True)
class DotMergerPass(HloModulePass):
    """Merge dots that share an operand into one dot on the concatenated other operands."""

    name: ClassVar[str] = "dot-merger"

    max_size_to_merge: int = 64 << 20
    """XLA's `max_size_to_merge`: the most bytes the concatenated operand and the output of
    a merged dot may take (XLA's GPU pipeline passes `xla_gpu_dot_merger_threshold_mb`,
    64, times 2^20; its hlo-opt registration has no limit)."""

    def __post_init__(self) -> None:
        if self.max_size_to_merge < 0:
            raise ValueError(f"max-size-to-merge must be >= 0, got {self.max_size_to_merge}")

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        fused = fusion_computations(module)
        pattern = MergeDots(rctx, self.max_size_to_merge)
        changed = False
        for comp in computations(module):
            if comp.comp_name in fused:
                continue
            rewriter = PatternRewriter(comp)
            pattern.match_and_rewrite(comp, rewriter)
            changed |= rewriter.has_done_action  # (every merge erases the merged dots)
        return changed
