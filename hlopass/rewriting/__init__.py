"""Shared helpers for passes written as xDSL pattern rewrites over the `hlo` dialect, one
module per concern; pass authors and plug-ins import them from here.

* `base`: `HloModulePass`, an xDSL `ModulePass` whose `run` reports whether it changed the
  module (XLA's `Run -> changed`; `apply` is the xDSL entry point and calls `run`), the
  `Scope` a run reports its changes to, `run_patterns` (to a fixed point) and
  `expand_in_post_order` (one post-order sweep, XLA's OpExpanderPass).
* `tracked`: `TrackedPass`, the base of a pass that reports in its `Scope` what it changed.
* `context`: `NameUniquer` (fresh names in XLA's `name.N` style, unique in the module;
  `claim_name`, from `hlopass.ir.names`, in any one set of names) and `RewriteContext` (what patterns of one pass
  run share: the uniquer, a trace hook).
* `building`: `new_op`, `constant_from_numpy`, `replace_op`, `erase_dead`: building and
  replacing instructions with a `PatternRewriter`; `insert_computation` (a new reducer or
  comparator before the computation that calls it).
* `matching`: `OpcodeDispatchApplier`, and `const_array`, `scalar_int`, `gte_index`, `splat_value`, `is_zero`,
  `is_one`.
* `effects`: side effects, randomness, control predecessors (what may not be removed).
* `calls`: `CallIndex` and the module-wide questions about who calls which computation.
* `lookup`: per-class answers asked of every instruction (`is_hlo`, `owner`, `module_of`).
"""

from hlopass.ir.names import claim_name
from hlopass.rewriting.base import (
    HloModulePass,
    Scope,
    TraceHook,
    expand_in_post_order,
    forget_cached_state,
    run_patterns,
)
from hlopass.rewriting.building import (
    constant_from_numpy,
    erase_dead,
    insert_computation,
    new_op,
    replace_op,
    replace_with_new,
    scalar_constant,
    splat,
)
from hlopass.rewriting.calls import (
    CallIndex,
    call_instructions,
    call_sites_only,
    fusion_computations,
    reachable_computations,
    unfused_computations,
)
from hlopass.rewriting.context import (
    NameUniquer,
    RewriteContext,
    rewrite_text,
)
from hlopass.rewriting.effects import (
    calls_side_effect,
    control_predecessor_names,
    has_side_effect,
    is_commutative,
    is_control_predecessor,
    is_random,
    is_removable,
)
from hlopass.rewriting.lookup import (
    ByClass,
    comps_by_name,
    computation_named,
    hlo_class,
    hlo_ops,
    instructions,
    is_hlo,
    module_of,
    owner,
)
from hlopass.rewriting.matching import (
    OpcodeDispatchApplier,
    const_array,
    gte_index,
    is_constant_like,
    is_one,
    is_root,
    is_zero,
    same_shape,
    scalar_int,
    splat_value,
    value_shape,
)
from hlopass.rewriting.tracked import TrackedPass

__all__ = [
    "HloModulePass",
    "TrackedPass",
    "forget_cached_state",
    "TraceHook",
    "Scope",
    "NameUniquer",
    "claim_name",
    "RewriteContext",
    "rewrite_text",
    "is_hlo",
    "ByClass",
    "hlo_class",
    "hlo_ops",
    "instructions",
    "owner",
    "new_op",
    "insert_computation",
    "constant_from_numpy",
    "scalar_constant",
    "splat",
    "is_removable",
    "control_predecessor_names",
    "is_control_predecessor",
    "calls_side_effect",
    "has_side_effect",
    "is_random",
    "is_commutative",
    "erase_dead",
    "replace_op",
    "replace_with_new",
    "OpcodeDispatchApplier",
    "computation_named",
    "run_patterns",
    "expand_in_post_order",
    "const_array",
    "scalar_int",
    "gte_index",
    "splat_value",
    "is_zero",
    "is_one",
    "is_constant_like",
    "same_shape",
    "value_shape",
    "is_root",
    "module_of",
    "comps_by_name",
    "CallIndex",
    "call_instructions",
    "call_sites_only",
    "fusion_computations",
    "unfused_computations",
    "reachable_computations",
]
"""The public names, in the order the reference (`docs/PASS_API.md`) lists the unplaced ones."""
