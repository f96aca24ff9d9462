"""Random instances of the algsimp rewrites with many geometric cases (issue 18, part B):
convolution operand swap (windows with stride, padding, dilations, reversal, any dim
labels), depthwise convolution to multiply, gather of a pad or of a reshape of a pad, add
of scatters, and dots with transposes, each run on XLA-CPU before and after `algsimp` and
compared exactly.

The lit cases check one instance of each; these draw a few dozen (fixed seeds, so a
failure reproduces) and require that the rewrite fired in most of them, so the test cannot
pass by never rewriting. Integer element types make every sum exact, so the comparison is
bit for bit; the float dot cases check that moving a transpose through a dot keeps XLA-CPU's
rounding (the same products summed in the same order).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from hlopass.dialects.hlo import entry_computation
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape
from hlopass.passes.algsimp import AlgebraicSimplifierPass
from hlopass.text.importer import parse_hlo
from hlopass.text.xdsl_io import context
from tests.interp_util import xla_execute_many
from tests.test_algsimp_families import special_values


def _dims(shape: list[int]) -> str:
    return ",".join(map(str, shape))


def _conv_case(rng: random.Random) -> str:
    """A convolution whose window is often larger than its input."""
    n_sp = rng.choice([1, 2])
    sp = [str(d) for d in range(n_sp)]
    lhs, rhs, out = (
        rng.sample(s, len(s)) for s in (["b", "f", *sp], ["i", "o", *sp], ["b", "f", *sp])
    )
    b, f, o = rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 2)
    size, n, parts, out_sp = [], [], [], []
    for _ in range(n_sp):
        while True:
            k, m = rng.randint(1, 4), rng.randint(1, 3)
            s, ld, rd = rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 2)
            pl, ph = rng.randint(0, 3), rng.randint(0, 3)
            span = 1 + (m - 1) * ld + pl + ph - (1 + (k - 1) * rd)
            if span >= 0:
                break
        size.append(k)
        n.append(m)
        out_sp.append(span // s + 1)
        parts.append((s, pl, ph, ld, rd, rng.random() < 0.3))
    dims_of = {"b": b, "f": f, "i": f, "o": o}
    x = [dims_of[c] if c in "bf" else n[int(c)] for c in lhs]
    k = [dims_of[c] if c in "io" else size[int(c)] for c in rhs]
    y = [(b if c == "b" else o) if c in "bf" else out_sp[int(c)] for c in out]
    window = "size=" + "x".join(map(str, size))
    window += " stride=" + "x".join(str(p[0]) for p in parts)
    window += " pad=" + "x".join(f"{p[1]}_{p[2]}" for p in parts)
    window += " lhs_dilate=" + "x".join(str(p[3]) for p in parts)
    window += " rhs_dilate=" + "x".join(str(p[4]) for p in parts)
    window += " rhs_reversal=" + "x".join(str(int(p[5])) for p in parts)
    labels = f"{''.join(lhs)}_{''.join(rhs)}->{''.join(out)}"
    return f"""HloModule conv
ENTRY conv {{
  x = s32[{_dims(x)}] parameter(0)
  k = s32[{_dims(k)}] parameter(1)
  ROOT c = s32[{_dims(y)}] convolution(x, k), window={{{window}}}, dim_labels={labels}
}}
"""


def _depthwise_case(rng: random.Random) -> str:
    """A depthwise convolution (one feature per group) whose window is 1 or the whole input
    in each spatial dim (sometimes reversed, strided or padded: then it must stay)."""
    n_sp = rng.choice([1, 2])
    sp = [str(d) for d in range(n_sp)]
    lhs, rhs, out = (
        rng.sample(s, len(s)) for s in (["b", "f", *sp], ["i", "o", *sp], ["b", "f", *sp])
    )
    b, g = rng.randint(1, 3), rng.randint(1, 3)
    n = [rng.randint(1, 4) for _ in sp]
    size = [rng.choice([1, m]) for m in n]
    odd = rng.random() < 0.2
    window = "size=" + "x".join(map(str, size))
    if odd:
        window += " rhs_reversal=" + "x".join("1" for _ in sp)
    dims_of = {"b": b, "f": g, "i": 1, "o": g}
    x = [dims_of[c] if c in "bf" else n[int(c)] for c in lhs]
    k = [dims_of[c] if c in "io" else size[int(c)] for c in rhs]
    y = [dims_of[c] if c in "bf" else n[int(c)] - size[int(c)] + 1 for c in out]
    labels = f"{''.join(lhs)}_{''.join(rhs)}->{''.join(out)}"
    return f"""HloModule depthwise
