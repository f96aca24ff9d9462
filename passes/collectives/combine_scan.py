"""XLA's `CombineInstructionsByKey` (`collective_combiner_utils.h`), linear in practice.

In post order, the first keyed instruction opens a group; instructions of its key join
until one depends on the group (through operands or control predecessors, transitively)
or a threshold is reached; the group, when it has two or more members, is handed to the
combining function, and the post order is patched where it combined; then the next group.

XLA rebuilds the post order and the reachability map after every group. Here the post
order is taken once (`_Order`: patched per group inside the group's span only, positions
spaced so that a patch renumbers only that span), and a group's reachability is searched
forward from its members through their users in post order, stopping at the candidate
being asked about (`_Scan`): the instructions looked at are the members' descendants
inside the span, not the span. Only instructions that can join a group are keyed at all
(one operand, within the byte threshold, a key shared with another such instruction):
XLA passes over the others without effect on any group.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Hashable
from heapq import heappop, heappush

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ArrayShape, Shape
from hlopass.text.exporter import instruction_post_order

KeyFn = Callable[[HloOp], Hashable | None]
CombineFn = Callable[[list[HloOp]], list[HloOp]]
"""Combines a group; returns the instructions it created, each after its operands."""

GAP = 1 << 16
"""The spacing of fresh positions: a patch re-spreads its span's positions between its
neighbours', and renumbers the whole order only when they run out of room."""


def array_bytes(shape: Shape) -> int:
    return shape.byte_size() if isinstance(shape, ArrayShape) else 0


def combine_by_key(comp: ComputationOp, key_fn: KeyFn, combine: CombineFn,
                   threshold_bytes: int, threshold_count: int,
                   opcodes: Collection[str] | None = None) -> bool:  # fmt: skip
    """XLA's `CombineInstructionsByKey` on one computation; whether anything combined.
    `opcodes`, when given, are the only opcodes `key_fn` may key. The block ends in the
    patched post order (XLA prints in post order too)."""
    sizes: dict[HloOp, int] = {}
    keys = joinable_keys(comp, key_fn, threshold_bytes, opcodes, sizes)
    if not keys:
        return False
    plan = _Order(instruction_post_order(comp))
    left = Counter(keys.values())
    start = 0
    changed = False
    while keys:
        scan = _Scan(keys, left, sizes, plan, threshold_bytes, threshold_count)
        scan.run(start)
        start = scan.first
        if not scan.group:
            break  # (never: the first keyed instruction can always open a group)
        if len(scan.group) > 1:
            plan.splice(scan.first, scan.last, scan.reached, scan.group, combine(scan.group))
            changed = True
    if changed:
        reorder_block(comp, plan.order)
    return changed


def joinable_keys(comp: ComputationOp, key_fn: KeyFn, threshold_bytes: int,
                  opcodes: Collection[str] | None,
                  sizes: dict[HloOp, int]) -> dict[HloOp, Hashable]:  # fmt: skip
    """The keys of the instructions that may join a group: keyed, one operand (XLA
    combines only those), each within the byte threshold, the key shared with another
    such instruction; their byte sizes go into `sizes`."""
    keys: dict[HloOp, Hashable] = {}
    for op in comp.instructions:
        if opcodes is not None and op.OPCODE not in opcodes:
            continue
        k = key_fn(op)
        if k is None or len(op.operands) != 1:
            continue
        size = array_bytes(op.shape)
        if size <= threshold_bytes:
            keys[op] = k
            sizes[op] = size
    count = Counter(keys.values())
    return {op: k for op, k in keys.items() if count[k] > 1}


class _Order:
    """The post order being patched, and each instruction's position: increasing along
    the order, not contiguous (see `GAP`)."""

    def __init__(self, order: list[HloOp]) -> None:
        self.order = order
        self.pos: dict[HloOp, int] = {}
        self._renumber()
        self.waiters = [op for op in order if "control-predecessors" in op.properties]
        """The instructions with control predecessors."""

    def _renumber(self) -> None:
        self.pos = {op: (i + 1) * GAP for i, op in enumerate(self.order)}

    def splice(self, first: int, last: int, reached: set[HloOp], group: list[HloOp],
               created: list[HloOp]) -> None:  # fmt: skip
        """Replace `group` by `created`, which goes where the last member (at `last`)
        stood; what depends on an earlier member (`reached`) and stood from `first` on
        moves after it, in order (nothing else depends on those, nor the last member on
        them)."""
        order, pos = self.order, self.pos
        segment = order[first : last + 1]
        members = set(group)
        stay = [op for op in segment if op not in reached]
        move = [op for op in segment if op in reached and op not in members]
        new = stay + created + move
        order[first : last + 1] = new
        for op in group:
            del pos[op]
        if self.waiters or any("control-predecessors" in op.properties for op in created):
            # combining relays the members' control edges to the combined instruction
            self.waiters = [op for op in self.waiters if op not in members] + [
                op for op in created if "control-predecessors" in op.properties
            ]
        lo = pos[order[first - 1]] if first else 0
        end = first + len(new)
        hi = pos[order[end]] if end < len(order) else lo + (len(new) + 1) * GAP
        step = (hi - lo) // (len(new) + 1)
        if step < 1:
            self._renumber()
            return
        for j, op in enumerate(new):
            pos[op] = lo + (j + 1) * step


