"""The pass registry: every pass name `hlopass-opt -p` knows, and how to load its class.

Passes load on first use (importing every pass costs each process its time); plug-ins
(`hlopass.plugins`) add entries here, and `hlopass.pipeline` (which re-exports `PASSES`)
reads them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hlopass.rewriting import HloModulePass


def _lazy(module: str, cls: str) -> Callable[[], type[HloModulePass]]:
    def load() -> type[HloModulePass]:
        return getattr(importlib.import_module(module), cls)

    load.__name__ = f"load_{cls}"
    return load


# name on the command line -> loader of the pass class (sorted by name)
PASSES: dict[str, Callable[[], type[HloModulePass]]] = dict(
    sorted(
        {
            "algsimp": _lazy("hlopass.passes.algsimp", "AlgebraicSimplifierPass"),
            "call-inliner": _lazy("hlopass.passes.call_inliner", "CallInlinerPass"),
            "batched-gather-scatter-normalizer": _lazy(
                "hlopass.passes.batched_gather_scatter_normalizer",
                "BatchedGatherScatterNormalizerPass",
            ),
            "constant-folding": _lazy("hlopass.passes.constant_folding", "ConstantFoldingPass"),
            "conv-padding-legalization": _lazy(
                "hlopass.passes.conv_rewriter.padding_legalization", "ConvPaddingLegalizationPass"
            ),
            "conv-rewriter": _lazy("hlopass.passes.conv_rewriter", "ConvRewriterPass"),
            "cse": _lazy("hlopass.passes.cse", "CSEPass"),
            "cudnn-fused-convolution-rewriter": _lazy(
                "hlopass.passes.conv_rewriter.fused", "CudnnFusedConvRewriterPass"
            ),
            "dce": _lazy("hlopass.passes.dce", "DCEPass"),
            "dot-decomposer": _lazy("hlopass.passes.dot_decomposer", "DotDecomposerPass"),
            "dot-dimension-merger": _lazy(
                "hlopass.passes.dot_dimension_merger", "DotDimensionMergerPass"
            ),
            "dot-merger": _lazy("hlopass.passes.dot_merger", "DotMergerPass"),
            "defuse": _lazy("hlopass.passes.defuse", "DefusePass"),
            "gemm-fusion": _lazy("hlopass.passes.gemm_fusion", "GemmFusionPass"),
            "gemm-rewriter": _lazy("hlopass.passes.gemm_rewriter", "GemmRewriterPass"),
            "priority-fusion": _lazy("hlopass.passes.fusion", "PriorityFusionPass"),
            "select-and-scatter-expander": _lazy(
                "hlopass.passes.select_and_scatter_expander", "SelectAndScatterExpanderPass"
            ),
            "sort-iota-fusion": _lazy(
                "hlopass.passes.fusion.sort_iota_fusion", "SortIotaFusionPass"
            ),
            "horizontal-fusion": _lazy("hlopass.passes.fusion", "HorizontalFusionPass"),
            "multi-output-fusion": _lazy("hlopass.passes.fusion", "MultiOutputFusionPass"),
            "softmax-rewriter-triton": _lazy(
                "hlopass.passes.fusion.softmax_rewriter_triton", "SoftmaxRewriterTritonPass"
            ),
            "splitk-rewriter": _lazy("hlopass.passes.splitk_rewriter", "SplitkRewriterPass"),
            "topk-decomposer": _lazy("hlopass.passes.topk", "TopkDecomposerPass"),
            "topk-rewriter": _lazy("hlopass.passes.topk", "TopkRewriterPass"),
            "topk-specializer": _lazy("hlopass.passes.topk", "TopkSpecializerPass"),
            "tree-reduction-rewriter": _lazy(
                "hlopass.passes.tree_reduction_rewriter", "TreeReductionRewriterPass"
            ),
            "while-loop-unroller": _lazy(
                "hlopass.passes.while_loop_unroller", "WhileLoopUnrollerPass"
            ),
            "fixpoint": _lazy("hlopass.pipeline", "FixpointPass"),
            "copy-elision": _lazy("hlopass.passes.layout.copy_elision", "CopyElisionPass"),
            "layout-assignment": _lazy("hlopass.passes.layout.assignment", "LayoutAssignmentPass"),
            "layout-normalization": _lazy(
                "hlopass.passes.layout.normalization", "LayoutNormalizationPass"
            ),
            "all-gather-decomposer": _lazy(
                "hlopass.passes.collectives.decomposers", "AllGatherDecomposerPass"
            ),  # noqa: E501
            "all-reduce-decomposer": _lazy(
                "hlopass.passes.collectives.all_reduce_decomposer", "AllReduceDecomposerPass"
            ),  # noqa: E501
            "reduce-scatter-decomposer": _lazy(
                "hlopass.passes.collectives.decomposers", "ReduceScatterDecomposerPass"
            ),  # noqa: E501
            "collective-permute-decomposer": _lazy(
                "hlopass.passes.collectives.collective_permute_decomposer",
                "CollectivePermuteDecomposerPass",
            ),  # noqa: E501
            "all-reduce-contiguous": _lazy(
                "hlopass.passes.collectives.all_reduce_contiguous", "AllReduceContiguousPass"
            ),  # noqa: E501
            "async-collective-creator": _lazy(
                "hlopass.passes.collectives.async_collective_creator", "AsyncCollectiveCreatorPass"
            ),  # noqa: E501
            "latency-hiding-scheduler": _lazy(
                "hlopass.passes.scheduling", "LatencyHidingSchedulerPass"
            ),
            "gradient-packing": _lazy(
                "hlopass.passes.collectives.gradient_packing", "GradientPackingPass"
            ),
            "all-reduce-folder": _lazy(
                "hlopass.passes.collectives.all_reduce_folder", "AllReduceFolderPass"
            ),  # noqa: E501
            "all-reduce-combiner": _lazy(
                "hlopass.passes.collectives.combiners", "AllReduceCombinerPass"
            ),  # noqa: E501
            "all-gather-combiner": _lazy(
                "hlopass.passes.collectives.combiners", "AllGatherCombinerPass"
            ),  # noqa: E501
            "reduce-scatter-combiner": _lazy(
                "hlopass.passes.collectives.combiners", "ReduceScatterCombinerPass"
            ),  # noqa: E501
            "collective-permute-combiner": _lazy(
                "hlopass.passes.collectives.combiners", "CollectivePermuteCombinerPass"
            ),  # noqa: E501
            "all-reduce-simplifier": _lazy(
                "hlopass.passes.collectives.all_reduce_simplifier", "AllReduceSimplifierPass"
            ),  # noqa: E501
            "all-reduce-reassociate": _lazy(
                "hlopass.passes.collectives.reassociate", "AllReduceReassociatePass"
            ),  # noqa: E501
            "reduce-scatter-reassociate": _lazy(
                "hlopass.passes.collectives.reassociate", "ReduceScatterReassociatePass"
            ),  # noqa: E501
            "reduce-scatter-creator": _lazy(
                "hlopass.passes.collectives.reduce_scatter_creator", "ReduceScatterCreatorPass"
            ),  # noqa: E501
            "collective-pipeliner": _lazy(
                "hlopass.passes.collectives.collective_pipeliner", "CollectivePipelinerPass"
            ),
            "while-loop-all-reduce-code-motion": _lazy(
                "hlopass.passes.collectives.while_loop_all_reduce_code_motion",
                "WhileLoopAllReduceCodeMotionPass",
            ),
        }.items()
    )
)
