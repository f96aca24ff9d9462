"""Which dots `dot-merger` merges: operand sources, equivalence classes, XLA's choice of
a group within a class (sizes, cost estimate, no path between members)."""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ELEMENT_BITS, ArrayShape, byte_size

from .atoms import Atoms, operand_categories, source_categories, trace_atoms

FLOPS_PER_BYTE = 290.0
"""XLA's kFlopsPerByte: flops that take as long as writing one byte to HBM."""
MAX_NON_CONTRACTING_RATIO = 20
"""XLA's kMaxNonContractingRatio: merged dots' non-contracting sizes differ at most this much."""
MIN_SAVINGS_RATIO = 1e-5
"""XLA's kMinSavingsRatio: a smaller estimated saving is not worth a merge."""


def _dims(value: SSAValue) -> tuple[int, ...]:
    return value.type.data.dims  # type: ignore[attr-defined]


def _non_unit(dims: tuple[int, ...]) -> list[int]:
    return [d for d, n in enumerate(dims) if n != 1]


def trace_source(dot: HloOp, side: int) -> tuple[SSAValue, tuple[int | None, ...]]:
    """The concatenated operand's source (followed back through transposes and through reshapes that
    only add or drop size-1 dims) and, per operand dim, the source dim it is (None for a
    size-1 dim that has none)."""
    value = dot.operands[side]
    dims = _dims(value)
    mapping: list[int | None] = [d if n != 1 else None for d, n in enumerate(dims)]
    while isinstance(op := value.owner, HloOp) and op.opcode in ("transpose", "reshape"):
        src = op.operands[0]
        if op.opcode == "transpose":
            perm = op.attr("dimensions")
            step = {d: perm[d] for d in range(len(perm))}
        else:
            out_keep, in_keep = _non_unit(_dims(value)), _non_unit(_dims(src))
            if [_dims(value)[d] for d in out_keep] != [_dims(src)[d] for d in in_keep]:
                break  # regroups dims: the source stays here
            step = dict(zip(out_keep, in_keep, strict=True))
        mapping = [None if m is None else step.get(m) for m in mapping]
        value = src
    return value, tuple(mapping)


@dataclass
class Usage:
    """One dot seen with one of its operands as the shared one (XLA's DotOperandUsage)."""

    dot: HloOp
    side: int
    atoms: Atoms
    """The shared operand followed back to its source."""
    concat_source: SSAValue
    concat_map: tuple[int | None, ...]
    uid: int
    nc_size: int = field(init=False)
    tz: int = field(init=False)

    @property
    def source(self) -> SSAValue:
        return self.atoms.source

    def __post_init__(self) -> None:
        o = self.dot.operands[1 - self.side]
        key = "lhs" if self.side == 1 else "rhs"
        paired = set(self.dot.attr(f"{key}_batch_dims") or ()) | set(
            self.dot.attr(f"{key}_contracting_dims") or ()
        )
        self.nc_size = 1
        for j, n in enumerate(_dims(o)):
            if j not in paired:
                self.nc_size *= n
        self.tz = (self.nc_size & -self.nc_size).bit_length() - 1 if self.nc_size else 64


def categories(u: Usage) -> list[str]:
    """Categories (B, N, C) of the non-size-1 dims of the shared operand's source."""
    return source_categories(u.atoms, operand_categories(u.dot, u.side))


_CATEGORY_ORDER = {"B": 0, "N": 1, "C": 2}
"""XLA's DotOperandDims::Category numbering (classes are visited in its order)."""


def equivalence_key(u: Usage, uid: dict) -> tuple:
    """XLA's EquivalenceKey: dots with equal keys may merge. Its order is XLA's: source's
    id first, then queue id, categories, the three element types, precision config."""
    dot = u.dot
    et = [dot.operands[k].type.data.element_type for k in (u.side, 1 - u.side)]  # type: ignore[attr-defined]
    precision = (dot.attr("operand_precision"), str(dot.attr("algorithm")))
    src = u.source.owner
    cats = tuple(_CATEGORY_ORDER[c] for c in categories(u))
    return (u.source, uid.get(src, -1), queue_id(dot), cats, *et,
            dot.shape.element_type, str(precision))  # type: ignore[attr-defined]  # fmt: skip


def queue_id(dot: HloOp) -> int:
    """XLA's GPU queue id: `operation_queue_id` of the dot's backend config (0 without)."""
    text = str(dot.attr("backend_config") or "")
    at = text.find('"operation_queue_id":')
    if at < 0:
        return 0
    digits = text[at + len('"operation_queue_id":') :].lstrip(' "')
    n = len(digits) - len(digits.lstrip("0123456789"))
    return int(digits[:n]) if n else 0


def _sub_byte_upcast(value: SSAValue) -> bool:
    """XLA's HasSubByteUpcast: a sub-byte value converted up, under transposes/reshapes."""
    op = value.owner
    while isinstance(op, HloOp) and op.opcode in ("transpose", "reshape", "bitcast", "convert"):
        src = op.operands[0]
        et = src.type.data.element_type  # type: ignore[attr-defined]
        if op.opcode == "convert" and et != "pred" and 0 < ELEMENT_BITS.get(et, 8) < 8:
            return True
        op = src.owner
    return False


def is_candidate(op: HloOp, pinned: frozenset[str]) -> bool:
    if op.opcode != "dot" or op.attr("control-predecessors") or op.inst_name in pinned:
        return False
    shapes = [op.shape, *(v.type.data for v in op.operands)]  # type: ignore[attr-defined]
    if not all(isinstance(s, ArrayShape) and not s.is_dynamic for s in shapes):
        return False
    return not any(_sub_byte_upcast(v) for v in op.operands)