class _Scan:
    """One pass of XLA's loop over the post order: the group of the first keyed
    instruction from `start`. Taken instructions leave `keys`. `reached` holds the
    members and, found from them forward through users in position order (a heap), their
    descendants up to the last candidate asked about."""

    def __init__(self, keys: dict[HloOp, Hashable], left: Counter[Hashable],
                 sizes: dict[HloOp, int], plan: _Order, threshold_bytes: int,
                 threshold_count: int) -> None:  # fmt: skip
        self.keys, self.left, self.sizes, self.plan = keys, left, sizes, plan
        self.threshold_bytes, self.threshold_count = threshold_bytes, threshold_count
        self.group: list[HloOp] = []
        self.first = 0
        """Index of the first keyed instruction seen."""
        self.last = 0
        """Index of the last instruction taken."""
        self.reached: set[HloOp] = set()
        self._pending: list[tuple[int, int, HloOp]] = []
        self._pushed: set[HloOp] = set()
        self._waiters = control_successors(plan.waiters)

    def run(self, start: int) -> None:
        order, keys, group = self.plan.order, self.keys, self.group
        key: Hashable = None
        ahead = 0  # instructions of `key` not yet passed
        total = 0
        for i in range(start, len(order)):
            op = order[i]
            k = keys.get(op)
            if k is None:
                continue
            if key is None:
                self.first = i
                key, ahead = k, self.left[k]
            elif k != key:
                continue
            ahead -= 1
            size = self.sizes[op]
            if total + size > self.threshold_bytes or self._depends(op):
                return
            group.append(op)
            total += size
            self.left[keys.pop(op)] -= 1
            self.last = i
            self._reach(op)
            if len(group) >= self.threshold_count or ahead == 0:
                return  # full, or no instruction of this key further on

    def _depends(self, op: HloOp) -> bool:
        """Whether `op` depends on a member: the descendants standing before it are
        found first."""
        pending, pos = self._pending, self.plan.pos
        bound = pos[op]
        while pending and pending[0][0] <= bound:
            self._reach(heappop(pending)[2])
        return op in self.reached

    def _reach(self, op: HloOp) -> None:
        self.reached.add(op)
        pos, pushed, pending = self.plan.pos, self._pushed, self._pending
        users = [use.operation for r in op.results for use in r.uses]
        users += self._waiters.get(op.inst_name, ())
        for user in users:
            p = pos.get(user)  # type: ignore[arg-type]
            if p is not None and user not in pushed:
                pushed.add(user)  # type: ignore[arg-type]
                heappush(pending, (p, id(user), user))  # type: ignore[arg-type]


def control_successors(waiters: list[HloOp]) -> dict[str, list[HloOp]]:
    """For each instruction name, the `waiters` that wait for it (control edges change
    when a group combines, so each scan reads them afresh)."""
    out: dict[str, list[HloOp]] = {}
    for op in waiters:
        for p in op.attr("control-predecessors") or ():
            out.setdefault(p, []).append(op)
    return out


def reorder_block(comp: ComputationOp, order: list[HloOp]) -> None:
    """Put `comp`'s instructions in `order` (the terminator stays last), moving only those
    off the longest run already in that order."""
    block = comp.body.block
    index = {op: i for i, op in enumerate(order)}
    now = [index[op] for op in block.ops if op in index]  # type: ignore[index, operator]
    keep = longest_increasing(now)
    for i in now:
        if i not in keep:
            order[i].detach()
    anchor = block.last_op
    for i in range(len(order) - 1, -1, -1):
        op = order[i]
        if i not in keep:
            block.insert_op_before(op, anchor)  # type: ignore[arg-type]
        anchor = op


def longest_increasing(seq: list[int]) -> set[int]:
    """The values of a longest increasing subsequence of `seq` (distinct values)."""
    tails: list[int] = []  # the smallest last value of a run of each length
    tail_at: list[int] = []  # its index in seq
    back = [-1] * len(seq)
    for j, v in enumerate(seq):
        n = bisect_left(tails, v)
        back[j] = tail_at[n - 1] if n else -1
        if n == len(tails):
            tails.append(v)
            tail_at.append(j)
        else:
            tails[n] = v
            tail_at[n] = j
    out: set[int] = set()
    j = tail_at[-1] if tail_at else -1
    while j >= 0:
        out.add(seq[j])
        j = back[j]
    return out
