"""The op-level differential grid: every elementwise, compare, convert and bitcast-convert op
over every element type and a table of special values, run three ways:

- XLA-CPU on the op with parameters (the reference);
- `hlopass.evaluate` on the same module;
- `constant-folding` of the op with constant operands, printed by hlopass and executed by
  XLA-CPU (so the folded value goes through our printer and XLA's parser).

One module per (element type, family) holds every op of the family as a tuple of results,
so the grid is a few dozen XLA compilations. A module XLA cannot compile is split into one
module per op, to name the op XLA rejects.

Comparison (`compare`): bit for bit, with two documented exceptions:
- NaN: any NaN equals any NaN. XLA does not define the sign or payload of a NaN an
  arithmetic op produces (it depends on the instruction sequence LLVM picks: x86 returns
  the first operand's payload, the "default NaN" is negative); NaN inputs that pass
  through bit operations (negate, abs, copy, select, bitcast-convert, convert between
  float types) are still compared bit for bit because `bitwise` ops are listed below.
- Transcendental ops (`ULP_BOUND`): XLA-CPU evaluates exp, log, tanh, sin, ... with its
  own polynomial approximations, not correctly rounded; the interpreter uses numpy's libm.
  Finite results may differ by at most `ULP_BOUND[op]` units in the last place of the
  result type, measured in the compute type; special results (inf, nan, zero and its
  sign, finite vs infinite) must agree exactly.
- bf16 maximum/minimum/clamp with a subnormal operand (`BF16_SUBNORMAL_SELECT`): two
  behaviours of XLA-CPU, chosen by the machine's ISA, are accepted, nothing else.
"""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np

from hlopass.ir.literal import numpy_dtype

FLOAT_TYPES = ("f16", "bf16", "f32", "f64", "f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz",
               "f8e5m2fnuz", "f8e4m3fnuz", "f8e4m3", "f8e3m4", "f4e2m1fn")  # fmt: skip
INT_TYPES = ("s2", "s4", "s8", "s16", "s32", "s64", "u2", "u4", "u8", "u16", "u32", "u64")
COMPLEX_TYPES = ("c64", "c128")
ALL_TYPES = ("pred",) + INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES

FLOAT_UNARY = ("abs", "negate", "sign", "ceil", "floor", "round-nearest-afz",
               "round-nearest-even", "exponential", "exponential-minus-one", "log",
               "log-plus-one", "logistic", "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan",
               "tanh", "erf", "copy")  # fmt: skip
COMPLEX_UNARY = ("negate", "sign", "exponential", "exponential-minus-one", "log",
                 "log-plus-one", "sqrt", "rsqrt", "sine", "cosine", "tan", "tanh", "copy")  # fmt: skip
INT_UNARY = ("abs", "negate", "sign", "not", "popcnt", "count-leading-zeros", "copy")
FLOAT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
                "power", "atan2")  # fmt: skip
COMPLEX_BINARY = ("add", "subtract", "multiply", "divide", "power")
INT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
              "power", "and", "or", "xor", "shift-left", "shift-right-logical",
              "shift-right-arithmetic")  # fmt: skip
PRED_BINARY = ("and", "or", "xor", "maximum", "minimum")
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")

# ULPs (of the result type, in its compute type) by which a finite result of a
# transcendental may differ from XLA-CPU's approximation.
ULP_BOUND = {"exponential": 4, "exponential-minus-one": 4, "log": 4, "log-plus-one": 4,
             "logistic": 4, "sqrt": 0, "rsqrt": 2, "cbrt": 4, "sine": 4, "cosine": 4, "tan": 8,
             "tanh": 8, "erf": 8, "power": 8, "atan2": 4}  # fmt: skip
# Complex transcendentals, multiply (XLA-CPU contracts it into FMAs) and divide (XLA's
# formula is not correctly rounded: (-1.5+1j)/(-1.5+1j) = 1+1.4e-8j in c64) are formulas of
# real ops: finite parts may differ by COMPLEX_REL relative to the larger part.
COMPLEX_REL = 1e-5
COMPLEX_FORMULAS = ("multiply", "divide")
# XLA does not define these bits across machines. Measured on one Intel Xeon (AVX512-BF16,
# AMX), jax/jaxlib 0.11.2, bf16 operands 9.18e-41 and 2.76e-40: with XLA-CPU's default ISA
# these ops compare with subnormals read as zero but return an operand's bits unflushed
# (max(9.18e-41, -0) = -0, min(0, 9.18e-41) = 9.18e-41), also with
# XLA_FLAGS=--xla_cpu_max_isa=AVX512_BF16 or AMX; with --xla_cpu_max_isa=AVX512_VNNI (or
# AVX512, AVX2, SSE4_2) on the same machine and jax, and
# with jax 0.10.2 on an AVX512-BF16 Xeon, they flush operands and result (max(9.18e-41, -0)
# = +0), which the interpreter reproduces. So for an element with a subnormal operand
# either is accepted: the same bits, or one operand's own bits whose value, subnormals
# read as zero, equals the flushed result. f32, f16 and f64 gave no such difference under
# any ISA and stay bit for bit, as does bf16 everywhere else.
BF16_SUBNORMAL_SELECT = ("maximum", "minimum", "clamp")


