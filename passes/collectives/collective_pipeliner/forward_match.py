"""Which collectives of a while body `collective-pipeliner` can push to the next
iteration (XLA's `CheckStoreIntoSliceIsCompatible`, `IsSupportedDynamicUpdateSlice` and the
forward half of `CollectCollectivesToMove`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.opcode_sets import with_trait
from hlopass.ir.shape import ArrayShape
from hlopass.passes.collectives.all_reduce_folder import has_control_deps, unique_users
from hlopass.rewriting import has_side_effect, is_hlo, owner

from .analysis import Loop, gte_index, is_monotonic, parameter, scalar_int

INSERTED = "InsertedByPreviousStep"
"""XLA's `kInsertedByPreviousStep`: the custom-call marking a value a previous run made."""
SUNK = "SunkByPreviousStep"
FORMATTING = frozenset((
    "slice", "dynamic-slice", "pad", "collective-permute", "convert", "reshape",
    "all-reduce", "transpose", "broadcast", "all-gather", "reduce", "get-tuple-element",
    "concatenate", "reduce-scatter", "bitcast",
))  # fmt: skip
"""The formatting ops XLA lets sit between the collective and its dynamic-update-slice."""
ELEMENTWISE = frozenset(with_trait("elementwise"))


@dataclass
class Move:
    """One collective to pipeline (XLA's `WhileMoveInfo`, forward): its formatting ops in
    body order (`chain`: those reached from the collective; the rest are their simple
    dependencies), the dynamic-update-slice, its sliced dimension and root index."""

    collective: HloOp
    formatting: list[HloOp]
    chain: set[HloOp]
    dus: HloOp
    sliced: int
    output: int
    reuse: bool = True
    """XLA's `reuse_pipelined_op_buffer` for this collective."""
    index: SSAValue = field(init=False)
    """The store's index at the sliced dimension (kept: the rewrite erases the store)."""

    def __post_init__(self) -> None:
        self.index = self.dus.operands[2 + self.sliced]

    @property
    def carried(self) -> list[SSAValue]:
        """The values its formatting ops read from outside them (after merges too)."""
        return carried_values(self.collective, self.formatting)

    @property
    def special(self) -> bool:
        """XLA's `moves_requiring_special_output`: the stored value's shape is not the
        collective operand's, so the operand travels in a tuple element of its own."""
        stored = self.formatting[-1] if self.formatting else self.collective
        want = self.collective.operands[0].type.data  # type: ignore[attr-defined]
        return not self.reuse or stored.shape != want


def custom_call_level(v: SSAValue) -> int | None:
    """XLA's `GetLevelFromCustomCall`."""
    op = owner(v)
    if op is None or op.opcode != "custom-call" or op.attr("custom_call_target") != INSERTED:
        return None
    return scalar_int(op.operands[1]) if len(op.operands) > 1 else None


def _elements(shape: object) -> int:
    if not isinstance(shape, ArrayShape):
        return 0
    n = 1
    for d in shape.dims:
        n *= d
    return n


def _acceptable(i: HloOp, instr: HloOp, use_tree: bool) -> bool:
    if has_control_deps(i):
        return False
    if i.opcode == "reduce" and isinstance(i.shape, ArrayShape):
        n = _elements(instr.operands[0].type.data)  # type: ignore[attr-defined]
        if _elements(i.shape) == n or n < 1024:
            return True
    if i.opcode in FORMATTING or (use_tree and i.opcode in ELEMENTWISE):
        return True
    return i.opcode == "custom-call" and (
        not has_side_effect(i) or i.attr("custom_call_target") in (INSERTED, SUNK)
    )


def _final(i: HloOp, body: ComputationOp, level: int) -> bool:
    """XLA's `is_final_slice_insertion` (no token sinks)."""
    users = unique_users(i.result)
    if i.opcode != "dynamic-update-slice" or len(users) != 1:
        return False
    if level == 0:
        return users[0] is body.root
    return any(custom_call_level(v) == level for v in i.operands[2:])


def _simple_deps(i: HloOp, deps: list[HloOp], seen: set[HloOp]) -> bool:
    """XLA's `CollectSimpleDependencies`: a dynamic-slice's index computations (refused when
    they read a parameter or a side effect), a broadcast operand (and its constant)."""
    if i.opcode == "dynamic-slice":
        stack = list(i.operands[1:])
        order: list[HloOp] = []
        while stack:
            v = stack.pop()
            op = owner(v)
            if op is None or op.opcode == "parameter" or has_side_effect(op):
                return False
            if op not in order:
                order.append(op)
                stack.extend(op.operands)
        deps.extend(reversed(order))
        return True
    for v in i.operands:
        b = owner(v)
        if b is not None and b.opcode == "broadcast" and b not in seen:
            seen.add(b)
            c = owner(b.operands[0])
            if c is not None and c.opcode == "constant" and c not in seen:
                seen.add(c)
                deps.append(c)
            deps.append(b)
    return True


