"""`splitk-rewriter` (XLA's SplitkRewriter): see `rewrite` for what it does, `choose` for
how many pieces the contraction is split into."""

from hlopass.passes.splitk_rewriter.rewrite import SplitDotK, SplitkRewriterPass

__all__ = ["SplitDotK", "SplitkRewriterPass"]
