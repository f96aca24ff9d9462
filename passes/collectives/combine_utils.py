"""What XLA's collective combiners share (`collective_combiner_utils.h`, `all_reduce_key.cc`).

`combine_by_key` (`combine_scan`'s, taken from here) is XLA's `CombineInstructionsByKey`:
instructions with equal keys are gathered, in post order, into groups no larger than the
byte and count thresholds, a group ending where the next member would depend on an earlier
one; each group of two or more is handed to the combining function. The rest are the pieces of the key (replica groups,
reduction kind, frontend attributes, pipelining) and the computations a combiner visits;
the combined instruction's attributes are `combine_merge`'s.
"""

from __future__ import annotations

import json
import re

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import call_instructions, fusion_computations, hlo_ops, owner

# re-exported: the combiners and the schedulers take them from here
from .combine_scan import CombineFn as CombineFn
from .combine_scan import KeyFn as KeyFn
from .combine_scan import combine_by_key as combine_by_key
from .combine_scan import reorder_block as reorder_block

DEFAULT_THRESHOLD_BYTES = 30 * 1024 * 1024 + 7
"""XLA's `kDefaultAllReduceCombineThreshold` (and the all-gather, reduce-scatter and
collective-permute ones: the same number)."""

DEFAULT_THRESHOLD_COUNT = 2048
"""XLA's `kDefaultCollectiveCombineThresholdCount`."""

COMBINER_KEY = "combiner_key"
COLLECTIVE_GROUP_KEY = "collective_group_key"
SCHEDULING_GROUP_ID = "_scheduling_group_id"
SYNC_COLLECTIVE = "sync_collective"
SUGGESTED_THRESHOLD = "suggested_combiner_threshold"