ENTRY depthwise {{
  x = s32[{_dims(x)}] parameter(0)
  k = s32[{_dims(k)}] parameter(1)
  ROOT c = s32[{_dims(y)}] convolution(x, k), window={{{window}}}, dim_labels={labels}, feature_group_count={g}
}}
"""


def _gather_of_pad_case(rng: random.Random) -> str:
    """A gather indexing dim 0 of a pad, taking the other dims whole (padded or not; dim 0
    sometimes padded too: then the rewrite must not fire)."""
    rank = rng.choice([2, 3])
    x = [rng.randint(1, 4) for _ in range(rank)]
    pads = []
    for d in range(rank):
        if rng.random() < (0.2 if d == 0 else 0.6):
            # (a negative edge only on dim 0: elsewhere algsimp first turns it into a slice
            # of the pad, XLA's negative-padding replacement, and GatherOfPad sees no pad)
            low = -1 if d == 0 else 0
            lo, hi, it = rng.randint(low, 2), rng.randint(low, 2), rng.randint(0, 1)
            if x[d] + (x[d] - 1) * it + lo + hi < 1:
                lo = hi = 0
            pads.append((lo, hi, it))
        else:
            pads.append((0, 0, 0))
    p = [x[d] + (x[d] - 1) * it + lo + hi for d, (lo, hi, it) in enumerate(pads)]
    nidx = rng.randint(1, 4)
    sizes = [1] + p[1:]
    return f"""HloModule gather_of_pad
ENTRY gather_of_pad {{
  x = s32[{_dims(x)}] parameter(0)
  v = s32[] parameter(1)
  p = s32[{_dims(p)}] pad(x, v), padding={"x".join(f"{a}_{b}_{c}" for a, b, c in pads)}
  i = s32[{nidx},1] parameter(2)
  ROOT g = s32[{_dims([nidx, *p[1:]])}] gather(p, i), offset_dims={{{_dims(list(range(1, rank)))}}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{{_dims(sizes)}}}
}}
"""


def _gather_of_reshape_of_pad_case(rng: random.Random) -> str:
    """A gather indexing dim 0 of a reshape (merging or splitting the leading dims, or not)
    of a pad of the last dim (the rewrite needs the reshape to keep that dim as it is)."""
    lead = [rng.randint(1, 3) for _ in range(rng.choice([1, 2]))]
    last = rng.randint(1, 4)
    lo, hi, it = rng.randint(-1, 2), rng.randint(0, 2), rng.randint(0, 1)
    padded = last + (last - 1) * it + lo + hi
    x, p = [*lead, last], [*lead, padded]
    merged = 1
    for d in lead:
        merged *= d
    r = rng.choice([[merged, padded], [*lead, padded], [merged * padded], [merged, 1, padded]])
    if len(r) == 1 and rng.random() < 0.5:
        r = [merged, padded]
    rank = len(r)
    sizes = [1, *r[1:]]
    out = [3, *r[1:]]
    return f"""HloModule gather_of_reshape_of_pad
ENTRY gather_of_reshape_of_pad {{
  x = s32[{_dims(x)}] parameter(0)
  v = s32[] parameter(1)
  p = s32[{_dims(p)}] pad(x, v), padding={"x".join(["0_0"] * len(lead) + [f"{lo}_{hi}_{it}"])}
  r = s32[{_dims(r)}] reshape(p)
  i = s32[3,1] parameter(2)
  ROOT g = s32[{_dims(out)}] gather(r, i), offset_dims={{{_dims(list(range(1, rank)))}}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{{_dims(sizes)}}}
}}
"""


def _scatters_case(rng: random.Random) -> str:
    """add(scatter, scatter) or add(x, scatter) of row windows of a [4, n] array."""
    n = rng.randint(2, 6)
    rows = [rng.randint(1, 2), rng.randint(1, 2)]
    flags = ["", ", indices_are_sorted=true", ", unique_indices=true"]
    comp = "add { a = s32[] parameter(0)\n b = s32[] parameter(1)\n ROOT c = s32[] add(a, b) }"
    lines, names = [], []
    for k, r in enumerate(rows):
        if k == 1 and rng.random() < 0.3:
            names.append("y")
            continue
        dn = "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}"
        lines.append(f"  i{k} = s32[{r},1] parameter({2 + 2 * k})")
        lines.append(f"  up{k} = s32[{r},{n}] parameter({3 + 2 * k})")
        lines.append(f"  s{k}x = s32[4,{n}] scatter({'xy'[k]}, i{k}, up{k}), {dn}, "
                     f"index_vector_dim=1{rng.choice(flags)}, to_apply=add")  # fmt: skip
        names.append(f"s{k}x")
    body = "\n".join(lines)
    return f"""HloModule scatters
{comp}
ENTRY scatters {{
  x = s32[4,{n}] parameter(0)
  y = s32[4,{n}] parameter(1)
{body}
  ROOT r = s32[4,{n}] add({names[0]}, {names[1]})
}}
"""


def _dot_case(rng: random.Random) -> str:
    """A batch dot of (sometimes) transposed operands, (sometimes) transposed after."""
    t = rng.choice(["s32", "f32"])
    nb = rng.choice([1, 2])
    batch = [rng.randint(1, 3) for _ in range(nb)]
    m, k, n = rng.randint(1, 4), rng.randint(1, 5), rng.randint(1, 4)
    r = nb + 2
    bperm = rng.sample(range(nb), nb)
    last = rng.choice([(r - 2, r - 1), (r - 1, r - 2)])
    perm = (*bperm, *last)
    inv = [perm.index(d) for d in range(r)]
    a_t, b_t = [*batch, m, k], [*batch, k, n]
    a0 = [a_t[inv[d]] for d in range(r)]  # transpose(a0, perm) has shape a_t
    b0 = [b_t[inv[d]] for d in range(r)]
    bd = _dims(list(range(nb)))
    dot = (f"dot(ta, tb), lhs_batch_dims={{{bd}}}, rhs_batch_dims={{{bd}}}, "
           f"lhs_contracting_dims={{{r - 1}}}, rhs_contracting_dims={{{r - 2}}}")  # fmt: skip
    out = [*batch, m, n]
    tail = ""
    if rng.random() < 0.5:
        operm = (*rng.sample(range(nb), nb), r - 1, r - 2)
        tail = f"\n  ROOT t = {t}[{_dims([out[p] for p in operm])}] transpose(d), dimensions={{{_dims(list(operm))}}}"
    root = "" if tail else "ROOT "
    return f"""HloModule dots
