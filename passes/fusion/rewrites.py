"""The fusion rewrites, one per class, on the IR:

* `FuseProducerIntoConsumers`: `c_i(p(x))` for each listed consumer c_i -> `fusion_i(x)`
  computing p inside (a copy per consumer; p is erased once unused);
* `MergeSiblingFusions` (multi_output_rewrites.py): two kernels reading the same value -> one
  multi-output fusion;
* `FuseProducerIntoMultiOutput` (multi_output_rewrites.py): a producer read by a consumer and by
  others -> one fusion exporting both values.

They share `FusionBuilder` (module-wide names, fused computations, XLA's fusion naming).
Which rewrite runs where is the drivers' business (priority.py, multi_output.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.cost.fusion_cost_model import FusionCostModel
from hlopass.cost.fusion_models import fusion_cost_model
from hlopass.dialects.hlo import (
    ComputationOp,
    HloOp,
    computations,
    create_op,
    new_computation_op,
    new_return_op,
)
from hlopass.ir.opcode_sets import EVERY_OPCODE
from hlopass.ir.shape import TupleShape
from hlopass.kernel_structure.emitter import fusion_kind, heroes
from hlopass.passes.fusion.settle import settle as settle  # the drivers settle through here
from hlopass.rewriting import RewriteContext, TraceHook, claim_name

_NAMED_HEROES = frozenset({"reduce", "transpose", "scatter", "concatenate"})


class FusionBuilder:
    """Builds fusions in one module: unique instruction and computation names, fused
    computations placed before their caller."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.comps: dict[str, ComputationOp] = {c.comp_name: c for c in computations(module)}
        self.inst_names: set[str] = {
            op.inst_name for c in self.comps.values() for op in c.instructions
        }
        self.callers: dict[str, int] = {}
        for c in self.comps.values():
            for op in c.instructions:
                if op.opcode == "fusion":
                    name = op.attr("calls")
                    self.callers[name] = self.callers.get(name, 0) + 1
        self.comp_names: set[str] = set(self.comps)
        # per name set: where `claim_name`'s probing for a base resumes
        self._next_inst: dict[str, int] = {}
        self._next_comp: dict[str, int] = {}
        self.created: list[HloOp] = []
        """Fusion instructions this builder made (renamed XLA's way by `finish`)."""
        self.defer_kinds = False
        """Set each grown fusion's `kind` once, in `set_kinds`, not after every step (a
        driver that reads no kind while it builds: the kind of a fusion that grows k times
        costs a walk of it, k times)."""
        self._kind_pending: dict[int, HloOp] = {}
        self.grown_custom: list[HloOp] = []
        """Custom (Triton) fusions grown here, each as often as it grew: to be tiled afresh."""

    def set_kinds(self) -> None:
        """XLA's `ChooseKind` of every fusion grown since kinds were deferred."""
        for fusion in self._kind_pending.values():
            if fusion.parent is not None and fusion.attr("kind") != "kCustom":
                comp = self.fused(fusion)
                fusion.set_attr("kind", fusion_kind(list(comp.instructions), [comp.root]))
        self._kind_pending.clear()

    def fresh_inst(self, base: str) -> str:
        """`base`, else `base.k` for the first free k, among the module's instruction names."""
        return claim_name(base, self.inst_names, self._next_inst)

    def fresh_comp(self, base: str) -> str:
        """`base`, else `base.k` for the first free k, among the module's computation names."""
        return claim_name(base, self.comp_names, self._next_comp)

    def fused(self, fusion: HloOp) -> ComputationOp:
        return self.comps[fusion.attr("calls")]

    # -- building --------------------------------------------------------------------------

    def wrap(self, op: HloOp) -> HloOp:
        """`op(x...)` -> `fusion(x...)` whose computation is op on parameters."""
        block = Block()
        mapping: dict[SSAValue, SSAValue] = {}
        operands: list[SSAValue] = []
        for v in op.operands:
            if v not in mapping:
                p = self._param(len(operands), v)
                block.add_op(p)
                mapping[v] = p.result
                operands.append(v)
        inner = op.clone(value_mapper=mapping)
        block.add_op(inner)
        block.add_op(new_return_op(inner.result))
        comp = self.add_computation(block, op)
        # (deferred: `set_kinds` chooses it, as for the fusions the replay grows)
        kind = "kLoop" if self.defer_kinds else fusion_kind(list(comp.instructions), [inner])
        fusion = create_op(
            "fusion", operands, op.shape, self.fresh_inst("fusion"),
            {"kind": kind, "calls": comp.comp_name},
        )  # fmt: skip
        if self.defer_kinds:
            self._kind_pending[id(fusion)] = fusion
        outer = op.parent_block()
        assert outer is not None
        outer.insert_op_before(fusion, op)
        op.result.replace_all_uses_with(fusion.result)
        md = op.attr("metadata")
        if md is not None:
            fusion.set_attr("metadata", md)
        erase_op(op)
        self.created.append(fusion)
        return fusion

    def _param(self, number: int, like: SSAValue) -> HloOp:
        return create_op(
            "parameter", [], like.type.data, self.fresh_inst(f"param_{number}"),  # type: ignore[attr-defined]
            {"number": number},
        )  # fmt: skip

    def add_computation(self, block: Block, caller: Operation,
                        prefix: str = "fused_computation") -> ComputationOp:  # fmt: skip
        """A new computation `prefix[.k]` of `block`, placed before `caller`'s computation
        and called once (by the fusion about to be made)."""
        name = self.fresh_comp(prefix)
        comp = new_computation_op(name, block)
        host = caller.parent_op()
        assert isinstance(host, ComputationOp)
        mblock = host.parent_block()
        assert mblock is not None
        mblock.insert_op_before(comp, host)
        self.comps[name] = comp
        self.callers[name] = 1
        return comp

    def fuse_into(self, producer: HloOp, fusion: HloOp) -> None:
        """Compute `producer` inside `fusion` (which reads it); erase it once unused."""
        comp = self.fused(fusion)
        operands = list(fusion.operands)
        params, anchor = _parameters_first(comp, len(operands))
        reads = [i for i, v in enumerate(operands) if v is producer.result]
        last_user = all(u.operation is fusion for u in producer.result.uses)
        bound: dict[int, SSAValue] = {id(v): params[i].result for i, v in enumerate(operands)}
        block = comp.block
        new_params: list[HloOp] = []

        def param_for(v: SSAValue) -> SSAValue:
            got = bound.get(id(v))
            if got is None:
                p = self._param(len(operands) + len(new_params), v)
                block.insert_op_before(p, block.first_op)  # type: ignore[arg-type]
                new_params.append(p)
                bound[id(v)] = got = p.result
                operands.append(v)
            return got

        if producer.opcode == "fusion":
            inner = self.fused(producer)
            keep_names = last_user and self.callers.get(inner.comp_name, 0) == 1
            inner_params, _ = _parameters_first(inner, len(producer.operands))
            mapping = {
                p.result: param_for(producer.operands[p.attr("number")]) for p in inner_params
            }
            body = [op for op in inner.instructions if op.opcode != "parameter"]
            root_value: SSAValue = inner.root.result
        else:
            keep_names = last_user
            mapping = {}
            for v in producer.operands:
                mapping[v] = param_for(v)
            body = [producer]
            root_value = producer.result
        if keep_names:  # nothing else reads the producer: move its code, no copy
            _move_into(body, mapping, block, anchor)
        else:
            for op in body:
                clone = op.clone(value_mapper=mapping)
                clone.inst_name = self.fresh_inst(op.inst_name)
                _insert(block, clone, anchor)
        new_root = mapping.get(root_value, root_value)  # (moved: the root itself)
        for i in reads:
            params[i].result.replace_all_uses_with(new_root)
        for i in sorted(reads, reverse=True):
            erase_op(params[i])
        # renumber the surviving parameters, drop the producer from the operands
        survivors = [p for i, p in enumerate(params) if i not in reads] + new_params
        kept = [v for i, v in enumerate(operands) if i not in reads]
        for n, p in enumerate(survivors):
            if p.attr("number") != n:
                p.set_attr("number", n)
        fusion.operands = kept
        if producer.opcode == "fusion" and producer.attr("kind") == "kCustom":
            # a custom (Triton) fusion's code keeps its emitter in its consumer (rules admit
            # only generic Triton producers); its tiling is the driver's to redo
            fusion.set_attr("kind", "kCustom")
            fusion.set_attr("backend_config", producer.attr("backend_config"))
        if fusion.attr("kind") == "kCustom":  # XLA's ChooseKind: a Triton fusion stays kCustom
            self.grown_custom.append(fusion)
        elif self.defer_kinds:
            self._kind_pending[id(fusion)] = fusion
        else:
            fusion.set_attr("kind", fusion_kind(list(comp.instructions), [comp.root]))
        if keep_names and producer.opcode != "fusion":
            return  # the producer itself now computes inside
        if not producer.result.uses:
            callee = producer.attr("calls") if producer.opcode == "fusion" else None
            erase_op(producer)
            if callee is not None:
                self.callers[callee] -= 1
                if self.callers[callee] == 0:
                    erase_op(self.comps.pop(callee))

    # -- XLA's names ----------------------------------------------------------------------

    def finish(self) -> None:
        """Name each fusion made here as XLA's RenameFusions does: `loop_add_fusion`
        calling `fused_add`, `input_reduce_fusion` calling `fused_reduce` (heroes sorted)."""
        for fusion in self.created:
            if fusion.parent is None or fusion.attr("kind") == "kCustom":
                continue  # (RenameFusions leaves custom fusions their names)
            comp = self.fused(fusion)
            heroes = hero_names(comp)
            prefix = "input" if fusion.attr("kind") == "kInput" else "loop"
            self.inst_names.discard(fusion.inst_name)
            fusion.inst_name = self.fresh_inst(f"{prefix}_{heroes}_fusion")
            old = comp.comp_name
            del self.comps[old]
            new = self.fresh_comp(f"fused_{heroes}")
            comp.properties["sym_name"] = StringAttr(new)
            self.comps[new] = comp
            self.callers[new] = self.callers.pop(old, 1)
            fusion.set_attr("calls", new)