def special_values(et: str) -> np.ndarray:
    """The table of special values for one element type (its dtype)."""
    dt = numpy_dtype(et)
    if et == "pred":
        return np.array([False, True])
    if et[0] in "su":
        info = ml_dtypes.iinfo(dt)
        lo, hi, bits = int(info.min), int(info.max), info.bits
        vals = {0, 1, 2, 3, 7, hi, hi - 1, lo, lo + 1, bits, bits - 1, bits + 1, 63, 64, 100}
        if lo < 0:
            vals |= {-1, -2, -3, -7, -bits, -64}
        vals = sorted(v for v in vals if lo <= v <= hi)
        if dt == np.uint64:
            return np.array(vals, dtype=np.uint64)
        return np.array(vals, dtype=np.int64).astype(dt)
    if et in COMPLEX_TYPES:
        part = special_parts(np.float32 if et == "c64" else np.float64)
        re_, im = np.meshgrid(part, part)
        out = np.empty(re_.size, dt)
        out.real, out.imag = re_.ravel(), im.ravel()
        return out
    info = ml_dtypes.finfo(dt)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.0, -2.5, 3.0, 0.1, -7.0, 100.0,
            float(info.max), -float(info.max), float(info.tiny), -float(info.tiny),
            float(info.smallest_subnormal), -float(info.smallest_subnormal),
            math.inf, -math.inf, math.nan, 1e4, -1e-3]  # fmt: skip
    with np.errstate(all="ignore"):
        arr = np.array(vals, np.float64).astype(dt)
    # keep one of each bit pattern (narrow types round several values together)
    bits = arr.view(np.dtype(f"u{dt.itemsize}"))
    _, first = np.unique(bits, return_index=True)
    return arr[np.sort(first)]


def special_parts(dt) -> np.ndarray:
    info = np.finfo(dt)
    return np.array([0.0, -0.0, 1.0, -1.5, 2.0, float(info.smallest_subnormal), float(info.max),
                     math.inf, -math.inf, math.nan], dt)  # fmt: skip


@dataclasses.dataclass
class Case:
    """One XLA module: parameters of `et` and one result per op."""

    name: str
    et: str
    args: list[np.ndarray]
    ops: list[tuple[str, str, str]]  # (label, instruction text after '=', result type)

    def text(self, constants: bool = False) -> str:
        """The module; with `constants`, the parameters become constants (for folding)."""
        from hlopass.ir.literal import Literal, format_literal
        from hlopass.ir.shape import ArrayShape, default_layout

        lines = ["HloModule grid", "", "ENTRY e {"]
        for i, a in enumerate(self.args):
            ty = f"{self.et}[{a.size}]"
            if constants:
                shape = ArrayShape(self.et, (a.size,), (), default_layout(1))
                lines.append(f"  p{i} = {ty} constant({format_literal(Literal(a), shape)})")
            else:
                lines.append(f"  p{i} = {ty} parameter({i})")
        names = []
        for k, (_label, body, _ty) in enumerate(self.ops):
            names.append(f"r{k}")
            lines.append(f"  r{k} = {body}")
        tys = ", ".join(ty for _, _, ty in self.ops)
        lines.append(f"  ROOT t = ({tys}) tuple({', '.join(names)})")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def split(self) -> list[Case]:
        return [Case(f"{self.name}/{op[0]}", self.et, self.args, [op]) for op in self.ops]


