"""`gemm-fusion` (XLA's GemmFusion): see `gemm_fusion` for which dots, `plan` for what
joins them, `propagate` and `dim_order` for how the tiling follows each instruction."""

from hlopass.passes.gemm_fusion.gemm_fusion import FuseGemm, GemmFusionPass

__all__ = ["FuseGemm", "GemmFusionPass"]
