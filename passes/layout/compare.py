"""Compare a layout plan with the layouts XLA compiled, instruction by instruction.

Matching (the corpus's unoptimized modules carry no op_name metadata): convolutions by the
kind of cuDNN call and tensor dims, dots by the sizes of their free dims in either operand
order (XLA may swap operands, merge dots that share an operand, or split K into a batch
dim). Comparison in roles, per tensor: for a convolution the physical order of cuDNN's
(N, C, spatial) of its input, filter and output; for a dot whether each operand has its
contracting dims minor and which operand's free dims are minor in the result.
"""

from __future__ import annotations

import math


def _dims_sig(shape, roles: dict[int, str]) -> str:
    """Role letters in physical order major to minor, size-1 dims skipped, runs merged."""
    out = ""
    for d in reversed(shape.minor_to_major):
        if shape.dims[d] == 1:
            continue
        r = roles[d]
        if not out or out[-1] != r:
            out += r
    return out


def _conv_roles_sig(shape, n: int, c: int, sp) -> str:
    return _dims_sig(shape, {n: "N", c: "C", **{d: "S" for d in sp}})


CUDNN_KIND = {
    "__cudnn$convForward": "forward",
    "__cudnn$convBiasActivationForward": "forward",
    "__cudnn$convBackwardInput": "backward_input",
    "__cudnn$convBackwardFilter": "backward_filter",
}


def ours_conv(op):
    """(kind, {tensor: (shape, sig)}) with tensors named input/filter/output as cuDNN."""
    from hlopass.cost.layouts import conv_roles

    kind, roles = conv_roles(op)
    shapes = (op.operands[0].type.data, op.operands[1].type.data, op.shape)
    names = {"forward": ("input", "filter", "output"),
             "backward_filter": ("input", "output", "filter"),
             "backward_input": ("output", "filter", "input")}[kind]  # fmt: skip
    return kind, {
        name: (s, _conv_roles_sig(s, *r)) for name, s, r in zip(names, shapes, roles, strict=True)
    }


def xla_conv(op):
    kind = CUDNN_KIND[op.attr("custom_call_target")]
    labels = op.attr("dim_labels")
    b, f, sp = labels.input
    ki, ko, ksp = labels.kernel
    ob, of, osp = labels.output
    res = op.shape.elements[0]
    lhs, rhs = op.operands[0].type.data, op.operands[1].type.data
    tensors = {"forward": (("input", lhs), ("filter", rhs), ("output", res)),
               "backward_input": (("output", lhs), ("filter", rhs), ("input", res)),
               "backward_filter": (("input", lhs), ("output", rhs), ("filter", res))}[kind]  # fmt: skip
    roles = {"input": (b, f, sp), "filter": (ko, ki, ksp), "output": (ob, of, osp)}
    return kind, {name: (s, _conv_roles_sig(s, *roles[name])) for name, s in tensors}


def dot_info(op):
    """(lhs free size, rhs free size, lhs K minor, rhs K minor, result minor side)."""
    sizes, kminor = [], []
    for i, p in enumerate(("lhs", "rhs")):
        s = op.operands[i].type.data
        batch = set(op.attr(f"{p}_batch_dims") or ())
        contracting = set(op.attr(f"{p}_contracting_dims") or ())
        free = [d for d in range(s.rank) if d not in batch | contracting]
        sizes.append(math.prod(s.dims[d] for d in free))
        nd = [d for d in s.minor_to_major if s.dims[d] != 1]
        kminor.append(bool(nd) and nd[0] in contracting)
    out = op.shape
    nb = len(op.attr("lhs_batch_dims") or ())
    lhs_rank = op.operands[0].type.data.rank
    nl = lhs_rank - nb - len(op.attr("lhs_contracting_dims") or ())
    nd = [d for d in out.minor_to_major if out.dims[d] != 1]
    side = "B" if nd and nd[0] < nb else ("L" if nd and nd[0] < nb + nl else "R")
    return sizes[0], sizes[1], kminor[0], kminor[1], side


def heavy_ops(module, xla: bool):
    from hlopass.dialects.hlo import computations

    out = []
    for c in computations(module):
        for op in c.instructions:
            if (
                op.opcode == "dot"
                or (not xla and op.opcode == "convolution")
                or xla
                and op.opcode == "custom-call"
                and op.attr("custom_call_target") in CUDNN_KIND
            ):
                out.append(op)
    return out


