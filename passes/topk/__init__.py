"""The TopK passes of XLA's GPU compiler: `topk-rewriter` (sort + slice -> `TopK` custom
call), `topk-splitter` (a long single-row TopK into per-block TopKs and a merge),
`topk-specializer` (`TopK` -> the GPU TopK kernel `__gpu$TopK` where it applies) and
`topk-decomposer` (TopK -> sort + slice)."""

from hlopass.passes.topk.decomposer import TopkDecomposerPass
from hlopass.passes.topk.rewriter import TopkRewriterPass
from hlopass.passes.topk.specializer import TopkSpecializerPass

__all__ = ["TopkDecomposerPass", "TopkRewriterPass", "TopkSpecializerPass"]