def _pairs(vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.meshgrid(np.arange(vals.size), np.arange(vals.size))
    return vals[i.ravel()], vals[j.ravel()]


def _result_type(et: str, opcode: str) -> str:
    if et in COMPLEX_TYPES and opcode in ("abs", "real", "imag"):
        return "f32" if et == "c64" else "f64"
    return et


def cases(types: tuple[str, ...] = ALL_TYPES) -> list[Case]:
    out = []
    for et in types:
        vals = special_values(et)
        n = vals.size
        if et == "pred":
            unary, binary = ("not", "copy"), PRED_BINARY
        elif et[0] in "su":
            unary, binary = INT_UNARY, INT_BINARY
        elif et in COMPLEX_TYPES:
            unary, binary = COMPLEX_UNARY + ("abs", "real", "imag"), COMPLEX_BINARY
        else:
            unary, binary = FLOAT_UNARY + ("is-finite",), FLOAT_BINARY
        ops = []
        for code in unary:
            ty = "pred" if code == "is-finite" else _result_type(et, code)
            ops.append((code, f"{ty}[{n}] {code}(p0)", f"{ty}[{n}]"))
        out.append(Case(f"{et}/unary", et, [vals], ops))
        a, b = _pairs(vals)
        m = a.size
        ops = [(code, f"{et}[{m}] {code}(p0, p1)", f"{et}[{m}]") for code in binary]
        for d in DIRECTIONS:
            ops.append((f"compare-{d}", f"pred[{m}] compare(p0, p1), direction={d}", f"pred[{m}]"))
            if et in FLOAT_TYPES:
                ops.append((f"compare-{d}-TOTALORDER",
                            f"pred[{m}] compare(p0, p1), direction={d}, type=TOTALORDER",
                            f"pred[{m}]"))  # fmt: skip
        ops.append(("select", f"{et}[{m}] select(r0, p0, p1)", f"{et}[{m}]"))
        if et in ("f32", "f64"):
            c = "c64" if et == "f32" else "c128"
            ops.append(("complex", f"{c}[{m}] complex(p0, p1)", f"{c}[{m}]"))
        if et not in COMPLEX_TYPES:
            ops.append(("clamp", f"{et}[{m}] clamp(p0, p1, p0)", f"{et}[{m}]"))
        out.append(_with_select(Case(f"{et}/binary", et, [a, b], ops)))
        out.append(_converts(et, vals))
        out.append(_bitcasts(et, vals))
    return [c for c in out if c.ops]


def _with_select(case: Case) -> Case:
    """Put first the pred that `select(r0, p0, p1)` reads (p0 < p1, or == for complex)."""
    m = case.args[0].size
    if case.et in COMPLEX_TYPES:
        pre = f"pred[{m}] compare(p0, p1), direction=EQ"
    elif case.et in FLOAT_TYPES:
        pre = f"pred[{m}] compare(p0, p1), direction=LT, type=TOTALORDER"
    else:
        pre = f"pred[{m}] compare(p0, p1), direction=LT"
    case.ops = [("select-pred", pre, f"pred[{m}]")] + case.ops
    return case


def _converts(et: str, vals: np.ndarray) -> Case:
    n = vals.size
    ops = []
    for dst in ALL_TYPES:
        if dst == et:
            continue
        if et in COMPLEX_TYPES and dst not in COMPLEX_TYPES:
            continue  # XLA's verifier: complex converts only to complex
        ops.append((f"convert-{dst}", f"{dst}[{n}] convert(p0)", f"{dst}[{n}]"))
    return Case(f"{et}/convert", et, [vals], ops)


def _bits(et: str) -> int:
    if et == "pred":
        return 8
    dt = numpy_dtype(et)
    if et[0] in "su":
        return int(ml_dtypes.iinfo(dt).bits)
    if et.startswith("f4"):
        return 4
    return dt.itemsize * 8


def _bitcasts(et: str, vals: np.ndarray) -> Case:
    n = vals.size
    ops = []
    if et == "pred":
        return Case(f"{et}/bitcast", et, [vals], [])
    for dst in ALL_TYPES:
        if dst in (et, "pred") or _bits(dst) != _bits(et):
            continue
        ops.append((f"bitcast-convert-{dst}", f"{dst}[{n}] bitcast-convert(p0)", f"{dst}[{n}]"))
    return Case(f"{et}/bitcast", et, [vals], ops)


# --- comparison -------------------------------------------------------------------------


def _opcode(label: str) -> str:
    return label.split("-")[0] if label.startswith("compare-") else label


def _float_bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}"))


