"""The rewrite driver of the core passes: a worklist walk over one computation that starts
from the instructions that may rewrite and confirms its fixed point around what changed.

xDSL's `PatternRewriteWalker` offers every instruction to the patterns, then, after any
change, walks the whole computation again until a walk changes nothing: on Mixtral's
28,800-instruction entry computation the confirming walk costs as much as the first, and
a fixpoint round that changed a few hundred instructions walks the whole entry again in
every pass. This driver keeps the walker's worklist discipline (instructions in program
order, new and modified ones and the users of replaced ones revisited at once, erased
ones dropped) and differs in two places:

* it can start from `seeds`, the instructions something changed since the pass last left
  the computation at its fixed point (the fixpoint pipeline's per-instruction dirty
  tracking, `hlopass.driver.dirty`), instead of from every instruction;
* its confirming walk visits only what the previous walk's touches left `stale`: what a
  touch reached after that instruction's visit, not the whole computation.

Both rest on one property of the patterns: whether a pattern rewrites an instruction
depends on nothing farther than `radius` uses from what changed, and on its operands'
user counts (see `stale`). Passes whose patterns read farther (whole-computation facts)
report the computation as changed as a whole instead. The `exhaustive` switch
(`fixpoint{exhaustive=true}`) turns both shortcuts off: the walks are then the whole
computation's, as xDSL's walker does; `tests/test_worklist.py` checks that both give the
same module on every corpus module, `benchmarks/fixpoint_bench.py --compare` on the LLMs.

Every walk also notes what it touched (created, modified, erased or its operands, values
whose uses changed): the fixpoint hands that to the other passes as their seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import op_list

try:  # xDSL's implicit builder (`insert` leaves it to xDSL's path when one is active)
    from xdsl.builder import _current_builder  # pyright: ignore[reportPrivateUsage]
except ImportError:  # (an xDSL without it: every insert takes xDSL's path)
    _current_builder = None

DEFAULT_RADIUS = 3
"""How many uses away from a change a pattern's decision may look (operand chains such
as `multiply(broadcast(constant))`, `reshape(reshape(x))`, `maximum(minimum(x, hi), lo)`):
the confirming walk revisits the users of what changed up to this depth."""


class Touches:
    """Instructions something changed: `content` (created, operands or attributes
    changed) and `uses` (only their users changed: a user came or went)."""

    __slots__ = ("content", "uses")

    def __init__(self, content: Iterable[Operation] = (), uses: Iterable[Operation] = ()):
        self.content: set[Operation] = set(content)
        self.uses: set[Operation] = set(uses)

    def update(self, other: Touches) -> None:
        self.content |= other.content
        self.uses |= other.uses

    def copy(self) -> Touches:
        return Touches(self.content, self.uses)


class Journal:
    """What one walk touched (`content`, `uses`: each instruction with the walk's clock,
    its visits so far, at its latest touch), and when each instruction was last visited."""

    __slots__ = ("clock", "content", "uses", "visited")

    def __init__(self) -> None:
        self.clock = 0
        self.content: dict[Operation, int] = {}
        self.uses: dict[Operation, int] = {}
        self.visited: dict[int, int] = {}
        """Instruction `id` -> clock of its latest visit."""

    def touch(self, op: Operation) -> None:
        self.content[op] = self.clock

    def touch_uses(self, value: SSAValue) -> None:
        o = value.owner
        if isinstance(o, Operation):
            self.uses[o] = self.clock

    def touches(self) -> Touches:
        return Touches(self.content, self.uses)


class TrackingRewriter(PatternRewriter):
    """A `PatternRewriter` that also notes, in its `journal`, the defining instructions of
    values whose uses it changed (the value replaced keeps none, the replacement gains
    some): their users' count is something patterns read ("has one user")."""

    journal: Journal
    _point: InsertPoint | None = None
    visits = 0
    """How many visits this rewriter has been readied for: what a pattern computes once
    per visit (algsimp's float guard) is kept under this count."""

    @property
    def insertion_point(self) -> InsertPoint:  # pyright: ignore[reportIncompatibleVariableOverride]
        """Before the instruction visited (`visit`), made when first asked for: most
        visits rewrite nothing and never ask."""
        if self._point is None:
            assert self._current_operation is not None
            self._point = InsertPoint.before(self._current_operation)
        return self._point

    @insertion_point.setter
    def insertion_point(self, point: InsertPoint) -> None:
        self._point = point

    def replace_all_uses_with(
        self, from_value: SSAValue, to_value: SSAValue | None, safe_erase: bool = True
    ) -> None:
        journal = self.journal
        journal.touch_uses(from_value)
        if to_value is None or to_value is from_value:
            super().replace_all_uses_with(from_value, to_value, safe_erase)
            return
        journal.touch_uses(to_value)
        # xDSL's steps (each use moved in use-list order, the name hint carried over, the
        # users reported as modified) over the use list itself: its version builds the
        # list of users and a tuple of uses through generator calls, once per rewrite
        users: list[Operation] = []
        use = from_value.first_use
        while use is not None:
            following = use._next_use  # pyright: ignore[reportPrivateUsage]  # (the move relinks it)
            user = use._operation  # pyright: ignore[reportPrivateUsage]
            users.append(user)
            user.operands[use._index] = to_value  # pyright: ignore[reportPrivateUsage]
            use = following
        if to_value.name_hint is None and from_value.name_hint is not None:
            to_value.name_hint = from_value.name_hint
        if users:
            self.has_done_action = True
            handlers = self.operation_modification_handler
            for user in users:
                for handler in handlers:
                    handler(user)

    def insert(self, op: Any, insertion_point: InsertPoint | None = None) -> Any:
        """xDSL's `insert` of one new op without regions before an instruction (what the
        passes build): linked in, reported to the insertion handlers, without the
        `InsertPoint` the visit would otherwise make, the ancestor walk (an op without
        regions holds no block) and two ABC `isinstance` tests. Anything else (a list of
        ops, the end of a block, a name hint, an implicit builder) takes xDSL's path."""
        if insertion_point is None:
            point = self._point
            before = self._current_operation if point is None else point.insert_before
        else:
            before = insertion_point.insert_before
        if (
            before is None
            or before.parent is None
            or type(op) in (list, tuple)
            or op.parent is not None
            or op.regions
            or self._name_hint is not None
            or _current_builder is None
            or _current_builder.builder is not None
        ):
            return super().insert(op, insertion_point)
        block = before.parent
        if insertion_point is not None and insertion_point.block is not block:
            return super().insert(op, insertion_point)  # (xDSL reports the bad point)
        self.has_done_action = True
        op.parent = block  # (`Block.insert_op_before`)
        prev_op = before._prev_op  # pyright: ignore[reportPrivateUsage]
        if prev_op is not None:
            prev_op._next_op = op  # pyright: ignore[reportPrivateUsage]
        else:
            block._first_op = op  # pyright: ignore[reportPrivateUsage]
        op._prev_op = prev_op
        op._next_op = before
        before._prev_op = op  # pyright: ignore[reportPrivateUsage]
        for handler in self.operation_insertion_handler:
            handler(op)
        return op

    def erase(self, op: Operation, safe_erase: bool = True) -> None:
        """xDSL's `erase` (the removal reported, the op unlinked from its block, its
        operands' uses dropped), without building its result's `ErasedSSAValue` when no
        use is left to point at it, nor the generic checks of `Block.detach_op`. An op
        with regions, successors or a used result takes xDSL's own path."""
        if (
            op.parent is None
            or op.regions
            or op._successors  # pyright: ignore[reportPrivateUsage]
            or any(r.first_use is not None for r in op.results)
        ):
            super().erase(op, safe_erase)
            return
        self.has_done_action = True
        for handler in self.operation_removal_handler:
            handler(op)
        block = op.parent
        assert block is not None
        op.parent = None  # (`Block.detach_op`)
        prev_op = op._prev_op  # pyright: ignore[reportPrivateUsage]
        next_op = op._next_op  # pyright: ignore[reportPrivateUsage]
        if prev_op is not None:
            prev_op._next_op = next_op  # pyright: ignore[reportPrivateUsage]
            op._prev_op = None  # pyright: ignore[reportPrivateUsage]
        else:
            block._first_op = next_op  # pyright: ignore[reportPrivateUsage]
        if next_op is not None:
            next_op._prev_op = prev_op  # pyright: ignore[reportPrivateUsage]
            op._next_op = None  # pyright: ignore[reportPrivateUsage]
        else:
            block._last_op = prev_op  # pyright: ignore[reportPrivateUsage]
        # (`Operation.drop_all_references`: no successors, no regions)
        for operand, use in zip(op._operands, op._operand_uses, strict=True):  # pyright: ignore[reportPrivateUsage]
            operand.remove_use(use)
        op._operand_uses = ()  # pyright: ignore[reportPrivateUsage]
        op._successor_uses = ()  # pyright: ignore[reportPrivateUsage]

    def replace_uses_with_if(self, from_value: SSAValue, to_value: SSAValue,
                             predicate: Callable[[Any], bool]) -> None:  # fmt: skip
        self.journal.touch_uses(from_value)
        self.journal.touch_uses(to_value)
        super().replace_uses_with_if(from_value, to_value, predicate)


