"""`softmax-rewriter-triton` (XLA's SoftmaxRewriterTriton): each normalization diamond (a
row reduction over the minor-most dimension, broadcast back and combined with the value it
reduced, see `softmax_match`) becomes one `kCustom` fusion `triton_softmax` calling
`triton_softmax_computation`, with the backend config XLA gives it
(`fusion_backend_config.kind` = `__triton`, and a `block_level_fusion_config`: output tile
sizes and warps). The instructions between the producer and the root are computed inside;
the producer and any parameters they read become its operands, so values are kept exactly.

As XLA's: diamonds are matched in every computation but fused ones, composite ones and
those a custom call calls, in post order, and fused in reverse order (a diamond's root may be the next one's
producer); CUDA GPUs before Ampere are refused. A diamond is dropped when Triton cannot tile
it (XLA asks its SymbolicTileAnalysis; here: a row padded to a power of two must fit one
Triton tensor, 2^20 elements, and no bitcast or reshape inside may split or merge the row
dimension). The tiling: the row whole and, of the next dimension, the number of rows (a
power of two below its size, or its size) our cost model (`hlopass.cost`) prices fastest,
XLA's warp count for the tile padded to powers of two; a tile over 40% of a block's registers prices as never finishing (XLA's
indexing cost model). With `only-fuse-if-profitable`, the fusion is kept only when it prices
no slower than the diamond's instructions fused by `tree-reduction-rewriter,priority-fusion`
alone (XLA runs its reduction passes and fusion pipeline on the extracted diamond and
compares its GPU performance model; ours decides with `hlopass.cost`).

Differs from XLA's: XLA searches tile sizes of every output dimension with its indexing
cost model; ours varies only the dimension before the row. Priority fusion then fuses producers,
consumers and neighbouring diamonds into these fusions, as XLA's does (`triton_fusible`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Block, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.cost import estimate, get_device
from hlopass.cost.model import kernel_time, kernel_work
from hlopass.cost.profiles import COMPUTE_CAPABILITY
from hlopass.dialects.hlo import ComputationOp, HloOp, computations, create_op, new_return_op
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    fusion_computations,
    replace_op,
)
from hlopass.text.exporter import instruction_post_order

from .rewrites import FusionBuilder
from .softmax_match import Matcher, is_splat

MAX_TILE_ELEMENTS = 1 << 20
"""Triton's largest tensor (XLA's TritonEmitterConstraints)."""
REGISTERS_PER_BLOCK = 65536
"""registers_per_block_limit of every GPU above (XLA's device descriptions)."""
TILE_REGISTER_FRACTION = 0.4
"""XLA's kFractionOfRegistersAvailableToStoreTile."""
FUSION_NAME = "triton_softmax"
UNFUSED_PLAN = "tree-reduction-rewriter,priority-fusion{{device={device}}}"


def num_warps(tile: int) -> int:
    """XLA's GetNumWarps: warps per block for the largest (padded) tile of a fusion."""
    for limit, warps in ((512, 1), (1024, 2), (16384, 4), (32768, 8), (65536, 16)):
        if tile <= limit:
            return warps
    return 32


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def diamond_members(root: HloOp, producer: HloOp) -> list[HloOp]:
    """What XLA's MakeFusionForDiamond puts into the fusion: every instruction reached
    from `root` through operands, stopping at `producer` and at parameters (which become
    the fusion's operands), in its depth-first post order."""
    seen: set[int] = {id(producer)}
    out: list[HloOp] = []
    stack: list[tuple[HloOp, bool]] = [(root, False)]
    while stack:
        op, done = stack.pop()
        if done:
            out.append(op)
            continue
        if id(op) in seen:
            continue
        seen.add(id(op))
        if op.opcode == "parameter":
            out.append(op)
            continue
        stack.append((op, True))
        for v in reversed(op.operands):
            owner = v.owner
            if isinstance(owner, HloOp) and id(owner) not in seen:
                stack.append((owner, False))
    return out


def tiling_refusal(members: list[HloOp]) -> str:
    """'' when Triton can tile the fusion of `members` (post order) by whole rows, else why
    not. Values computed from a reduction alone (before their broadcast) have no row; a
    bitcast or reshape of one may regroup its dimensions freely."""
    reduced: set[int] = set()
    for op in members:
        if op.opcode == "reduce":
            reduced.add(id(op))
            row = op.operands[0].type.data.dims[-1]  # type: ignore[attr-defined]
            if _pow2(row) > MAX_TILE_ELEMENTS:
                return f"a row of {row} elements exceeds Triton's largest tile"
            continue
        ins = [v.owner for v in op.operands if not is_splat(v.owner)]
        if op.opcode != "broadcast" and ins and all(id(o) in reduced for o in ins):
            reduced.add(id(op))
            continue
        if op.opcode in ("bitcast", "reshape"):
            src, out = op.operands[0].type.data, op.shape  # type: ignore[attr-defined]
            row = (src.dims[-1:] or (1,)) if isinstance(src, ArrayShape) else None
            if isinstance(out, ArrayShape) and row is not None and row != (out.dims[-1:] or (1,)):
                return f"{op.inst_name} splits or merges the row dimension"
    return ""


def block_config(tile: list[int]) -> str:
    """The backend config of a Triton normalization fusion with output tile `tile`."""
    size = math.prod(_pow2(t) for t in tile)
    return json.dumps(
        {"fusion_backend_config": {"kind": "__triton", "block_level_fusion_config": {
            "num_warps": str(num_warps(size)), "output_tiles": [{"sizes": [str(t) for t in tile]}],
            "num_ctas": 1, "num_stages": 1}}},
        separators=(",", ":"),
    )  # fmt: skip


def _callees(comp: ComputationOp, comps: dict[str, ComputationOp]) -> list[ComputationOp]:
    out: dict[str, ComputationOp] = {}
    stack = [comp]
    while stack:
        c = stack.pop()
        for op in c.instructions:
            for name in op.callees():
                if name not in out and name in comps:
                    out[name] = comps[name]
                    stack.append(comps[name])
    return list(out.values())


class Pricer:
    """Prices a normalization fusion on `device` with `hlopass.cost`, as XLA's indexing
    cost model would see it (a tile that does not fit in registers never finishes), and
    the same instructions fused without it."""

    def __init__(self, device: str):
        self.device = device
        self.dev = get_device(device)

    def fused_us(self, fusion: HloOp, comps: dict[str, ComputationOp], tile: list[int]) -> float:
        if math.prod(_pow2(t) for t in tile) > TILE_REGISTER_FRACTION * REGISTERS_PER_BLOCK:
            return math.inf
        fusion.set_attr("backend_config", block_config(tile))
        return kernel_time(kernel_work(fusion, comps, dev=self.dev), self.dev).time_us

    def best_tile(self, fusion: HloOp, comps: dict[str, ComputationOp]) -> tuple[list[int], float]:
        """The output tile priced fastest (XLA's TryFindBestTilingForFusion over its good
        tilings: per dimension a power of two below its size, or its size; here the row
        whole and the dimension before it varied; the first on a tie) and its price."""
        shape = fusion.shape
        assert isinstance(shape, ArrayShape)
        dims = list(shape.dims)
        base = [1] * (len(dims) - 1) + dims[-1:]
        sizes = [1]
        if len(dims) >= 2:
            sizes = [1 << k for k in range(max(0, dims[-2] - 1).bit_length()) if 1 << k < dims[-2]]
            sizes = (sizes or [1]) + ([dims[-2]] if dims[-2] not in sizes else [])
        best: tuple[list[int], float] | None = None
        for r in sizes:
            tile = list(base)
            if len(dims) >= 2:
                tile[-2] = r
            t = self.fused_us(fusion, comps, tile)
            if best is None or t < best[1]:
                best = (tile, t)
        assert best is not None
        fusion.set_attr("backend_config", block_config(best[0]))
        return best

    def unfused_us(self, fused: ComputationOp, comps: dict[str, ComputationOp]) -> float:
        """The fused computation alone as a module, planned by `UNFUSED_PLAN` (XLA's
        EstimateOptimizedHloRunTimeWithoutSoftMaxRewriterTriton)."""
        from hlopass.pipeline import run_pipeline

        parts = [c.clone() for c in _callees(fused, comps)]
        entry = fused.clone()
        entry.properties["is_entry"] = UnitAttr()
        module = ModuleOp([*parts, entry])
        run_pipeline(module, UNFUSED_PLAN.format(device=self.device))
        return estimate(module, self.dev).time_us


def build_fusion(fb: FusionBuilder, root: HloOp, producer: HloOp,
                 members: list[HloOp]) -> HloOp:  # fmt: skip
    """`triton_softmax(producer, parameters...)` computing `members` (root last), inserted
    before `root`; `root` itself is left in place."""
    block = Block()
    mapping: dict[SSAValue, SSAValue] = {}
    operands: list[SSAValue] = []

    def param(v: SSAValue) -> None:
        p = create_op("parameter", [], v.type.data, fb.fresh_inst(f"parameter_{len(operands)}"),  # type: ignore[attr-defined]
                      {"number": len(operands)})  # fmt: skip
        block.add_op(p)
        mapping[v] = p.result
        operands.append(v)

    param(producer.result)
    for op in members:
        if op.opcode == "parameter":
            param(op.result)
            continue
        inner = op.clone(value_mapper=mapping)
        inner.inst_name = fb.fresh_inst(op.inst_name)
        block.add_op(inner)
        mapping[op.result] = inner.result
    block.add_op(new_return_op(mapping[root.result]))
    comp = fb.add_computation(block, root, prefix=f"{FUSION_NAME}_computation")
    attrs = {"kind": "kCustom", "calls": comp.comp_name, "backend_config": block_config([1])}
    fusion = create_op("fusion", operands, root.shape, fb.fresh_inst(FUSION_NAME), attrs)
    md = root.attr("metadata")
    if md is not None:
        fusion.set_attr("metadata", md)
    parent = root.parent_block()
    assert parent is not None
    parent.insert_op_before(fusion, root)
    return fusion


@dataclass
class FuseNormalizationDiamond(RewritePattern):
    """`root(producer..., broadcast(reduce(producer...)))` -> `triton_softmax(producer, ...)`,
    a kCustom `__triton` fusion, for the diamonds of one computation.

    Guards (first): the diamond matches (`softmax_match.Matcher.match`), Triton can tile it
    (`tiling_refusal`), and with `only_fuse_if_profitable` it prices no slower fused."""

    # matched on the computation (diamonds are found before any is fused, as XLA's pass
    # does), so no `OPCODES`; the grammar page reads this instead
    TARGETS: ClassVar[tuple[str, ...]] = ("reduce",)

    ctx: RewriteContext
    matcher: Matcher
    builder: FusionBuilder
    pricer: Pricer
    only_fuse_if_profitable: bool = False

    def diamonds(self, comp: ComputationOp) -> list[tuple[HloOp, HloOp, list[HloOp]]]:
        """(root, producer, members) of each fusible diamond of `comp`, in post order."""
        out = []
        for op in instruction_post_order(comp):
            producer = self.matcher.match(op)
            if isinstance(producer, str):
                continue
            members = diamond_members(op, producer)
            if not tiling_refusal(members):
                out.append((op, producer, members))
        return out

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, ComputationOp):
            return
        comps = self.builder.comps
        for root, producer, members in reversed(self.diamonds(op)):
            fusion = build_fusion(self.builder, root, producer, members)
            fused = self.builder.fused(fusion)
            _, fused_us = self.pricer.best_tile(fusion, comps)
            if self.only_fuse_if_profitable and self.pricer.unfused_us(fused, comps) < fused_us:
                fusion.detach()
                fusion.erase()
                fused.detach()
                fused.erase()
                del comps[fused.comp_name]
                continue
            self.ctx.note(self, root, f"into {fusion.inst_name}")
            replace_op(rewriter, root, fusion.result)