def _ulp_diff(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in ULPs of the element type (both finite, same sign handled)."""
    g, w = _ordered(got), _ordered(want)
    if got.dtype.itemsize == 8:  # int64 differences may overflow
        return np.abs(g.astype(object) - w.astype(object)).astype(np.float64)
    return np.abs(g - w).astype(np.float64)


def _ordered(x: np.ndarray) -> np.ndarray:
    nbits = x.dtype.itemsize * 8
    b = np.ascontiguousarray(x).view(np.dtype(f"i{x.dtype.itemsize}")).astype(np.int64)
    mag = (1 << (nbits - 1)) - 1
    return np.where(b < 0, -(b & mag), b)


def mismatches(
    label: str, got: np.ndarray, want: np.ndarray, args: list[np.ndarray] | None = None
) -> np.ndarray:
    """Indices where `got` is not XLA's `want` under the rules of the module docstring
    (`args`: the op's operands, elementwise, for `BF16_SUBNORMAL_SELECT`)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return np.arange(max(want.size, 1))
    dt = got.dtype
    if dt == ml_dtypes.bfloat16 and label in BF16_SUBNORMAL_SELECT and args:
        bad = np.flatnonzero(_float_mismatch(label, got, want))
        return bad[~_isa_select(got, want, args)[bad]]
    if dt.kind in "biu" or (dt.kind == "V" and not _is_float(dt)):
        return np.flatnonzero(_raw(got) != _raw(want))
    if dt.kind == "c":
        part = np.float32 if dt == np.complex64 else np.float64
        g = np.stack([got.real, got.imag]).astype(part)
        w = np.stack([want.real, want.imag]).astype(part)
        bad = _float_mismatch(label, g, w, complex_=True)
        return np.flatnonzero(bad.any(axis=0))
    return np.flatnonzero(_float_mismatch(label, got, want))


def _isa_select(got: np.ndarray, want: np.ndarray, args: list[np.ndarray]) -> np.ndarray:
    """Elements where XLA's `want` is the unflushed form of the flushed `got`: an operand
    is subnormal, `want` has one operand's bits, and read with subnormals as zero it equals
    `got` (+0 == -0)."""
    ops = [np.asarray(a).reshape(-1) for a in args]
    sub = np.zeros(want.size, bool)
    operand = np.zeros(want.size, bool)
    for a in ops:
        a64 = a.astype(np.float64)
        sub |= (a64 != 0) & (np.abs(a64) < float(ml_dtypes.finfo(a.dtype).tiny))
        operand |= _raw(a) == _raw(want.reshape(-1))
    same = _daz(want.reshape(-1)) == _daz(got.reshape(-1))
    return sub & operand & same


def _daz(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return np.where(np.abs(x64) < float(ml_dtypes.finfo(x.dtype).tiny), 0.0, x64)


def _raw(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    if x.dtype.itemsize == 1:
        return x.view(np.uint8)
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _is_float(dt: np.dtype) -> bool:
    try:
        ml_dtypes.finfo(dt)
    except (ValueError, TypeError):
        return False
    return True


def _float_mismatch(label: str, got: np.ndarray, want: np.ndarray, complex_=False) -> np.ndarray:
    g64 = got.astype(np.float64)
    w64 = want.astype(np.float64)
    gn, wn = np.isnan(g64), np.isnan(w64)
    same_bits = _raw(got) == _raw(want)
    bad = ~(same_bits | (gn & wn))
    op = _opcode(label)
    bound = ULP_BOUND.get(op)
    if complex_ and op in COMPLEX_FORMULAS:
        bound = 0
    if bound is None or not bad.any():
        return bad
    # transcendental: finite, nonzero, same-signed results may differ by the bound
    fin = np.isfinite(g64) & np.isfinite(w64) & (g64 != 0) & (w64 != 0)
    fin &= np.signbit(g64) == np.signbit(w64)
    if complex_:
        scale = np.maximum(np.abs(w64).max(axis=0, keepdims=True), np.finfo(np.float64).tiny)
        with np.errstate(invalid="ignore"):  # inf - inf: not close
            close = np.abs(g64 - w64) <= COMPLEX_REL * scale
        ok = (np.isfinite(g64) & np.isfinite(w64) & close) | ~bad
        return ~ok
    compute = got.astype(np.float32) if got.dtype.itemsize < 4 else got
    compute_w = want.astype(compute.dtype)
    ulps = _ulp_diff(compute, compute_w)
    scale = 1.0
    if got.dtype.itemsize < 4:  # narrow result: rounding after an f32 approximation
        scale = 2.0 ** (24 - (ml_dtypes.finfo(got.dtype).nmant + 1))
    return bad & ~(fin & (ulps <= bound * scale + 0.5 * scale))


# --- running the grid -------------------------------------------------------------------


@dataclasses.dataclass
class Finding:
    case: str
    op: str
    path: str  # "interpreter" | "folding" | "xla"
    count: int
    detail: str


def _fold(text: str) -> tuple[str, list[str]]:
    """constant-folding of the constant module, printed; and the ops left unfolded."""
    import hlopass
    from hlopass.dialects.hlo import entry_computation
    from hlopass.pipeline import run_pipeline

    module = hlopass.parse_hlo(text)
    run_pipeline(module, "constant-folding")
    root = entry_computation(module).root
    left = [o.owner.inst_name for o in root.operands if o.owner.opcode != "constant"]
    return hlopass.print_hlo(module), left


def _interpret(case: Case) -> list[np.ndarray] | str:
    import hlopass

    try:
        return hlopass.evaluate(hlopass.parse_hlo(case.text()), *case.args)
    except Exception as e:  # reported as a finding, not raised: the grid goes on
        return f"{type(e).__name__}: {str(e)[:200]}"


def _unprintable(args: list[np.ndarray]) -> np.ndarray:
    """Elements with a complex input whose real part is NaN and imaginary part is not: XLA's
    parser (and ours, to agree) reads `(nan, x)` as (nan, nan), so the folding path never
    sees these inputs."""
    out = np.zeros(args[0].size, bool)
    for a in args:
        if a.dtype.kind == "c":
            out |= np.isnan(a.real) & ~np.isnan(a.imag)
    return out


def _example(case: Case, k: int, idx: np.ndarray, got, want) -> str:
    i = int(idx[0])
    ins = ", ".join(repr(a.reshape(-1)[i]) for a in case.args)
    g = np.asarray(got).reshape(-1)[i] if np.asarray(got).size > i else None
    w = np.asarray(want).reshape(-1)[i]
    return f"({ins}) -> {g!r}, XLA {w!r}"


def run_grid(grid: list[Case], timeout: float = 1800) -> tuple[list[Finding], int]:
    """Every case on XLA-CPU, the interpreter and the folder; (findings, elements compared)."""
    from tests.interp_util import _enable_x64, xla_execute_many

    _enable_x64()
    findings: list[Finding] = []
    xla = xla_execute_many([(c.text(), c.args) for c in grid], timeout)
    # a case XLA cannot compile: one module per op, to find the op(s) XLA rejects
    todo: list[Case] = []
    for case, res in zip(grid, xla, strict=True):
        if "outputs" in res:
            todo.append(case)
            continue
        singles = case.split()
        for single, r in zip(singles, xla_execute_many([(s.text(), s.args) for s in singles],
                                                       timeout), strict=True):  # fmt: skip
            if "outputs" in r:
                todo.append(single)
                res_single = r
                single.reference = res_single["outputs"]  # type: ignore[attr-defined]
            else:
                why = r.get("error") or r.get("crash") or "?"
                findings.append(Finding(case.name, single.ops[0][0], "xla", 0, str(why)[:160]))
        case.reference = None  # type: ignore[attr-defined]
    for case, res in zip(grid, xla, strict=True):
        if "outputs" in res:
            case.reference = res["outputs"]  # type: ignore[attr-defined]
    folded = []
    for case in todo:
        try:
            text, left = _fold(case.text(constants=True))
        except Exception as e:
            text, left = None, [f"{type(e).__name__}: {str(e)[:160]}"]
        unfolded = set()
        for name in left:
            k = int(name[1:]) if name[1:].isdigit() else None
            op = case.ops[k][0] if k is not None else name
            unfolded.add(op)
            findings.append(Finding(case.name, op, "folding", 0, "not folded"))
        case.unfolded = unfolded  # type: ignore[attr-defined]
        folded.append(text)
    fold_runs = xla_execute_many([(t, []) for t in folded if t is not None], timeout)
    fold_iter = iter(fold_runs)
    compared = 0
    for case, text in zip(todo, folded, strict=True):
        want = case.reference  # type: ignore[attr-defined]
        got_i = _interpret(case)
        got_f = next(fold_iter) if text is not None else {"error": "folding failed"}
        if isinstance(got_i, str):
            findings.append(Finding(case.name, "*", "interpreter", 0, got_i))
        if "outputs" not in got_f:
            why = got_f.get("error") or got_f.get("crash")
            findings.append(Finding(case.name, "*", "folding", 0, f"XLA on folded: {why}"))
        for k, (label, _body, _ty) in enumerate(case.ops):
            compared += np.asarray(want[k]).size
            for path, got in (("interpreter", got_i), ("folding", got_f.get("outputs"))):
                if got is None or isinstance(got, str):
                    continue
                if path == "folding" and label in case.unfolded:  # type: ignore[attr-defined]
                    continue  # XLA computed it itself (from its reading of the constants)
                bad = mismatches(label, got[k], want[k], case.args)
                if path == "folding" and bad.size:  # inputs the constant's text cannot hold
                    bad = bad[~_unprintable(case.args)[bad]]
                if bad.size:
                    findings.append(Finding(case.name, label, path, int(bad.size),
                                            _example(case, k, bad, got[k], want[k])))  # fmt: skip
    return findings, compared
