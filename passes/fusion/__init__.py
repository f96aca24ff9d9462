"""Fusion passes: `priority-fusion` (XLA's PriorityFusion), `multi-output-fusion` and
`horizontal-fusion` (XLA's HorizontalLoopFusion).

Layout: `graph.py` (kernel plans of a computation), `rules.py` (XLA's refusal rules),
`rewrites.py` (the IR rewrites, one per class), `priority.py` / `multi_output.py` /
`horizontal.py` (the strategies that order them), `pass_base.py` (their device and cost
model options), `explain.py` (why each decision was taken). The cost model interface is
`hlopass.cost.fusion_cost_model`.
"""

from hlopass.passes.fusion.explain import FusionRecord, explain_sink
from hlopass.passes.fusion.horizontal import HorizontalFusionPass, horizontal_fusion
from hlopass.passes.fusion.multi_output import MultiOutputFusionPass, multi_output_fusion
from hlopass.passes.fusion.priority import PriorityFusionPass, priority_fusion

__all__ = [
    "FusionRecord",
    "HorizontalFusionPass",
    "MultiOutputFusionPass",
    "PriorityFusionPass",
    "explain_sink",
    "horizontal_fusion",
    "multi_output_fusion",
    "priority_fusion",
]
