"""Priority fusion into and out of generic Triton fusions (XLA's `priority_fusion.cc`:
`IsGenericTritonFusion`, `CanFuseTriton`, the Triton branch of `CanFuse`).

A generic Triton fusion is a `kCustom` fusion whose backend config names the `__triton`
emitter (what `softmax-rewriter-triton` makes; GEMM fusions, `__triton_gemm`, are not). XLA's
`IsFusible` admits them, and when either side of a producer-consumer pair is one the pair is
decided by the Triton rules alone: the producer is not the computation's root, both sides
are fusible, every instruction of the non-Triton side is one Triton supports
(`IsTritonSupportedInstruction`, here `softmax_match.triton_supported`), and the fused
kernel can be tiled. The result is again a generic Triton fusion, tiled afresh (XLA keeps
the tiling its indexing cost model picked for the pair; `retile` picks ours once built).

Differs from XLA's: XLA asks its SymbolicTileAnalysis whether the fused kernel tiles; ours
asks what `softmax-rewriter-triton` asks of a diamond (`tiling_refusal`: rows fit one
Triton tensor, no bitcast or reshape regroups the row) and, as our tiling search only tiles
whole rows, refuses a reduction over any dimension but the minor-most one and a kernel of
more than one output.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.attrs import backend_config
from hlopass.ir.shape import ArrayShape
from hlopass.kernel_structure.plan import Kernel
from hlopass.passes.fusion.softmax_match import triton_supported
from hlopass.passes.fusion.softmax_rewriter_triton import Pricer, tiling_refusal

TRITON_KIND = "__triton"
"""XLA's kTritonFusionKind: the backend-config kind of a generic (block-level) Triton fusion."""

NOT_TRITON_SUPPORTED = "{} is not supported by Triton"
NOT_TILED = "Fusion can not be tiled with SymbolicTileAnalysis: {}"
MULTI_OUTPUT = "a Triton fusion has one output"
NOT_MINOR_REDUCTION = "{} reduces a dimension other than the minor-most one"


def is_generic_triton_fusion(op: Any) -> bool:
    """XLA's IsGenericTritonFusion: a kCustom fusion run by the `__triton` emitter."""
    if op.opcode != "fusion" or op.attr("kind") != "kCustom":
        return False
    cfg = backend_config(op).get("fusion_backend_config", {})
    return isinstance(cfg, dict) and cfg.get("kind") == TRITON_KIND


class TritonRules:
    """The Triton branch of XLA's CanFuse for kernel plans, on a GPU of compute
    capability `cc`; answers are cached per kernel version."""

    def __init__(self, comps: dict[str, ComputationOp], roots: set[int], cc: tuple[int, int]):
        self.comps = comps
        self.roots = roots
        self.cc = cc
        self._supported: dict[int, tuple[int, str | None]] = {}
        self._fusions: set[int] | None = None

    def is_triton(self, k: Kernel) -> bool:
        """Whether `k` is (or has grown from) a generic Triton fusion: it holds one of the
        module's (found once; a kernel's instructions only grow, so no per-kernel scan)."""
        if self._fusions is None:
            self._fusions = {id(op) for c in self.comps.values() for op in c.instructions
                             if op.opcode == "fusion" and is_generic_triton_fusion(op)}  # fmt: skip
        return bool(self._fusions) and not self._fusions.isdisjoint(k.ids)

    def involves(self, producer: Kernel, consumer: Kernel) -> bool:
        """The pair goes by the Triton rules (XLA: heroless Triton fusion is off by default,
        so only pairs with a Triton fusion on one side)."""
        return self.is_triton(producer) or self.is_triton(consumer)

    def unsupported(self, k: Kernel) -> str | None:
        """XLA's IsTritonSupported of the kernel: None, or the first instruction refused."""
        if self.is_triton(k):
            return None  # (its other instructions were admitted when they joined it)
        hit = self._supported.get(id(k))
        if hit is None or hit[0] != k.version:
            bad = next((m for m in k.members if not triton_supported(m, self.comps, self.cc)), None)
            hit = (k.version, None if bad is None else NOT_TRITON_SUPPORTED.format(bad.inst_name))
            self._supported[id(k)] = hit
        return hit[1]

    def can_fuse(self, producer: Kernel, consumer: Kernel) -> str | None:
        """None when a Triton pair (both sides fusible, the producer not the root: asked
        first, by `Rules`) may be fused, else the reason."""
        why = self.unsupported(producer) or self.unsupported(consumer)
        if why:
            return why
        if len(consumer.outputs) > 1 or len(producer.outputs) > 1:
            return NOT_TILED.format(MULTI_OUTPUT)
        why = tiling_reason(expanded(consumer.merged(producer), self.comps))
        return NOT_TILED.format(why) if why else None


def expanded(members: Sequence[HloOp], comps: dict[str, ComputationOp]) -> list[HloOp]:
    """The instructions a kernel of `members` (block order) computes: each Triton fusion's
    fused instructions (parameters aside) in its place."""
    out: list[HloOp] = []
    for m in members:
        if is_generic_triton_fusion(m):
            out += [op for op in comps[m.attr("calls")].instructions if op.opcode != "parameter"]
        else:
            out.append(m)
    return out


def tiling_reason(members: list[HloOp]) -> str:
    """'' when our row tiling fits the fused kernel of `members`, else why not."""
    for op in members:
        if op.opcode == "reduce":
            src = op.operands[0].type.data  # type: ignore[attr-defined]
            dims = tuple(op.attr("dimensions") or ())
            if not isinstance(src, ArrayShape) or dims != (src.rank - 1,):
                return NOT_MINOR_REDUCTION.format(op.inst_name)
    return tiling_refusal(members)


def retile(fusions: Iterable[HloOp], comps: dict[str, ComputationOp], device: str) -> None:
    """Give each generic Triton fusion grown by priority fusion the output tile our cost
    model prices fastest (XLA's fused instruction takes the block-level parameters its
    tiling search found for the pair)."""
    pricer: Pricer | None = None
    for fusion in fusions:
        if fusion.parent is None or not is_generic_triton_fusion(fusion):
            continue
        if not isinstance(fusion.shape, ArrayShape):
            continue
        pricer = pricer or Pricer(device)
        pricer.best_tile(fusion, comps)
