"""What a kernel is, apart from what it costs: the facts XLA's `HloFusionAnalysis` holds.

* `shapes`: element counts of shapes, operands and users, the physical order of a transpose;
* `emitter`: a kernel's heroes, the emitter XLA would pick for it (reduction, tiled transpose,
  scatter, concatenate, in-place dynamic-update-slice, input slices, loop) and the reduction
  and transpose facts that decide it;
* `plan`: a would-be kernel (`Kernel`: instructions of one computation run as one launch) and
  its emitted code size (`ir_size`).

Fusion rules (`hlopass.passes.fusion`) and the cost model (`hlopass.cost`) both read these;
nothing here prices anything, and nothing here imports `hlopass.cost`.
"""
