"""`dot-merger` (XLA's DotMerger): see `merge` for what it does, `plan` for what it picks."""

from hlopass.passes.dot_merger.merge import DotMergerPass, MergeDots

__all__ = ["DotMergerPass", "MergeDots"]