def equivalence_classes(ops: list[HloOp], pinned: frozenset[str]) -> list[list[Usage]]:
    """XLA's BuildEquivalenceClasses: the classes of two or more dots, in XLA's order of
    keys, each by ascending non-contracting size (then position). Every candidate dot is
    in two classes, one per operand taken as the shared one."""
    uid = {o: i for i, o in enumerate(ops)}
    classes: dict[tuple, list[Usage]] = {}
    for dot in ops:
        if not is_candidate(dot, pinned):
            continue
        concat = [trace_source(dot, 0), trace_source(dot, 1)]
        for side in (0, 1):
            u = Usage(dot, side, trace_atoms(dot, side), *concat[1 - side], uid[dot])
            classes.setdefault(equivalence_key(u, uid), []).append(u)
    keys = sorted((k for k, v in classes.items() if len(v) > 1), key=lambda k: k[1:])
    return [sorted(classes[k], key=lambda u: (u.nc_size, u.uid)) for k in keys]


class Reachability:
    """Paths between instructions of one computation (operand and control edges), with
    merged dots standing for one node (XLA's GraphCycles after UpdateGraphForMergedDot).

    `order` is a topological order (operands and control predecessors first): a search
    for `b` skips what comes after both `b` and every merged dot, as from there on the
    edges only lead further on."""

    def __init__(self, order: list[HloOp]) -> None:
        by_name = {o.inst_name: o for o in order}
        self.pos = {o: i for i, o in enumerate(order)}
        self.succ: dict[HloOp, list[HloOp]] = {o: [] for o in order}
        for o in order:
            for v in o.operands:
                if v.owner in self.succ:
                    self.succ[v.owner].append(o)  # type: ignore[index]
            for name in o.attr("control-predecessors") or ():
                if name in by_name:
                    self.succ[by_name[name]].append(o)
        self.group: dict[HloOp, list[HloOp]] = {}
        self.last_merged = -1

    def merge(self, dots: list[HloOp]) -> None:
        members = [m for d in dots for m in self.group.get(d, [d])]
        for m in members:
            self.group[m] = members
            self.last_merged = max(self.last_merged, self.pos[m])

    def reaches(self, a: HloOp, b: HloOp) -> bool:
        limit = max(self.pos[b], self.last_merged)
        seen = {a}
        stack = [a]
        while stack:
            x = stack.pop()
            # a merged dot's node has every member's users (not the other members)
            for m in self.group.get(x, [x]):
                for y in self.succ.get(m, ()):
                    if y is b:
                        return True
                    if y not in seen and self.pos[y] <= limit:
                        seen.add(y)
                        stack.append(y)
        return False

    def connected(self, a: HloOp, b: HloOp) -> bool:
        return self.reaches(a, b) or self.reaches(b, a)


def _sizes(u: Usage) -> tuple[int, int, int]:
    """(batch, non-contracting, contracting) element counts of the shared operand."""
    key = "lhs" if u.side == 0 else "rhs"
    batch = u.dot.attr(f"{key}_batch_dims") or ()
    contracting = u.dot.attr(f"{key}_contracting_dims") or ()
    b = n = c = 1
    for i, size in enumerate(_dims(u.dot.operands[u.side])):
        if i in batch:
            b *= size
        elif i in contracting:
            c *= size
        else:
            n *= size
    return b, n, c


def find_dots_to_merge(dots: list[Usage], reach: Reachability, max_size: int) -> list[Usage]:
    """XLA's FindDotsToMerge: from each seed (ascending non-contracting size) add the next
    dots while within `max_size` bytes and 20x the seed's size, not connected to a chosen
    one and worth it by XLA's estimate; the first group of two or more, its order by
    trailing zero bits, size (both descending), then position."""
    first = dots[0]
    batch, shared_nc, contracting = _sizes(first)
    shared = first.dot.operands[first.side]
    concat = first.dot.operands[1 - first.side]
    shared_bytes = _elements(shared) * byte_size(shared.type.data.element_type)  # type: ignore[attr-defined]
    per_nc = batch * (
        contracting * byte_size(concat.type.data.element_type)  # type: ignore[attr-defined]
        + shared_nc * byte_size(first.dot.shape.element_type)  # type: ignore[attr-defined]
    )
    cost_per_nc = 2.0 * batch * shared_nc * contracting / FLOPS_PER_BYTE + per_nc
    for i, seed in enumerate(dots):
        group = [seed]
        total = seed.nc_size
        limit = total * MAX_NON_CONTRACTING_RATIO
        for cand in dots[i + 1 :]:
            if per_nc * total > max_size or cand.nc_size > limit:
                break
            if any(m.dot is cand.dot or reach.connected(m.dot, cand.dot) for m in group):
                continue  # (a dot whose two operands trace to one source is in its class twice)
            runtime = cost_per_nc * (total + cand.nc_size) + (len(group) + 1) * shared_bytes
            if shared_bytes * len(group) / runtime <= MIN_SAVINGS_RATIO:
                continue
            group.append(cand)
            total += cand.nc_size
        if len(group) >= 2:
            return sorted(group, key=lambda u: (-u.tz, -u.nc_size, u.uid))
    return []


def _elements(value: SSAValue) -> int:
    n = 1
    for d in _dims(value):
        n *= d
    return n
