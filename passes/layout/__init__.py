"""Layout passes: `layout-assignment` (XLA's GPU rules or the cost model's choice),
`layout-normalization` and `copy-elision` (the cleanups that follow it)."""