def tracking_rewriter(at: Operation, journal: Journal) -> TrackingRewriter:
    rewriter = TrackingRewriter(at)
    rewriter.journal = journal
    return rewriter


def note_modified(rewriter: PatternRewriter, op: Operation) -> None:
    """Tell the driver that a pattern edited `op` in place (an attribute, not through the
    rewriter): it is noted as touched, without revisiting it now, so the rewrite order
    stays xDSL's walker's."""
    journal = getattr(rewriter, "journal", None)
    if journal is not None:
        journal.touch(op)


def stale(block: Block, content: dict[Operation, int], uses: dict[Operation, int],
          visited: dict[int, int], radius: int) -> list[Operation]:  # fmt: skip
    """The instructions of `block` a pattern's decision may differ on since their last
    visit, in program order. A touch at clock t of an instruction's content reaches it and
    its users, transitively, up to `radius` uses away (patterns read operand chains that
    deep); its operands' definitions gained or lost a user. A change of an instruction's
    users reaches it and its users (patterns read their operands' user counts). An
    instruction is stale when a touch reached it after its last visit (`visited`, by
    `id`; never visited: -1): a touch at the clock of a visit came from that visit's
    rewrite. (Keyed by `id`: xDSL's `Operation.__hash__` is a Python call.)"""
    # (An instruction reached at clock t counts when it is in the block and was not
    # reached as late already: tested inline. Uses are followed down their chains, not
    # through xDSL's `uses` iterators; operands' owners come from the result's `op`.)
    when: dict[int, int] = {}
    seen = when.get
    front: list[tuple[Operation, int]] = []
    near: dict[Operation, int] = dict(uses)  # reached by a change of users: one level
    for op, t in content.items():
        k = id(op)
        if seen(k, -1) < t and op.parent is block:
            when[k] = t
            front.append((op, t))
        for v in op._operands:  # pyright: ignore[reportPrivateUsage]
            o = getattr(v, "op", None)
            if o is None:
                o = v.owner
                if not isinstance(o, Operation):
                    continue  # a block argument
            if near.get(o, -1) < t:
                near[o] = t

    def reach_users(op: Operation, t: int, reached: list[tuple[Operation, int]]) -> None:
        """Reach `op`'s users at t; those newly reached go into `reached`."""
        for r in op.results:
            use = r.first_use
            while use is not None:
                u = use._operation  # pyright: ignore[reportPrivateUsage]
                k = id(u)
                if seen(k, -1) < t and u.parent is block:
                    when[k] = t
                    reached.append((u, t))
                use = use._next_use  # pyright: ignore[reportPrivateUsage]

    one_level: list[tuple[Operation, int]] = []  # (not followed further)
    for op, t in near.items():
        k = id(op)
        if seen(k, -1) < t and op.parent is block:
            when[k] = t
        reach_users(op, t, one_level)
    for _ in range(radius):
        nxt: list[tuple[Operation, int]] = []
        for op, t in front:
            reach_users(op, t, nxt)
        if not nxt:
            break
        front = nxt
    get = visited.get
    fresh = {k for k, t in when.items() if get(k, -1) < t}
    if not fresh:  # (nothing stale: no pass over the block)
        return []
    return [op for op in op_list(block) if id(op) in fresh]


