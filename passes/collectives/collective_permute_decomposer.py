"""`collective-permute-decomposer` (XLA's CollectivePermuteDecomposer): a
collective-permute inside a while body whose pairs form no cycle becomes send / recv:

    after-all = token[] after-all()
    recv = (T, u32[], token[]) recv(after-all)          _xla_send_recv_source_target_pairs
    send = (T, u32[], token[]) send(data, after-all)    the same pairs
    recv-done = (T, token[]) recv-done(recv); send-done = token[] send-done(send)
    cp = T get-tuple-element(recv-done), index=0

The recv runs before its send (control edges, against deadlocks). With
`pipeline-parallelism-opt-level=enable` only one permute per computation is decomposed
(the one with most pairs), it must send a loop input (gte of the parameter), the size
threshold is ignored, and it and every collective whose groups conflict with it are
marked for the p2p stream; the permutes chosen for pipelining (the first that sends a loop
input, and one forming a forward / backward cycle with it) are marked
`_xla_send_recv_pipeline="0"` / `"1"`. Consecutive decomposed permutes are chained, and
every conflicting collective waits for the last send-done: a whole-computation decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter

from hlopass.dialects.hlo import ComputationOp, HloOp, computations, create_op
from hlopass.ir.attrs import Raw
from hlopass.ir.shape import ArrayShape, TupleShape, byte_size, scalar
from hlopass.passes.collectives.decomposers import explicit_groups
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    call_instructions,
    forget_cached_state,
    owner,
)

PAIRS_ATTR = "_xla_send_recv_source_target_pairs"
PIPELINE_ATTR = "_xla_send_recv_pipeline"
STREAM_ATTR = "_xla_gpu_collective_stream"
TOKEN = ArrayShape("token")

Pairs = list[tuple[int, int]]

# --- frontend attributes -------------------------------------------------------------------

_KEY = re.compile(r"\s*([\w.\-$]+)\s*=\s*")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


def fa_items(raw: object) -> dict[str, str]:
    """`{k="v", k2={...}}` as {key: value text as printed (quoted, or braces)}."""
    text = str(getattr(raw, "text", raw) or "{}").strip()[1:-1]
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _KEY.match(text, pos)
        if not m:
            break
        pos = m.end()
        if text.startswith("{", pos):
            depth, end = 0, pos
            for end in range(pos, len(text)):
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                if depth == 0:
                    break
            out[m.group(1)], pos = text[pos : end + 1], end + 1
        else:
            q = _QUOTED.match(text, pos)
            if not q:
                break
            out[m.group(1)], pos = q.group(0), q.end()
        pos = text.find(",", pos) + 1 or len(text)
    return out


def fa_with(raw: object, **values: str) -> Raw:
    """`raw` with `values` set, printed as XLA prints them (sorted keys, `{...}` values
    bare, the others quoted)."""
    items = fa_items(raw)
    for k, v in values.items():
        items[k] = v if v.startswith("{") and v.endswith("}") else f'"{v}"'
    return Raw("{" + ",".join(f"{k}={items[k]}" for k in sorted(items)) + "}")


# --- source-target pairs -------------------------------------------------------------------


def pairs_of(op: HloOp) -> Pairs:
    return [(int(s), int(t)) for s, t in (op.attr("source_target_pairs") or ())]


def pairs_text(pairs: Pairs) -> str:
    return "{" + ",".join(f"{{{s},{t}}}" for s, t in pairs) + "}"


def has_cycles(pairs: Pairs) -> bool:
    """Following source -> target from some id comes back to it."""
    nxt = dict(pairs)
    done: set[int] = set()
    for start in nxt:
        path, cur = set(), start
        while cur in nxt and cur not in done:
            if cur in path:
                return True
            path.add(cur)
            cur = nxt[cur]
        done |= path
    return False


def is_forward_cycle(back: Pairs, others: Pairs) -> bool:
    """`back` is {n-1 -> 0} and `others` are {0->1, 1->2, ..., n-2 -> n-1}."""
    n = len(others) + 1
    return back == [(n - 1, 0)] and others == [(i, i + 1) for i in range(n - 1)]


def is_backward_cycle(back: Pairs, others: Pairs) -> bool:
    """`back` is {0 -> n-1} and `others` are {1->0, 2->1, ..., n-1 -> n-2}."""
    n = len(others) + 1
    return back == [(0, n - 1)] and others == [(i + 1, i) for i in range(n - 1)]


def cycle_pair(a: HloOp, b: HloOp) -> tuple[HloOp, HloOp] | None:
    """(backedge permute, forward one) when `a` and `b` form a forward or backward cycle."""
    pa, pb = pairs_of(a), pairs_of(b)
    if is_forward_cycle(pa, pb) or is_backward_cycle(pa, pb):
        return a, b
    if is_forward_cycle(pb, pa) or is_backward_cycle(pb, pa):
        return b, a
    return None


# --- conflicting collectives (XLA's collective_conflict_analysis) ---------------------------

_COLLECTIVES = frozenset({
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "collective-broadcast", "ragged-all-to-all", "send", "recv", "all-reduce-start",
    "all-gather-start", "collective-permute-start",
})  # fmt: skip


class Groups:
    """Disjoint sets of device ids (XLA's AbstractReplicaGroups)."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.sets: list[set[int]] = []

    def merge(self, a: int, b: int) -> None:
        ia, ib = self.index.get(a), self.index.get(b)
        if ia is None and ib is None:
            self.index[a] = self.index[b] = len(self.sets)
            self.sets.append({a, b})
        elif ia is None or ib is None:
            k = ia if ia is not None else ib
            assert k is not None
            for x in (a, b):
                self.index[x] = k
                self.sets[k].add(x)
        elif ia != ib:
            for x in self.sets[ib]:
                self.index[x] = ia
            self.sets[ia] |= self.sets[ib]
            self.sets[ib] = set()

    def add(self, op: HloOp) -> None:
        if op.OPCODE in ("collective-permute", "collective-permute-start"):
            groups: list[list[int]] = [list(p) for p in pairs_of(op)]
        elif op.OPCODE in ("send", "recv"):
            text = fa_items(op.attr("frontend_attributes")).get(PAIRS_ATTR, "{}")
            groups = [
                [int(x) for x in g.split(",") if x] for g in re.findall(r"\{([\d,]*)\}", text[1:-1])
            ]
        else:
            groups = explicit_groups(op)
        for g in groups:
            for other in g[1:]:
                self.merge(g[0], other)

    def conflicts(self, other: Groups) -> bool:
        """Two ids of one of `other`'s sets fall in one of ours."""
        for s in other.sets:
            seen: set[int] = set()
            for x in s:
                k = self.index.get(x)
                if k is not None:
                    if k in seen:
                        return True
                    seen.add(k)
        return False


def conflicting(comp: ComputationOp, seeds: list[HloOp]) -> list[HloOp]:
    """Collectives of `comp` whose groups conflict with the seeds' (growing the seeds'
    groups with each one found, to a fixed point), in instruction order."""
    supremum, seen, found = Groups(), set(seeds), []
    for s in seeds:
        supremum.add(s)
    grew = True
    while grew:
        grew = False
        for op in comp.instructions:
            if op.OPCODE not in _COLLECTIVES or op in seen:
                continue
            mine = Groups()
            mine.add(op)
            if mine.conflicts(supremum):
                found.append(op)
                supremum.add(op)
                seen.add(op)
                grew = True
    return found


def _is_p2p_collective(op: HloOp) -> bool:
    return op.OPCODE in _COLLECTIVES and not (
        op.OPCODE in ("send", "recv") and op.attr("is_host_transfer")
    )


# --- the decomposition ---------------------------------------------------------------------


def sends_loop_input(op: HloOp) -> bool:
    """The permuted value is `get-tuple-element(parameter)` (XLA's pipelining test)."""
    src = owner(op.operands[0])
    return (
        src is not None
        and src.OPCODE == "get-tuple-element"
        and (p := owner(src.operands[0])) is not None
        and p.OPCODE == "parameter"
    )


@dataclass
class Decomposed:
    """The instructions one collective-permute became."""

    send: HloOp
    recv: HloOp
    send_done: HloOp
    recv_done: HloOp


def add_control(op: HloOp, pred: HloOp) -> None:
    preds = tuple(op.attr("control-predecessors") or ())
    if pred.inst_name not in preds:
        op.set_attr("control-predecessors", (*preds, pred.inst_name))


def set_fa(op: HloOp, **values: str) -> None:
    """Set frontend attributes of `op` (the others kept)."""
    op.set_attr("frontend_attributes", fa_with(op.attr("frontend_attributes"), **values))


def decompose(ctx: RewriteContext, cp: HloOp, decision: str, enable: bool) -> Decomposed:
    """Replace `cp` with after-all / recv / send / recv-done / send-done / gte."""
    data = cp.operands[0]
    shape = data.type.data  # type: ignore[attr-defined]
    channel = {"channel_id": cp.attr("channel_id")} if cp.attr("channel_id") is not None else {}
    md = {"metadata": cp.attr("metadata")} if cp.attr("metadata") is not None else {}
    fa = fa_with(cp.attr("frontend_attributes"), **{PAIRS_ATTR: pairs_text(pairs_of(cp))})

    def emit(suffix: str, opcode: str, operands: list, shape: Any, attrs: dict) -> HloOp:
        op = create_op(opcode, operands, shape, ctx.names.fresh(f"{cp.inst_name}-{suffix}"), attrs)
        PatternRewriter(cp).insert_op(op)
        return op

    token = emit("after-all", "after-all", [], TOKEN, {})
    u32 = scalar("u32")
    recv = emit("recv", "recv", [token.result], TupleShape((shape, u32, TOKEN)),
                  channel | md | {"frontend_attributes": fa})  # fmt: skip
    send = emit("send", "send", [data, token.result], TupleShape((shape, u32, TOKEN)),
                  channel | md | {"frontend_attributes": fa})  # fmt: skip
    recv_done = emit("recv-done", "recv-done", [recv.result], TupleShape((shape, TOKEN)), channel)
    send_done = emit("send-done", "send-done", [send.result], TOKEN, channel)
    got = emit("recv-data", "get-tuple-element", [recv_done.result], shape, {"index": 0})
    cp.result.replace_all_uses_with(got.result)
    cp.detach()
    cp.erase()
    if enable:
        add_control(send, recv_done)
    else:
        add_control(send, recv)
        add_control(recv_done, send)
    if decision:
        for op in (send, send_done, recv, recv_done):
            set_fa(op, **{PIPELINE_ATTR: decision})
    return Decomposed(send, recv, send_done, recv_done)


@dataclass
class _Choice:
    """The permutes of one computation to decompose, and the two chosen for pipelining."""

    cps: list[HloOp] = field(default_factory=list)
    cp0: HloOp | None = None
    cp1: HloOp | None = None

    def consider(self, cp: HloOp) -> None:
        """XLA's heuristic: the first permute sending a loop input, then one forming a
        cycle with it (the backedge one becomes cp0)."""
        if self.cp1 is not None or not sends_loop_input(cp):
            return
        if self.cp0 is None:
            self.cp0 = cp
            return
        pair = cycle_pair(self.cp0, cp)
        if pair is not None:
            self.cp0, self.cp1 = pair


@dataclass(frozen=True)
class CollectivePermuteDecomposerPass(HloModulePass):
    """Turn acyclic collective-permutes in while bodies into recv / send pairs."""

    name: ClassVar[str] = "collective-permute-decomposer"
    # what it decomposes (not pattern-based: the grammar page reads this)
    OPCODES: ClassVar[tuple[str, ...]] = ("collective-permute",)

    threshold_in_bytes: int = 0
    """Decompose only permutes of at least this many bytes (ignored when pipelining is
    enabled). XLA:GPU passes `xla_gpu_collective_permute_decomposer_threshold`, whose
    default (int64 max) turns the pass off."""

    pipeline_parallelism_opt_level: str = "disable"
    """XLA's `xla_gpu_experimental_pipeline_parallelism_opt_level`: `disable` or `enable`."""

    def __post_init__(self) -> None:
        if self.pipeline_parallelism_opt_level not in ("disable", "enable"):
            raise ValueError("pipeline-parallelism-opt-level must be disable or enable, got "
                             f"{self.pipeline_parallelism_opt_level!r}")  # fmt: skip

    def should_decompose(self, cp: HloOp, callers: dict[str, list[HloOp]]) -> bool:
        """XLA's `ShouldDecompose`."""
        shape = cp.shape
        if not isinstance(shape, ArrayShape) or len(cp.operands) != 1:
            return False
        enable = self.pipeline_parallelism_opt_level == "enable"
        if (
            not enable
            and shape.num_elements * byte_size(shape.element_type) < self.threshold_in_bytes
        ):
            return False
        if has_cycles(pairs_of(cp)):
            return False  # deadlocks in NCCL
        if enable and not sends_loop_input(cp):
            return False
        host = cp.parent_op()
        assert isinstance(host, ComputationOp)
        found = callers.get(host.comp_name, [])
        return len(found) == 1 and found[0].OPCODE == "while"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        callers: dict[str, list[HloOp]] = {}
        for _, op, names in call_instructions(module):
            for n in names:
                callers.setdefault(n, []).append(op)
        bodies = {op.attr("body") for ops in callers.values() for op in ops if op.OPCODE == "while"}
        changed = False
        for comp in computations(module):
            changed |= self._run_on(rctx, comp, callers, comp.comp_name in bodies)
        if changed:
            forget_cached_state(module)
        return changed

    def _run_on(self, ctx: RewriteContext, comp: ComputationOp, callers: dict[str, list[HloOp]],
                in_body: bool) -> bool:  # fmt: skip
        enable = self.pipeline_parallelism_opt_level == "enable"
        choice = _Choice()
        for op in list(comp.instructions):
            if op.OPCODE == "collective-permute" and self.should_decompose(op, callers):
                choice.cps.append(op)
                if in_body:
                    choice.consider(op)
        if not choice.cps:
            return False
        if enable and len(choice.cps) > 1:  # XLA keeps one: the one with most pairs
            choice.cps = [max(choice.cps, key=lambda c: len(pairs_of(c)))]
        others = [o for o in conflicting(comp, choice.cps) if _is_p2p_collective(o)]
        done: list[Decomposed] = []
        for cp in choice.cps:
            decision = "0" if cp is choice.cp0 else "1" if cp is choice.cp1 else ""
            ctx.note(self, cp, "into send / recv" + (f", pipeline {decision}" if decision else ""))
            done.append(decompose(ctx, cp, decision, enable))
        if enable:
            for op in [*others, *(x for d in done for x in (d.send, d.recv))]:
                set_fa(op, **{STREAM_ATTR: "p2p"})
        for prev, cur in zip(done, done[1:], strict=False):
            add_control(cur.recv, prev.send)
            add_control(cur.recv_done, prev.send_done)
        for op in others:
            add_control(op, done[-1].send_done)
        return True