def _merge_side(op):
    """The operand index `op` shares with a dot of the same shapes (XLA merges such dots
    into one, concatenating the other operands), else None."""
    for i, v in enumerate(op.operands[:2]):
        other = op.operands[1 - i]
        for u in v.uses:
            o = u.operation
            if o is op or getattr(o, "opcode", "") != "dot" or u.index != i:
                continue
            if o.operands[1 - i].type == other.type and o.result.type == op.result.type:
                return i
    return None


_PASS_THROUGH = frozenset({"convert", "reshape", "transpose", "copy", "bitcast"})


def _origin_type(v) -> str:
    """Element type of the value an operand was made from (through converts and data
    movement, which XLA may fuse or move into a gemm fusion)."""
    while getattr(v.owner, "opcode", None) in _PASS_THROUGH:
        v = v.owner.operands[0]
    return getattr(v.type.data, "element_type", "")


def match_dot(ours, theirs, used):
    """(index, swapped) of the XLA dot computing `ours`: free sizes equal in some operand
    order, or, for dots XLA merges (`_merge_side`), equal on the shared side and a multiple
    on the other; then one not matched yet; then (square problems, where sizes fit both
    orders) the order whose operands come from the same element types."""
    lf, rf = dot_info(ours)[:2]
    side = _merge_side(ours)
    ours_types = tuple(_origin_type(v) for v in ours.operands[:2])
    best = None
    for j, t in enumerate(theirs):
        if t.opcode != "dot":
            continue
        tl, tr = dot_info(t)[:2]
        t_types = tuple(_origin_type(v) for v in t.operands[:2])
        for swapped, (a, b) in ((False, (tl, tr)), (True, (tr, tl))):
            exact = a == lf and b == rf
            merged = (side == 0 and a == lf and b % rf == 0 and b > rf) or (
                side == 1 and b == rf and a % lf == 0 and a > lf
            )
            types = (t_types[::-1] if swapped else t_types) == ours_types
            score = (exact or merged, merged if side is not None else exact, j not in used, types)
            if score[0] and (best is None or score > best[0]):
                best = (score, j, swapped)
    return None if best is None else (best[1], best[2])


def compare_dot(ours, theirs, swapped):
    o = dot_info(ours)
    t = dot_info(theirs)
    t_l, t_r = (t[3], t[2]) if swapped else (t[2], t[3])
    t_side = {"L": "R", "R": "L", "B": "B"}[t[4]] if swapped else t[4]
    return [o[2] == t_l, o[3] == t_r, o[4] == t_side], (t_l, t_r, t_side)


def match_conv(ours, theirs, used):
    kind, tensors = ours_conv(ours)
    best = None
    for j, t in enumerate(theirs):
        if t.opcode != "custom-call":
            continue
        tk, tt = xla_conv(t)
        if tk != kind:
            continue
        same = sum(sorted(tensors[n][0].dims) == sorted(tt[n][0].dims) for n in tensors)
        score = (same, j not in used)
        if best is None or score > best[0]:
            best = (score, j)
    return None if best is None else best[1]


def forced_conv(op, xla_sigs):
    """Our (lhs, rhs, out) layouts that give XLA's role orders."""
    from hlopass.cost.layouts import conv_roles

    kind, roles = conv_roles(op)
    names = {"forward": ("input", "filter", "output"),
             "backward_filter": ("input", "output", "filter"),
             "backward_input": ("output", "filter", "input")}[kind]  # fmt: skip
    out = []
    for name, (n, c, sp), v in zip(names, roles, (*op.operands[:2], op.result), strict=True):
        shape = v.type.data
        order = []
        for letter in xla_sigs[name]:
            order += {"N": [n], "C": [c], "S": list(sp)}[letter]
        order = [d for d in range(shape.rank) if d not in order] + order
        out.append(tuple(reversed(order)))
    return tuple(out)


def forced_dot(op, lhs_kminor, rhs_kminor, side):
    from hlopass.passes.layout.rules import dot_output_groups, dot_sides

    sides = dot_sides(op)
    res = []
    for s, kminor in zip(sides, (lhs_kminor, rhs_kminor), strict=True):
        order = (
            [*s.batch, *s.free, *s.contracting] if kminor else [*s.batch, *s.contracting, *s.free]
        )
        res.append(tuple(reversed(order)))
    b, lf, rf = dot_output_groups(op)
    order = [*b, *rf, *lf] if side == "L" else [*b, *lf, *rf]
    res.append(tuple(reversed(order)))
    return tuple(res)
