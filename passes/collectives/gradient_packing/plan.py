"""The strategy: which band each gradient all-reduce falls in, and which small ones are
packed together (the seed's `split_grads_by_size` and `pack_small_tensors`).

Packing follows the seed: gradients of at most `max_bytes` bytes that stand next to each
other in the gradient order (here: the computation's post order) form runs of at most
`max_group`; a larger gradient, or one of another element type, ends a run (the seed packs
only f32), and so does here one of other replica groups or channel mode, or one that
depends on a member of the run (one all-reduce cannot wait for its own result). A run of
one is left alone. The seed packs each band's list apart; here a gradient of another band
ends a run too, so that packs are disjoint stretches of one order and two packs can never
wait for each other.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.passes.collectives.combine_utils import all_reduce_key
from hlopass.rewriting import owner
from hlopass.text.exporter import instruction_post_order

from .groups import is_gradient
from .spec import Band, band_of


@dataclass
class Pack:
    """All-reduces to pack into one, reduced by `band`'s algorithm."""

    members: list[HloOp]
    band: Band


@dataclass
class Plan:
    """One computation's decisions: each gradient's band, and the packs."""

    bands: dict[HloOp, Band] = field(default_factory=dict)
    packs: list[Pack] = field(default_factory=list)


@dataclass
class _Run:
    key: Hashable = None
    members: list[HloOp] = field(default_factory=list)
    reached: set[HloOp] = field(default_factory=set)


def plan_computation(comp: ComputationOp, comps: dict[str, ComputationOp],
                     bands: tuple[Band, ...], max_bytes: int, max_group: int) -> Plan:  # fmt: skip
    """The bands and packs of `comp`'s gradients (no packing when `max_bytes` or
    `max_group` is 0)."""
    plan = Plan()
    order = instruction_post_order(comp)
    for op in order:
        if is_gradient(op, comps):
            plan.bands[op] = bands[band_of(bands, op.shape.num_elements)]  # type: ignore[attr-defined]
    if max_bytes <= 0 or max_group <= 1:
        return plan
    plan.packs = _runs(order, plan.bands, comps, max_bytes, max_group)
    return plan


def _runs(order: list[HloOp], members: dict[HloOp, Band], comps: dict[str, ComputationOp],
          max_bytes: int, max_group: int) -> list[Pack]:  # fmt: skip
    packs: list[Pack] = []
    run = _Run()

    def close() -> None:
        if len(run.members) > 1:
            packs.append(Pack(list(run.members), members[run.members[0]]))

    for op in order:
        hit = bool(run.reached) and any(owner(v) in run.reached for v in op.operands)
        if hit:
            run.reached.add(op)
        if op not in members:
            continue
        small = op.shape.byte_size() <= max_bytes  # type: ignore[attr-defined]
        key = (id(members[op]), all_reduce_key(op, comps))
        joins = small and run.members and key == run.key and not hit
        if joins and len(run.members) < max_group:
            run.members.append(op)
            run.reached.add(op)
            continue
        close()
        run = _Run(key, [op], {op}) if small else _Run()
    close()
    return packs