def run_merge_drivers(
    module: ModuleOp,
    comps: Sequence[ComputationOp],
    make_driver: Callable[..., Any],
    device: str,
    cost_model: str,
    trace: TraceHook | None,
) -> tuple[bool, list[Any]]:
    """Run a merging driver (multi-output, horizontal) over `comps` with one cost model and
    one `FusionBuilder`; returns (changed, the drivers' records, each naming its kernels)."""
    model: FusionCostModel = fusion_cost_model(cost_model, device)
    ctx = RewriteContext.of(module, trace)
    builder = FusionBuilder(module)
    changed, records, drivers = False, [], []
    for comp in comps:
        driver = make_driver(comp, builder.comps, model, builder, ctx)
        changed |= driver.run()
        records += driver.records
        drivers.append(driver)
    builder.finish()
    for driver in drivers:  # names are final only once the builder has finished
        for record, op in driver.made:
            record.kernels = [op.inst_name] if op.parent is not None else []
    if changed:
        settle(module)
    return changed, records


def _parameters_first(comp: ComputationOp, count: int) -> tuple[list[HloOp], HloOp | None]:
    """(`comp.parameters()`, its first instruction that is no parameter), read off the head
    of the block when the `count` parameters lead it (as the fusions built here have them:
    `wrap` and `fuse_into` put parameters first), else by walking the whole computation."""
    params: list[HloOp] = []
    op = comp.block.first_op
    while isinstance(op, HloOp) and op.opcode == "parameter":
        params.append(op)
        op = op.next_op
    if len(params) != count:
        params = comp.parameters()
        op = next((o for o in comp.instructions if o.opcode != "parameter"), None)
    else:
        params.sort(key=lambda o: o.attr("number", 0))
    return params, op if isinstance(op, HloOp) else None