ENTRY dots {{
  a = {t}[{_dims(a0)}] parameter(0)
  b = {t}[{_dims(b0)}] parameter(1)
  ta = {t}[{_dims(a_t)}] transpose(a), dimensions={{{_dims(list(perm))}}}
  tb = {t}[{_dims(b_t)}] transpose(b), dimensions={{{_dims(list(perm))}}}
  {root}d = {t}[{_dims(out)}] {dot}{tail}
}}
"""


def _args(text: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Arguments: indices in and out of range (the gathers and scatters clamp or drop),
    other values mixed with the type's special values."""
    module = parse_hlo(text, "case")
    out = []
    for k, p in enumerate(entry_computation(module).parameters()):
        s = p.shape
        assert isinstance(s, ArrayShape)
        if p.inst_name.startswith("i"):
            out.append(rng.integers(-2, 7, size=s.dims).astype(numpy_dtype(s.element_type)))
        else:
            out.append(special_values(s, k + int(rng.integers(0, 5))))
    return out


def _check(make, pattern: str, seed: int, count: int, least: int) -> None:
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    jobs, texts, fired_cases = [], [], 0
    for _ in range(count):
        text = make(rng)
        module = parse_hlo(text, "case")
        fired: set[str] = set()
        AlgebraicSimplifierPass().run(context(), module, lambda name, _w, f=fired: f.add(name))
        module.verify()
        if pattern not in fired:
            continue
        fired_cases += 1
        from hlopass.text.exporter import print_hlo

        after = print_hlo(module)
        args = _args(text, nrng)
        jobs += [(text, args), (after, args)]
        texts.append(after)
    assert fired_cases >= least, f"{pattern} fired in only {fired_cases} of {count} cases"
    results = xla_execute_many(jobs)
    for c in range(len(texts)):
        want, got = results[2 * c], results[2 * c + 1]
        assert "outputs" in want, f"XLA-CPU cannot run the input {jobs[2 * c][0]}: {want}"
        assert "outputs" in got, f"XLA-CPU cannot run the output {texts[c]}: {got}"
        for g, w in zip(got["outputs"], want["outputs"], strict=True):
            g, w = np.asarray(g), np.asarray(w)
            same = g.tobytes() == w.tobytes() or (
                g.dtype.kind == "f" and np.array_equal(g, w, equal_nan=True)
            )
            assert same, f"{jobs[2 * c][0]}\n{texts[c]}\nargs {jobs[2 * c][1]}\ngot {g}\nwant {w}"


@pytest.mark.parametrize(
    "make,pattern,count,least",
    [
        (_conv_case, "ConvolutionOperandSwap", 120, 15),
        (_depthwise_case, "ConvolutionToMultiply", 40, 15),
        (_gather_of_pad_case, "GatherOfPad", 40, 15),
        (_gather_of_reshape_of_pad_case, "GatherOfReshapeOfPad", 40, 10),
        (_scatters_case, "AddOfScatters", 40, 10),
        (_scatters_case, "AddOfScatter", 40, 5),
        (_dot_case, "DotOfBatchTransposes", 40, 12),
        (_dot_case, "TransposeOfDot", 40, 10),
    ],
    ids=[
        "conv-swap",
        "conv-to-multiply",
        "gather-of-pad",
        "gather-of-reshape-of-pad",
        "add-of-scatters",
        "add-of-scatter",
        "dot-transposes",
        "transpose-of-dot",
    ],  # fmt: skip
)
def test_random_rewrites_keep_xla_cpu_values(make, pattern, count, least, xla) -> None:
    _check(make, pattern, seed=18, count=count, least=least)