class WalkResult:
    """What one `Driver.rewrite` did: whether it changed anything, and what it touched."""

    __slots__ = ("changed", "touched")

    def __init__(self) -> None:
        self.changed = False
        self.touched = Touches()


class Driver:
    """Applies `pattern` to blocks (see the module docstring): first to what the seeds
    reach (every instruction without seeds, or when `exhaustive`), then, when
    `recursive`, again to what each walk's touches left stale, until a walk changes
    nothing. One driver serves a pass run's blocks, with one rewriter.

    Each walk is xDSL's `PatternRewriteWalker._process_worklist`, with the same worklist
    updates (new and modified instructions and the users of replaced ones pushed, an
    operand left with no other user pushed, erased ones dropped), a journal of visits and
    touches besides, and its stack keyed by `id`."""

    def __init__(self, pattern: RewritePattern, recursive: bool = True,
                 radius: int = DEFAULT_RADIUS, exhaustive: bool = False,
                 start: Callable[[list[Operation]], list[Operation]] | None = None):  # fmt: skip
        self.pattern = pattern
        self.start = start
        """The instructions of a list a walk starts with, in order (the others are visited
        only if pushed): for patterns whose matches the walk's own rewrites push, and
        whose order of rewriting does not change the result (`dce`: what is dead goes, in
        any order)."""
        self.recursive = recursive
        self.radius = radius
        self.exhaustive = exhaustive
        self.wants: Callable[[Operation], bool] | None = getattr(pattern, "wants", None)
        """The pattern's own filter, when it has one: instructions it can never match
        (e.g. no algsimp pattern has the opcode) are not visited."""
        self.select: Callable[[list[Operation]], list[Operation]] | None = getattr(
            pattern, "select", None
        )
        """`wants` over a list at once, when the pattern offers it (a test per op class
        rather than a call per instruction)."""
        self.journal = Journal()
        self.stack: list[Operation | None] = []
        self.where: dict[int, int] = {}
        self.rewriter: TrackingRewriter | None = None

    def rewrite(self, block: Block, seeds: Touches | None = None) -> WalkResult:
        result = WalkResult()
        radius = self.radius
        if seeds is None or self.exhaustive:
            ops: list[Operation] = op_list(block)
        else:
            content = dict.fromkeys(seeds.content, 0)
            ops = stale(block, content, dict.fromkeys(seeds.uses, 0), {}, radius)
        wants, select = self.wants, self.select
        start = None if self.exhaustive else self.start
        while ops:
            if select is not None:
                ops = select(ops)
            elif wants is not None:
                ops = [op for op in ops if wants(op)]
            if start is not None:
                ops = start(ops)
            if not ops:
                break
            changed = self._walk(ops)
            journal = self.journal
            if journal.content or journal.uses:  # (most walks touch nothing: no set copies)
                result.touched.update(journal.touches())
            if not changed:
                break
            result.changed = True
            if not self.recursive:
                break
            if self.exhaustive:
                ops = op_list(block)
            else:
                ops = stale(block, journal.content, journal.uses, journal.visited, radius)
        return result

    def _walk(self, ops: list[Operation]) -> bool:
        journal = self.journal = Journal()
        stack: list[Operation | None] = list(reversed(ops))  # the first comes out first
        self.stack = stack
        where = self.where = {id(op): i for i, op in enumerate(stack)}
        rewriter = self.rewriter
        if rewriter is None:
            rewriter = self.rewriter = tracking_rewriter(ops[0], journal)
            rewriter.operation_insertion_handler.append(self._inserted)
            rewriter.operation_removal_handler.append(self._removed)
            rewriter.operation_modification_handler.append(self._modified)
            rewriter.operation_replacement_handler.append(self._replaced)
        rewriter.journal = journal
        visited = journal.visited
        match = self.pattern.match_and_rewrite
        changed = False
        clock = 0
        while stack:
            op = stack.pop()
            if op is None:  # removed from the worklist
                continue
            k = id(op)
            del where[k]
            clock += 1
            journal.clock = clock
            visited[k] = clock
            # The rewriter readied for this visit, as xDSL's walker resets it (inline, not a
            # method: one call less on each of Mixtral's ~110k visits); its insertion point
            # is made from the op visited when first asked for.
            rewriter.has_done_action = False
            rewriter.visits += 1
            rewriter._current_operation = op  # pyright: ignore[reportPrivateUsage]
            rewriter._point = None  # pyright: ignore[reportPrivateUsage]
            try:
                match(op, rewriter)
            except Exception as err:
                op.emit_error(f"Error while applying pattern: {err}", underlying_error=err)
            changed |= rewriter.has_done_action
        return changed

    def _push(self, op: Operation) -> None:
        k = id(op)
        if k not in self.where and (self.wants is None or self.wants(op)):
            self.where[k] = len(self.stack)
            self.stack.append(op)

    def _inserted(self, op: Operation) -> None:
        self.journal.touch(op)
        if self.recursive:
            self._push(op)

    def _removed(self, op: Operation) -> None:
        journal = self.journal
        journal.content.pop(op, None)
        journal.uses.pop(op, None)
        for v in op.operands:
            o = v.owner
            if isinstance(o, Operation):
                journal.uses[o] = journal.clock
                # as xDSL's walker: an operand this was the only user of may go too
                if self.recursive and v.has_one_use():
                    self._push(o)
        i = self.where.pop(id(op), None)
        if i is not None:
            self.stack[i] = None

    def _modified(self, op: Operation) -> None:
        self.journal.touch(op)
        if self.recursive:
            self._push(op)

    def _replaced(self, op: Operation, new_results: Sequence[SSAValue | None]) -> None:
        for r in op.results:
            for use in r.uses:
                self.journal.touch(use.operation)
                if self.recursive:
                    self._push(use.operation)
