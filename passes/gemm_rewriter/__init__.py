"""`gemm-rewriter` (XLA's GemmRewriter): see `gemm_rewriter` for which dots become cuBLAS
calls and the workspace, `epilogues` and `gelu` for what joins a call, `support` for the
library's type and shape limits, `config` for the backend config."""

from hlopass.passes.gemm_rewriter.gemm_rewriter import GemmRewriterPass

__all__ = ["GemmRewriterPass"]