@dataclass(frozen=True)
class SoftmaxRewriterTritonPass(HloModulePass):
    """Fuse each normalization diamond (a minor-most row reduction, broadcast back and
    combined with what it reduced) into one Triton `__triton` kCustom fusion."""

    name: ClassVar[str] = "softmax-rewriter-triton"

    device: str = "h100_sxm"
    """GPU the fusions are for: its compute capability (Ampere or newer) and the cost
    model pricing their tiles."""

    only_fuse_if_profitable: bool = False
    """XLA's `only_fuse_if_profitable` (its constructor's default; XLA's GPU compiler
    passes true): keep a fusion only when it prices no slower than the diamond fused by
    `tree-reduction-rewriter,priority-fusion`."""

    def __post_init__(self) -> None:
        cc = COMPUTE_CAPABILITY.get(self.device)
        if cc is None:
            known = ", ".join(sorted(COMPUTE_CAPABILITY))
            raise ValueError(f"unknown device {self.device!r} (known: {known})")
        if cc < (8, 0):
            raise ValueError(
                "Triton support is only enabled for Ampere GPUs (compute capability 8.0) "
                f"and up, but got compute capability {cc[0]}.{cc[1]} ({self.device})"
            )

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        builder = FusionBuilder(module)
        matcher = Matcher(builder.comps, COMPUTE_CAPABILITY[self.device])
        pattern = FuseNormalizationDiamond(
            rctx, matcher, builder, Pricer(self.device), self.only_fuse_if_profitable
        )
        skipped = fusion_computations(module) | _opaque_callees(module)
        changed = False
        for comp in list(computations(module)):
            if comp.comp_name in skipped:
                continue
            rewriter = PatternRewriter(comp)
            pattern.match_and_rewrite(comp, rewriter)
            changed |= rewriter.has_done_action
        return changed


def _opaque_callees(module: ModuleOp) -> set[str]:
    """Computations XLA's pass does not walk besides fused ones: those a custom call calls
    and composite ones (a `call` with `is_composite=true`)."""
    return {name for c in computations(module) for op in c.instructions
            if op.opcode == "custom-call" or (op.opcode == "call" and op.attr("is_composite"))
            for name in op.callees()}  # fmt: skip
