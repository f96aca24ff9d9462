"""`all-reduce-folder`: an all-reduce of an all-reduce becomes one all-reduce over the
union of the groups (XLA's `AllReduceFolder`).

`ar1(ar0(x))` with ar0's groups {{0,1},{2,3}} and ar1's {{0,2},{1,3}} gives every replica
x0 + x1 + x2 + x3: one all-reduce over {{0,1,2,3}}. The groups fold only when each
replica's contributors are counted once and every replica of a folded group has the same
contributors. Also home of what the other collective simplifiers share: XLA's
`AllReduceKey`, reduction kinds, explicit replica groups, fresh channel ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.interpreter.replicas import replica_groups
from hlopass.ir.attrs import Raw
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    computation_named,
    is_control_predecessor,
    module_of,
    new_op,
    owner,
    run_patterns,
)

# --- shared by the collective simplifiers ---------------------------------------------------


def module_int(module: ModuleOp | None, key: str) -> int:
    """The module header's `key` (`replica_count`, `num_partitions`); 1 when absent."""
    attr = None if module is None else module.attributes.get("hlo." + key)
    data = getattr(attr, "data", None)
    return int(data) if isinstance(data, int) else 1


def explicit_groups(op: HloOp) -> list[list[int]] | None:
    """`op`'s replica groups, iota form expanded; None for `{}` (XLA's empty list)."""
    raw = op.attr("replica_groups")
    text = str(raw or "{}").replace(" ", "")
    if text in ("{}", "{{}}"):
        return None
    return replica_groups(raw, 0)


def groups_text(groups: list[list[int]]) -> Raw:
    return Raw("{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}")


@dataclass
class ChannelIds:
    """XLA's `NextChannelId`: one past the largest channel id in the module, then counting."""

    next: int = 1

    @staticmethod
    def of(module: ModuleOp) -> ChannelIds:
        ids = [op.attr("channel_id") for c in computations(module) for op in c.instructions
               if "channel_id" in op.attr_specs]  # fmt: skip
        return ChannelIds(max([i for i in ids if isinstance(i, int)], default=0) + 1)

    def take(self) -> int:
        self.next += 1
        return self.next - 1


def reduction_kind(opcode: str, element_type: str) -> str | None:
    """XLA's `OpcodeToReductionKind`: sum, product, min, max (and/or of pred are min/max)."""
    kind = {"add": "sum", "multiply": "product", "minimum": "min", "maximum": "max"}.get(opcode)
    if kind is None and element_type == "pred":
        kind = {"and": "min", "or": "max"}.get(opcode)
    return kind


def reducer(op: HloOp) -> ComputationOp | None:
    module = module_of(op)
    name = op.attr("to_apply")
    return None if module is None or not isinstance(name, str) else computation_named(module, name)


def is_trivial_reducer(comp: ComputationOp | None) -> bool:
    """Three instructions, two of them parameters (XLA's guard before reading the root)."""
    if comp is None:
        return False
    ops = list(comp.instructions)
    return len(ops) == 3 and sum(o.opcode == "parameter" for o in ops) == 2


def computation_kind(comp: ComputationOp | None) -> str | None:
    """XLA's `MatchReductionComputation`: the root's kind when it combines parameters 0 and
    1 (either order) into an effective scalar."""
    if comp is None:
        return None
    root = comp.root
    shape = root.shape
    if not isinstance(shape, ArrayShape) or any(d != 1 for d in shape.dims):
        return None
    kind = reduction_kind(root.opcode, shape.element_type)
    numbers = sorted(_param_number(v) for v in root.operands)
    return kind if len(root.operands) == 2 and numbers == [0, 1] else None


def _param_number(value: SSAValue) -> int:
    o = owner(value)
    return o.attr("number") if o is not None and o.opcode == "parameter" else -1


def has_control_deps(op: HloOp) -> bool:
    return bool(op.attr("control-predecessors")) or is_control_predecessor(op)


def all_reduce_key(op: HloOp, ignore_groups: bool = False) -> tuple | None:
    """XLA's `GetAllReduceKey` (no domains): reducer root opcode and type, whether there is
    a channel, global device ids, the groups; None with control dependencies or a reducer
    other than two parameters and one instruction."""
    if op.opcode not in ("all-reduce", "reduce-scatter") or has_control_deps(op):
        return None
    comp = reducer(op)
    if not is_trivial_reducer(comp):
        return None
    assert comp is not None
    root = comp.root
    groups = None if ignore_groups else explicit_groups(op)
    return (root.opcode, root.shape.element_type, op.attr("channel_id") is not None,  # type: ignore[attr-defined]
            bool(op.attr("use_global_device_ids")), groups)  # fmt: skip


def unique_users(value: SSAValue) -> list[Operation]:
    """XLA's users: each using instruction once."""
    return list(dict.fromkeys(u.operation for u in value.uses))


def layout_constrained(module: ModuleOp, opcodes: tuple[str, ...]) -> bool:
    """XLA's `ContainsLayoutConstrainedCollective`: some `opcodes` instruction has
    `constrain_layout=true` (the simplifiers then leave the module alone)."""
    return any(op.opcode in opcodes and op.attr("constrain_layout")
               for c in computations(module) for op in c.instructions)  # fmt: skip