def _insert(block: Block, op: Operation, anchor: Operation | None) -> None:
    """Before the first non-parameter instruction, else before the return."""
    block.insert_op_before(op, anchor if anchor is not None else block.last_op)  # type: ignore[arg-type]


def _move_into(body: list[HloOp], mapping: dict[SSAValue, SSAValue], block: Block,
               anchor: Operation | None) -> None:  # fmt: skip
    """Move `body` (in order) into `block`, each operand in `mapping` replaced by its value
    there: what cloning and erasing the originals would leave, without the copies."""
    for op in body:
        ops = op.operands
        if any(v in mapping for v in ops):
            op.operands = [mapping.get(v, v) for v in ops]
        op.detach()
        _insert(block, op, anchor)


def erase_op(op: Operation) -> None:
    op.detach()
    op.erase(safe_erase=False)


def _instruction_of(v: SSAValue) -> HloOp:
    o = v.owner
    assert isinstance(o, HloOp), "a computation's values are its instructions' results"
    return o


def hero_names(comp: ComputationOp) -> str:
    root = comp.root
    outs = [_instruction_of(v) for v in root.operands] if root.opcode == "tuple" else [root]
    ids = {id(op) for op in comp.instructions}
    names: set[str] = set()
    for out, hero in zip(outs, heroes(outs, ids), strict=True):
        pick = hero if hero.opcode in _NAMED_HEROES else out
        names.add(pick.opcode.replace("-", "_"))
    return "_".join(sorted(names))


def is_multi_output(op: HloOp) -> bool:
    return op.opcode == "fusion" and isinstance(op.shape, TupleShape)


@dataclass
class FuseProducerIntoConsumers(RewritePattern):
    """`c_i(p(x))` -> `fusion_i(x)` computing p inside, for each consumer c_i in
    `consumers`; p is erased once nothing reads it.

    Guards: each consumer reads p. A consumer that is not yet a fusion is first wrapped in
    one (XLA's Fuse). `fusions` receives the fusion that each consumer became."""

    OPCODES: ClassVar[tuple[str, ...]] = EVERY_OPCODE

    ctx: RewriteContext
    builder: FusionBuilder
    consumers: Sequence[HloOp]
    fusions: list[HloOp] = field(default_factory=list)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp):
            return
        self.fusions = []
        consumers = [c for c in self.consumers if any(v is op.result for v in c.operands)]
        for consumer in consumers:
            fusion = consumer if consumer.opcode == "fusion" else self.builder.wrap(consumer)
            self.builder.fuse_into(op, fusion)
            self.fusions.append(fusion)
            self.ctx.note(self, op, f"into {fusion.inst_name}")
