"""Hypothesis strategies: random *valid* HLO modules as text.

`hlo_modules()` draws a module with an ENTRY computation built from a random program over
a pool of values: parameters (random shapes, element types and layouts), elementwise
unary/binary ops, compare/select, convert, broadcast, reshape, transpose, slice,
concatenate, reduce (with a reducer computation), dot, tuple/get-tuple-element, call (to
a randomly generated computation), while (counter loop), constants, and `metadata` on
some instructions. Shapes follow XLA's rules so XLA's verifier would accept the module;
the text uses either print style (typed operands or not, `%` names or not).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

FLOAT_TYPES = ("f32", "bf16", "f16", "f64")
INT_TYPES = ("s32", "s8", "u8", "s64", "u32")
ELEMENT_TYPES = FLOAT_TYPES + INT_TYPES + ("pred",)

UNARY_FLOAT = ("negate", "abs", "exponential", "tanh", "sqrt", "floor", "sine", "log")
UNARY_INT = ("negate", "abs", "not", "popcnt")
BINARY_NUM = ("add", "multiply", "subtract", "maximum", "minimum")
BINARY_INT_EXTRA = ("and", "or", "xor")
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")

FLOAT_CONSTANTS = (
    "0",
    "1",
    "-2.5",
    "0.1",
    "3",
    "6e+04",
    "-0.0",  # (`-0` means +0 to XLA's parser, -0.0 to ours: the one intended difference)
    "inf",
    "-inf",
    "nan",
    "0.33333",
    "1e-07",
)
INT_CONSTANTS = ("0", "1", "7", "42", "100")


@dataclass(frozen=True)
class Arr:
    et: str
    dims: tuple[int, ...]
    m2m: tuple[int, ...] | None = None  # None: the default (descending) layout

    @property
    def rank(self) -> int:
        return len(self.dims)

    def text(self, layout: bool = True) -> str:
        s = f"{self.et}[{','.join(map(str, self.dims))}]"
        if layout and self.m2m is not None:
            s += "{" + ",".join(map(str, self.m2m)) + "}"
        return s

    def same_kind(self, other: Arr) -> bool:
        return self.et == other.et and self.dims == other.dims


@dataclass(frozen=True)
class Tup:
    elements: tuple[Shape, ...]

    def text(self, layout: bool = True) -> str:
        return "(" + ", ".join(e.text(layout) for e in self.elements) + ")"


Shape = Arr | Tup


@dataclass
class Comp:
    name: str
    param_shapes: list[Shape]
    lines: list[str] = field(default_factory=list)
    values: list[tuple[str, Shape]] = field(default_factory=list)
    root_shape: Shape | None = None


class ModuleBuilder:
    """Grows a module's text; `draw` is hypothesis's draw function."""

    def __init__(self, draw, percent: bool, typed: bool):
        self.draw = draw
        self.pct = "%" if percent else ""
        self.typed = typed
        self.helpers: list[str] = []  # computations printed before the entry
        self.reducers: dict[str, str] = {}
        self.counter = 0

    # --- helpers -------------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}.{self.counter}"

    def layout(self, rank: int) -> tuple[int, ...] | None:
        if rank == 0:
            return None  # XLA's parser rejects `f32[]{}`
        if self.draw(st.booleans()):
            return None
        return tuple(self.draw(st.permutations(range(rank))))

    def array(self, et: str | None = None, dims: tuple[int, ...] | None = None) -> Arr:
        if et is None:
            et = self.draw(st.sampled_from(ELEMENT_TYPES))
        if dims is None:
            rank = self.draw(st.integers(0, 3))
            dims = tuple(self.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
        return Arr(et, dims, self.layout(len(dims)))

    def metadata(self) -> str:
        if self.draw(st.integers(0, 4)) != 0:
            return ""
        op_type = self.draw(st.sampled_from(["Add", "MatMul", "Relu", 'we"ird']))
        op_name = self.draw(st.sampled_from(["jit(f)/add", "a/b/c", "x y", ""]))
        esc = op_type.replace('"', '\\"')
        line = self.draw(st.integers(0, 500))
        fields = [f'op_type="{esc}"', f'op_name="{op_name}"', 'source_file="t.py"',
                  f"source_line={line}"]  # fmt: skip
        fields = self.draw(st.permutations(fields))[: self.draw(st.integers(1, 4))]
        return ", metadata={" + " ".join(fields) + "}"

    def operand(self, name: str, shape: Shape) -> str:
        return (shape.text() + " " if self.typed else "") + self.pct + name

    def emit(self, comp: Comp, shape: Shape, opcode: str, operands: list[tuple[str, Shape]],
             attrs: str = "", base: str | None = None) -> tuple[str, Shape]:  # fmt: skip
        name = self.fresh(base or opcode)
        ops = ", ".join(self.operand(n, s) for n, s in operands)
        comp.lines.append(
            f"{self.pct}{name} = {shape.text()} {opcode}({ops}){attrs}{self.metadata()}"
        )
        comp.values.append((name, shape))
        return name, shape

    def constant(self, comp: Comp, shape: Arr) -> tuple[str, Shape]:
        pool = (
            FLOAT_CONSTANTS if shape.et in FLOAT_TYPES
            else ("true", "false") if shape.et == "pred" else INT_CONSTANTS
        )  # fmt: skip
        if shape.et.startswith("u"):
            pool = INT_CONSTANTS
        n = 1
        for d in shape.dims:
            n *= d
        vals = [self.draw(st.sampled_from(pool)) for _ in range(n)]

        def nest(level: int, flat: list[str]) -> str:
            if level == shape.rank:
                return flat[0]
            step = len(flat) // shape.dims[level]
            return "{" + ", ".join(
                nest(level + 1, flat[i * step : (i + 1) * step]) for i in range(shape.dims[level])
            ) + "}"  # fmt: skip

        name = self.fresh("constant")
        comp.lines.append(f"{self.pct}{name} = {shape.text()} constant({nest(0, vals)})")
        comp.values.append((name, shape))
        return name, shape

    def pick(self, comp: Comp, pred=lambda s: True) -> tuple[str, Shape] | None:
        candidates = [v for v in comp.values if pred(v[1])]
        if not candidates:
            return None
        return self.draw(st.sampled_from(candidates))

    def pick_array(self, comp: Comp, pred=lambda s: True) -> tuple[str, Arr] | None:
        return self.pick(comp, lambda s: isinstance(s, Arr) and pred(s))  # type: ignore[return-value]

    def reducer(self, et: str) -> str:
        if et not in self.reducers:
            name = self.fresh(f"reducer_{et}")
            op = "or" if et == "pred" else self.draw(st.sampled_from(["add", "maximum"]))
            p = self.pct
            self.helpers.append(
                f"{p}{name} (x: {et}[], y: {et}[]) -> {et}[] {{\n"
                f"  {p}x = {et}[] parameter(0)\n  {p}y = {et}[] parameter(1)\n"
                f"  ROOT {p}r = {et}[] {op}({p}x, {p}y)\n}}\n"
            )
            self.reducers[et] = name
        return self.reducers[et]

    # --- instructions -----------------------------------------------------------------------

    def step(self, comp: Comp, depth: int) -> None:
        kinds = ["unary", "binary", "compare", "select", "convert", "broadcast", "reshape",
                 "transpose", "slice", "concatenate", "reduce", "dot", "tuple", "constant"]  # fmt: skip
        if depth < 1:
            kinds += ["call", "while"]
        kind = self.draw(st.sampled_from(kinds))
        getattr(self, "op_" + kind)(comp, depth)

    def op_constant(self, comp: Comp, depth: int) -> None:
        rank = self.draw(st.integers(0, 2))
        dims = tuple(self.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
        self.constant(comp, self.array(dims=dims))

    def op_unary(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp, lambda s: s.et != "pred")
        if v is None:
            return
        name, s = v
        if s.et in FLOAT_TYPES:
            opcode = self.draw(st.sampled_from(UNARY_FLOAT))
        else:
            opcode = self.draw(st.sampled_from(UNARY_INT))
        self.emit(comp, Arr(s.et, s.dims, self.layout(s.rank)), opcode, [v])

    def same_pair(self, comp: Comp, pred=lambda s: True):
        a = self.pick_array(comp, pred)
        if a is None:
            return None
        b = self.pick_array(comp, lambda s: s.same_kind(a[1]))
        return a, b

    def op_binary(self, comp: Comp, depth: int) -> None:
        pair = self.same_pair(comp)
        if pair is None:
            return
        a, b = pair
        s = a[1]
        if s.et == "pred":
            opcode = self.draw(st.sampled_from(("and", "or", "xor")))
        elif s.et in FLOAT_TYPES:
            opcode = self.draw(st.sampled_from(BINARY_NUM))
        else:
            opcode = self.draw(st.sampled_from(BINARY_NUM + BINARY_INT_EXTRA))
        self.emit(comp, Arr(s.et, s.dims, self.layout(s.rank)), opcode, [a, b])

    def op_compare(self, comp: Comp, depth: int) -> str | None:
        pair = self.same_pair(comp)
        if pair is None:
            return None
        a, b = pair
        d = self.draw(st.sampled_from(DIRECTIONS))
        name, _ = self.emit(comp, Arr("pred", a[1].dims, self.layout(a[1].rank)), "compare",
                            [a, b], f", direction={d}")  # fmt: skip
        return name

    def op_select(self, comp: Comp, depth: int) -> None:
        pair = self.same_pair(comp)
        if pair is None:
            return
        a, b = pair
        p = self.pick_array(comp, lambda s: s.et == "pred" and s.dims == a[1].dims)
        if p is None:
            p = self.pick_array(comp, lambda s: s.et == "pred" and s.rank == 0)
        if p is None:
            return
        self.emit(comp, Arr(a[1].et, a[1].dims, self.layout(a[1].rank)), "select", [p, a, b])

    def op_convert(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp)
        if v is None:
            return
        et = self.draw(st.sampled_from(ELEMENT_TYPES))
        self.emit(comp, Arr(et, v[1].dims, self.layout(v[1].rank)), "convert", [v])

    def op_broadcast(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp, lambda s: s.rank <= 2)
        if v is None:
            return
        s = v[1]
        extra = self.draw(st.integers(0 if s.rank else 1, 2))
        out_rank = s.rank + extra
        positions = sorted(self.draw(st.permutations(range(out_rank)))[: s.rank])
        dims = [0] * out_rank
        for i, p in enumerate(positions):
            dims[p] = s.dims[i]
        for j in range(out_rank):
            if j not in positions:
                dims[j] = self.draw(st.integers(1, 3))
        attrs = ", dimensions={" + ",".join(map(str, positions)) + "}"
        self.emit(comp, Arr(s.et, tuple(dims), self.layout(out_rank)), "broadcast", [v], attrs)

    def op_reshape(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp)
        if v is None:
            return
        s = v[1]
        n = 1
        for d in s.dims:
            n *= d
        factors = [f for f in range(1, n + 1) if n % f == 0]
        a = self.draw(st.sampled_from(factors))
        dims = self.draw(st.sampled_from([(n,), (a, n // a), (n // a, 1, a), ()]))
        if dims == () and n != 1:
            dims = (n,)
        self.emit(comp, Arr(s.et, tuple(dims), self.layout(len(dims))), "reshape", [v])

    def op_transpose(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp, lambda s: s.rank >= 1)
        if v is None:
            return
        s = v[1]
        perm = self.draw(st.permutations(range(s.rank)))
        dims = tuple(s.dims[p] for p in perm)
        attrs = ", dimensions={" + ",".join(map(str, perm)) + "}"
        self.emit(comp, Arr(s.et, dims, self.layout(s.rank)), "transpose", [v], attrs)

    def op_slice(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp, lambda s: s.rank >= 1)
        if v is None:
            return
        s = v[1]
        ranges, dims = [], []
        for d in s.dims:
            start = self.draw(st.integers(0, d - 1))
            limit = self.draw(st.integers(start + 1, d))
            stride = self.draw(st.integers(1, 2))
            ranges.append(f"[{start}:{limit}]" if stride == 1 and self.draw(st.booleans())
                          else f"[{start}:{limit}:{stride}]")  # fmt: skip
            dims.append(-(-(limit - start) // stride))
        attrs = ", slice={" + ", ".join(ranges) + "}"
        self.emit(comp, Arr(s.et, tuple(dims), self.layout(s.rank)), "slice", [v], attrs)

    def op_concatenate(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp, lambda s: s.rank >= 1)
        if v is None:
            return
        s = v[1]
        axis = self.draw(st.integers(0, s.rank - 1))
        others = [
            w for w in comp.values
            if isinstance(w[1], Arr) and w[1].et == s.et and w[1].rank == s.rank
            and all(a == b for i, (a, b) in enumerate(zip(w[1].dims, s.dims, strict=True)) if i != axis)
        ]  # fmt: skip
        k = self.draw(st.integers(1, 3))
        parts = [v] + [self.draw(st.sampled_from(others)) for _ in range(k)]
        dims = list(s.dims)
        dims[axis] = sum(p[1].dims[axis] for p in parts)  # type: ignore[union-attr]
        self.emit(comp, Arr(s.et, tuple(dims), self.layout(s.rank)), "concatenate", parts,
                  f", dimensions={{{axis}}}")  # fmt: skip

    def op_reduce(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp, lambda s: s.rank >= 1)
        if v is None:
            return
        s = v[1]
        k = self.draw(st.integers(1, s.rank))
        rdims = sorted(self.draw(st.permutations(range(s.rank)))[:k])
        keep = tuple(d for i, d in enumerate(s.dims) if i not in rdims)
        init = self.constant(comp, Arr(s.et, ()))
        attrs = (", dimensions={" + ",".join(map(str, rdims)) + "}, to_apply="
                 + self.pct + self.reducer(s.et))  # fmt: skip
        self.emit(comp, Arr(s.et, keep, self.layout(len(keep))), "reduce", [v, init], attrs)

    def op_dot(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp, lambda s: s.rank == 2 and s.et in ("f32", "bf16", "f16", "s32"))
        if v is None:
            return
        s = v[1]
        w = self.pick_array(comp, lambda t: t.et == s.et and t.rank == 2 and t.dims[0] == s.dims[1])
        if w is None:
            return
        attrs = ", lhs_contracting_dims={1}, rhs_contracting_dims={0}"
        self.emit(comp, Arr(s.et, (s.dims[0], w[1].dims[1]), self.layout(2)), "dot", [v, w], attrs)

    def op_tuple(self, comp: Comp, depth: int) -> None:
        k = self.draw(st.integers(1, 3))
        parts = [self.draw(st.sampled_from(comp.values)) for _ in range(k)]
        t = Tup(tuple(p[1] for p in parts))
        name, _ = self.emit(comp, t, "tuple", parts)
        i = self.draw(st.integers(0, k - 1))
        self.emit(comp, t.elements[i], "get-tuple-element", [(name, t)], f", index={i}")

    def op_call(self, comp: Comp, depth: int) -> None:
        k = self.draw(st.integers(1, 2))
        args = [self.draw(st.sampled_from(comp.values)) for _ in range(k)]
        callee = self.computation(self.fresh("callee"), [a[1] for a in args], depth + 1, 4)
        root_shape = callee.root_shape
        assert root_shape is not None
        self.emit(comp, root_shape, "call", args, ", to_apply=" + self.pct + callee.name)

    def op_while(self, comp: Comp, depth: int) -> None:
        v = self.pick_array(comp, lambda s: s.et != "pred")
        if v is None:
            return
        s = v[1]
        p = self.pct
        t = Tup((Arr("s32", ()), s))
        cond, body = self.fresh("cond"), self.fresh("body")
        limit = self.draw(st.integers(0, 5))
        self.helpers.append(
            f"{p}{cond} (t: {t.text(False)}) -> pred[] {{\n"
            f"  {p}t = {t.text()} parameter(0)\n"
            f"  {p}i = s32[] get-tuple-element({p}t), index=0\n"
            f"  {p}lim = s32[] constant({limit})\n"
            f"  ROOT {p}lt = pred[] compare({p}i, {p}lim), direction=LT\n}}\n"
        )
        self.helpers.append(
            f"{p}{body} (t: {t.text(False)}) -> {t.text(False)} {{\n"
            f"  {p}t = {t.text()} parameter(0)\n"
            f"  {p}i = s32[] get-tuple-element({p}t), index=0\n"
            f"  {p}one = s32[] constant(1)\n"
            f"  {p}i2 = s32[] add({p}i, {p}one)\n"
            f"  {p}x = {s.text()} get-tuple-element({p}t), index=1\n"
            f"  {p}x2 = {s.text()} add({p}x, {p}x)\n"
            f"  ROOT {p}r = {t.text()} tuple({p}i2, {p}x2)\n}}\n"
        )
        zero = self.constant(comp, Arr("s32", ()))
        init = self.emit(comp, t, "tuple", [zero, v])
        w = self.emit(comp, t, "while", [init], f", condition={p}{cond}, body={p}{body}")
        self.emit(comp, s, "get-tuple-element", [w], ", index=1")

    # --- computations -----------------------------------------------------------------------

    def computation(self, name: str, param_shapes: list[Shape], depth: int, max_ops: int) -> Comp:
        comp = Comp(name, param_shapes)
        p = self.pct
        for i, s in enumerate(param_shapes):
            pname = self.fresh("p")
            comp.lines.append(f"{p}{pname} = {s.text()} parameter({i}){self.metadata()}")
            comp.values.append((pname, s))
        for _ in range(self.draw(st.integers(1, max_ops))):
            self.step(comp, depth)
        # Any instruction may be the ROOT, not only the last (later ones are then dead code).
        root_index = self.draw(st.integers(len(comp.values) // 2, len(comp.values) - 1))
        comp.lines[root_index] = "ROOT " + comp.lines[root_index]
        comp.root_shape = comp.values[root_index][1]
        if depth > 0:
            self.helpers.append(self.render(comp, entry=False))
        return comp

    def render(self, comp: Comp, entry: bool) -> str:
        sig = ""
        if self.draw(st.booleans()):
            params = ", ".join(
                f"{line.split(' = ')[0].removeprefix('ROOT ').lstrip('%')}: {s.text(False)}"
                for line, s in zip(comp.lines, comp.param_shapes, strict=False)
            )
            sig = f" ({params}) -> {comp.root_shape.text(False)}"  # type: ignore[union-attr]
        head = ("ENTRY " if entry else "") + self.pct + comp.name + sig
        return head + " {\n" + "".join(f"  {line}\n" for line in comp.lines) + "}\n"


@st.composite
def hlo_modules(draw, max_ops: int = 12) -> str:
    b = ModuleBuilder(draw, percent=draw(st.booleans()), typed=draw(st.booleans()))
    n_params = draw(st.integers(1, 3))
    params: list[Shape] = [b.array() for _ in range(n_params)]
    if draw(st.integers(0, 5)) == 0:
        params.append(Tup((b.array(), b.array())))
    entry = b.computation("main", params, 0, max_ops)
    entry_text = b.render(entry, entry=True)
    name = draw(st.sampled_from(["m", "jit_f", "module.1", "test_module"]))
    return f"HloModule {name}\n\n" + "\n".join(b.helpers) + ("\n" if b.helpers else "") + entry_text