_PAIR = re.compile(r'([\w.\-$]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def frontend_attributes(text: object) -> dict[str, str]:
    """`{k="v", ...}` as a dict (values unquoted; `{...}` values are not read)."""
    if text is None:
        return {}
    return dict(_PAIR.findall(str(getattr(text, "text", text))))


def module_frontend_attributes(module: ModuleOp) -> dict[str, str]:
    attr = module.attributes.get("hlo.frontend_attributes")
    return frontend_attributes(getattr(attr, "data", attr))


def suggested_threshold(module: ModuleOp) -> int | None:
    """XLA's `SuggestedCombinerThreshold`: the module's `suggested_combiner_threshold`
    frontend attribute, when it is an integer."""
    text = module_frontend_attributes(module).get(SUGGESTED_THRESHOLD)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def groups_key(op: HloOp) -> tuple[tuple[int, ...], ...]:
    """The replica groups as lists of ids (the iota form expanded, `{}` empty) as XLA's
    keys hold them."""
    raw = op.attr("replica_groups")
    text = str(getattr(raw, "text", raw) or "{}").replace(" ", "")
    m = _IOTA.fullmatch(text)
    if m:  # `[G,S]<=[dims]T(perm)`: G rows of iota(dims) transposed by perm
        ids = np.arange(int(np.prod(_ints(m.group(2))))).reshape(_ints(m.group(2)))
        if m.group(3):
            ids = ids.transpose(_ints(m.group(3)))
        return tuple(tuple(int(x) for x in row) for row in ids.reshape(_ints(m.group(1))))
    return tuple(tuple(_ints(g)) for g in re.findall(r"\{([\d,]*)\}", text[1:-1]) if g)


_IOTA = re.compile(r"\[([\d,]*)\]<=\[([\d,]*)\](?:T\(([\d,]*)\))?")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def reduction_root(op: HloOp, comps: dict[str, ComputationOp]) -> HloOp | None:
    """The root of `op`'s reduction computation when it has XLA's trivial form (three
    instructions, two of them parameters: `GetAllReduceKey`'s guard), else None."""
    comp = comps.get(op.attr("to_apply"))
    if comp is None:
        return None
    insts = list(comp.instructions)
    if len(insts) != 3 or sum(i.OPCODE == "parameter" for i in insts) != 2:
        return None
    return comp.root


_REDUCTION_KINDS = {"add": "sum", "multiply": "product", "minimum": "min", "maximum": "max"}


def reduction_kind(op: HloOp, comps: dict[str, ComputationOp]) -> str | None:
    """XLA's `MatchReductionComputation`: sum/product/min/max (and/or on pred), the root
    a scalar binary op of parameters 0 and 1 in either order."""
    root = reduction_root(op, comps)
    if root is None:
        return None
    et = root.shape.element_type if isinstance(root.shape, ArrayShape) else None
    kind = _REDUCTION_KINDS.get(root.OPCODE)
    if root.OPCODE in ("and", "or") and et == "pred":
        kind = "min" if root.OPCODE == "and" else "max"
    if kind is None or not isinstance(root.shape, ArrayShape) or root.shape.num_elements != 1:
        return None
    numbers = sorted(
        o.attr("number") if o is not None and o.OPCODE == "parameter" else -1
        for o in (owner(v) for v in root.operands)
    )
    return kind if numbers == [0, 1] else None


def all_reduce_key(op: HloOp, comps: dict[str, ComputationOp]) -> tuple | None:
    """XLA's `GetAllReduceKey` (domains aside: this playground has none): the reduction
    root's opcode and element type, channel id presence, use_global_device_ids, replica
    groups; None for an instruction with control dependencies or a non-trivial reduction."""
    if op.attr("control-predecessors") or op.inst_name in waited_on(op):
        return None
    root = reduction_root(op, comps)
    if root is None:
        return None
    et = root.shape.element_type if isinstance(root.shape, ArrayShape) else ""
    return (root.OPCODE, et, op.attr("channel_id") is not None,
            bool(op.attr("use_global_device_ids")), groups_key(op))  # fmt: skip


def waited_on(op: HloOp) -> frozenset[str]:
    """Names of the instructions of `op`'s computation some instruction waits for."""
    comp = op.parent_op()
    cached = getattr(comp, "_combiner_waited_on", None)
    if cached is None:
        cached = frozenset(
            n for o in hlo_ops(list(comp.body.block.ops))  # type: ignore[union-attr]
            for n in (o.attr("control-predecessors") or ())  # type: ignore[attr-defined]
        )  # fmt: skip
        comp._combiner_waited_on = cached  # type: ignore[union-attr]
    return cached


def forget_waited_on(comp: ComputationOp) -> None:
    vars(comp).pop("_combiner_waited_on", None)  # vars: the instance dict, typed as dict


def is_pipelined(op: HloOp) -> bool:
    """XLA's `IsPipelinedCollective`: the backend config's collective_backend_config says
    is_pipelined."""
    text = op.attr("backend_config")
    if not text:
        return False
    try:
        config = json.loads(str(text))
    except ValueError:
        return False
    cbc = config.get("collective_backend_config") if isinstance(config, dict) else None
    return isinstance(cbc, dict) and cbc.get("is_pipelined") is True


def gpu_extra_key(op: HloOp, only_special: bool) -> str | None:
    """The GPU combiners' extra key text: ` pipelined=true` apart, ` sync=true` for
    synchronous collectives when `only_special` (then anything else gets None: the first
    GPU round combines only those), then the combiner_key and collective_group_key
    frontend attributes."""
    attrs = frontend_attributes(op.attr("frontend_attributes"))
    if is_pipelined(op):
        extra = " pipelined=true"
    elif only_special and attrs.get(SYNC_COLLECTIVE, "false") == "true":
        extra = " sync=true"
    elif only_special:
        return None
    else:
        extra = ""
    for name in (COMBINER_KEY, COLLECTIVE_GROUP_KEY):
        value = attrs.get(name)
        if value is not None and (value or name == COMBINER_KEY):
            extra += f" frontend_attribute={len(name)}:{name}{len(value)}:{value}"
    return extra


def non_fusion_computations(module: ModuleOp, skip_while_bodies: bool) -> list[ComputationOp]:
    """XLA's `MakeNonfusionComputations`; with `skip_while_bodies`, also without the
    computations whose unique caller is a while (`combine_while_loops=false`)."""
    fused = fusion_computations(module)
    callers: dict[str, list[HloOp]] = {}
    if skip_while_bodies:
        for _, op, names in call_instructions(module):
            for name in names:
                callers.setdefault(name, []).append(op)
    out = []
    for comp in computations(module):
        if comp.comp_name in fused:
            continue
        calls = callers.get(comp.comp_name, [])
        if skip_while_bodies and len(calls) == 1 and calls[0].OPCODE == "while":
            continue
        out.append(comp)
    return out


def module_has_constrained_layout(module: ModuleOp, opcode: str) -> bool:
    """XLA's `ContainsLayoutConstrainedCollective`: some `opcode` has constrain_layout."""
    return any(
        opcode == op.OPCODE and op.attr("constrain_layout")
        for comp in computations(module)
        for op in comp.instructions
    )