def store_into_slice(
    instr: HloOp, body: ComputationOp, level: int, use_tree: bool
) -> tuple[HloOp, list[HloOp], set[HloOp]] | None:
    """XLA's `CheckStoreIntoSliceIsCompatible` (forward): the one dynamic-update-slice the
    collective's value reaches through acceptable formatting ops, and those ops."""
    if (not use_tree and len(unique_users(instr.result)) != 1) or len(instr.operands) != 1:
        return None
    if has_control_deps(instr):
        return None
    final: HloOp | None = None
    chain: list[HloOp] = []
    stack: list[HloOp] = [instr]
    while stack:
        inst = stack.pop()
        for user in unique_users(inst.result):
            if not is_hlo(user):
                return None
            if _final(user, body, level):
                if user.operands[1] is not inst.result:
                    return None
                if final is not None and final is not user:
                    return None
                final = user
                continue
            if not _acceptable(user, instr, use_tree):
                return None
            if user not in chain:
                chain.append(user)
                stack.append(user)
    if final is None:
        return None
    formatting: list[HloOp] = []
    seen: set[HloOp] = set()
    for op in chain:
        if not _simple_deps(op, formatting, seen):
            return None
        if op not in seen:
            seen.add(op)
            formatting.append(op)
    return final, formatting, set(chain)


def sliced_dimension(dus: HloOp) -> int | None:
    """XLA's `GetSlicedDimension`: the one non-constant index; the others constant 0."""
    sliced = None
    for k, v in enumerate(dus.operands[2:]):
        c = owner(v)
        if c is None or c.opcode != "constant":
            if sliced is not None:
                return None
            sliced = k
        elif scalar_int(v) != 0:
            return None
    return sliced


def carried_values(instr: HloOp, formatting: list[HloOp]) -> list[SSAValue]:
    """XLA's `CollectDependenciesToPipeline`: operands of the formatting ops made outside
    them (they travel to the next iteration in tuple elements of their own)."""
    inside = {op.result for op in formatting} | {instr.result}
    out: list[SSAValue] = []
    for op in formatting:
        for v in op.operands:
            if v not in inside and v not in out:
                out.append(v)
    return out


def output_index(dus: HloOp, root: HloOp) -> int | None:
    """XLA's `FindOutputIndexForDynamicUpdateSlice`."""
    op: Operation = dus
    while is_hlo(op) and op.opcode == "dynamic-update-slice":
        users = unique_users(op.results[0])
        if len(users) != 1:
            return None
        if users[0] is root:
            hits = [k for k, v in enumerate(root.operands) if v is op.results[0]]
            return hits[0] if len(hits) == 1 else None
        op = users[0]
    return None


@dataclass(frozen=True)
class Matcher:
    """The options `supported` reads (XLA's `Config` fields)."""

    level: int
    use_tree: bool
    different_sized: bool
    should_process: Callable[[HloOp], bool]

    def supported(self, instr: HloOp, body: ComputationOp, loop: Loop,
                  gte_count: dict[int, int], order: dict[HloOp, int]) -> Move | None:  # fmt: skip
        """XLA's `IsSupportedDynamicUpdateSlice` (forward) on the store
        `store_into_slice` finds: the move, or None."""
        found = store_into_slice(instr, body, self.level, self.use_tree)
        if found is None:
            return None
        dus, formatting, chain = found
        formatting.sort(key=order.__getitem__)
        sliced = sliced_dimension(dus)
        if sliced is None:
            return None
        operand_shape = instr.operands[0].type.data  # type: ignore[attr-defined]
        if not self.different_sized:
            last = formatting[-1].shape if formatting else instr.shape
            if operand_shape != last:
                return None
            deps = carried_values(instr, formatting)
            if any(_elements(v.type.data) == 1 for v in deps):  # type: ignore[attr-defined]
                return None
        buffer = dus.operands[0]
        if self.level == 0 and not self._level0(buffer, dus, sliced, body, loop, gte_count):
            return None
        out = output_index(dus, body.root)
        if out is None:
            return None
        return Move(instr, formatting, chain, dus, sliced, out)

    @staticmethod
    def _level0(buffer: SSAValue, dus: HloOp, sliced: int, body: ComputationOp, loop: Loop,
                gte_count: dict[int, int]) -> bool:  # fmt: skip
        index = gte_index(buffer)
        param = parameter(body)
        if index is None or param is None or owner(owner(buffer).operands[0]) is not param:  # type: ignore[union-attr]
            return False
        if gte_count.get(index, 0) != 1:
            return False
        # XLA's `CheckParameterUsageIsCompatible`: the buffer feeds only this store
        if any(u is not dus for u in unique_users(buffer)):
            return False
        return is_monotonic(dus.operands[2 + sliced], loop)
