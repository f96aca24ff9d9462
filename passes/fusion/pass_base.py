"""What the fusion passes share: the GPU and cost model that price their kernels, checked
when a pass is made, and the report of their decisions to `explain_sink`."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from hlopass.cost.fusion_models import check_pricing_options
from hlopass.passes.fusion.explain import FusionRecord, explain_sink
from hlopass.rewriting import HloModulePass, TraceHook


@dataclass(frozen=True)
class PricedFusionPass(HloModulePass):
    """A fusion pass whose decisions a GPU cost model prices; a subclass says how it fuses
    (`fuse`), and `run` hands what it decided to `--explain-fusion`."""

    device: str = "h100_sxm"
    """GPU whose cost model prices the merged kernels."""

    cost_model: str = "default"
    """`default` or `roofline` (see priority-fusion)."""

    def __post_init__(self) -> None:
        # an unknown name fails when the pipeline is read, not after the passes before it ran
        check_pricing_options(self.device, self.cost_model)

    def fuse(self, module: ModuleOp, trace: TraceHook | None) -> tuple[bool, list[FusionRecord]]:
        """Fuse `module` in place; (changed, the record of every decision)."""
        raise NotImplementedError

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        changed, records = self.fuse(module, trace)
        explain_sink.emit(records)
        return changed