def frontend_attributes(op: HloOp) -> dict[str, str]:
    """`op`'s frontend attributes as a dict (XLA prints them `{k="v",...}`)."""
    raw = op.attr("frontend_attributes")
    text = str(getattr(raw, "text", raw or ""))
    return dict(re.findall(r'([\w.\-]+)="((?:[^"\\]|\\.)*)"', text))


def set_frontend_attributes(op: HloOp, attrs: dict[str, str]) -> None:
    body = ",".join(f'{k}="{v}"' for k, v in attrs.items())
    op.set_attr("frontend_attributes", Raw("{" + body + "}") if attrs else None)


def merged_frontend_attributes(ops: list[HloOp]) -> dict[str, str]:
    """XLA's `MergeFrontendAttributes`: per key (sorted), its distinct values sorted and
    joined by commas."""
    values: dict[str, set[str]] = {}
    for op in ops:
        for k, v in frontend_attributes(op).items():
            values.setdefault(k, set()).add(v)
    return {k: ",".join(sorted(values[k])) for k in sorted(values)}


GROUP_KEY = "collective_group_key"
"""XLA's `kCollectiveGroupKeyAttr` frontend attribute."""


# --- the folder --------------------------------------------------------------------------


def fold_groups(g0: list[list[int]], g1: list[list[int]]) -> list[list[int]] | None:
    """The groups of `ar1(ar0(x))` as one all-reduce, or None when some replica would count
    a contributor twice or replicas of one folded group see different contributors."""
    n = max(i for g in g0 for i in g) + 1
    group_of = [-1] * n
    for k, g in enumerate(g0):
        for i in g:
            group_of[i] = k
    seen: dict[frozenset[int], int] = {}
    set_of = [0] * n
    for g in g1:
        contributors: set[int] = set()
        for i in g:
            if i >= n or group_of[i] < 0:
                return None  # ar1 names a replica ar0's groups do not list (invalid input)
            for c in g0[group_of[i]]:
                if c in contributors:
                    return None
                contributors.add(c)
        key = frozenset(contributors)
        set_id = seen.setdefault(key, len(seen) + 1)
        for i in g:
            set_of[i] = set_id
    folded = []
    for members, set_id in seen.items():
        if any(set_of[i] != set_id for i in members):
            return None
        folded.append(sorted(members))
    return sorted(folded, key=lambda g: g[0])


@dataclass
class FoldAllReduceOfAllReduce(RewritePattern):
    """`all-reduce(all-reduce(x)) -> all-reduce(x)` over the folded replica groups.

    Guards: the inner all-reduce has no other user, both have one operand, equal keys but
    for the groups (`all_reduce_key`), explicit groups, and the groups fold."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-reduce",)

    ctx: RewriteContext
    channels: ChannelIds

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES or len(op.operands) != 1:
            return
        ar0 = owner(op.operands[0])
        if ar0 is None or ar0.opcode != "all-reduce" or len(unique_users(ar0.result)) != 1:
            return
        key0, key1 = all_reduce_key(ar0, True), all_reduce_key(op, True)
        if key0 is None or key0 != key1:
            return
        g0, g1 = explicit_groups(ar0), explicit_groups(op)
        folded = fold_groups(g0, g1) if g0 and g1 else None
        if folded is None:
            return
        attrs: dict = {"replica_groups": groups_text(folded), "to_apply": ar0.attr("to_apply")}
        if ar0.attr("channel_id") is not None:
            attrs["channel_id"] = self.channels.take()
        if ar0.attr("use_global_device_ids"):
            attrs["use_global_device_ids"] = True
        new = new_op(rewriter, self.ctx, "all-reduce", list(ar0.operands), ar0.shape, attrs,
                     like=ar0, before=op)  # fmt: skip
        merged = merged_frontend_attributes([ar0, op])
        k0, k1 = frontend_attributes(ar0).get(GROUP_KEY), frontend_attributes(op).get(GROUP_KEY)
        # folding a chain combines no buffers: keep a key only when it is unambiguous
        merged.pop(GROUP_KEY, None)
        key = k1 if k0 is None else k0 if k1 is None or k0 == k1 else None
        if key is not None:
            merged[GROUP_KEY] = key
        set_frontend_attributes(new, dict(sorted(merged.items())))
        self.ctx.note(self, op, f"groups {str(attrs['replica_groups'])}")
        rewriter.replace_all_uses_with(op.result, new.result)
        rewriter.erase(op)
        rewriter.erase(ar0)


@dataclass(frozen=True)
class AllReduceFolderPass(HloModulePass):
    """Fold an all-reduce of an all-reduce into one all-reduce over the union of groups."""

    name: ClassVar[str] = "all-reduce-folder"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        if layout_constrained(module, ("all-reduce",)):
            return False  # as XLA: layout-constrained all-reduces pin the module
        rctx = RewriteContext.of(module, trace)
        return run_patterns(module, [FoldAllReduceOfAllReduce(rctx, ChannelIds.of(module))])
