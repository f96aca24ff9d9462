"""rng-bit-generator: XLA's ThreeFry-2x32 (20 rounds) and Philox-4x32 (10 rounds) bit streams.

State layout as XLA's expander uses it: threefry u64[2] = (key, counter); philox u64[3] =
(key, counter_lo, counter_hi), or u64[2] = (key, counter) with a 128-bit counter whose high
half is the key. `rng_default` is Philox, XLA:CPU's default.
"""

from __future__ import annotations

import numpy as np

from hlopass.dialects.hlo import ComputationOp
from hlopass.interpreter import xla_cpu_f32
from hlopass.interpreter.complex_math import fma
from hlopass.interpreter.core import dtype_of, element_type, handler, unsupported
from hlopass.interpreter.numeric import as_dtype

U32 = np.uint32
_ROT = (13, 15, 26, 6, 17, 29, 16, 24)


def _rotl(v, d):
    return (v << U32(d)) | (v >> U32(32 - d))


def threefry2x32(x0, x1, k0, k1):
    k2 = U32(0x1BD11BDA) ^ k0 ^ k1
    ks = (k0, k1, k2)
    x0, x1 = x0 + k0, x1 + k1
    for block in range(5):
        rots = _ROT[:4] if block % 2 == 0 else _ROT[4:]
        for r in rots:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + ks[(block + 2) % 3] + U32(block + 1)
    return x0, x1


def philox4x32(c0, c1, c2, c3, k0, k1):
    for _ in range(10):
        p0 = c0.astype(np.uint64) * np.uint64(0xD2511F53)
        p1 = c2.astype(np.uint64) * np.uint64(0xCD9E8D57)
        hi0, lo0 = (p0 >> np.uint64(32)).astype(U32), p0.astype(U32)
        hi1, lo1 = (p1 >> np.uint64(32)).astype(U32), p1.astype(U32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = k0 + U32(0x9E3779B9), k1 + U32(0xBB67AE85)
    return c0, c1, c2, c3


def _split(u64):
    return u64.astype(U32), (u64 >> np.uint64(32)).astype(U32)


def _join(lo, hi):
    return lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))


def _threefry_bits(key, counter, dims, bits):
    k0, k1 = _split(np.uint64(key))
    if bits == 64:
        n = int(np.prod(dims, dtype=np.int64))
        x0, x1 = _split(np.uint64(counter) + np.arange(n, dtype=np.uint64))
        y0, y1 = threefry2x32(x0, x1, k0, k1)
        return _join(y0, y1).reshape(dims), np.uint64(counter) + np.uint64(n)
    if not dims:
        x0, x1 = _split(np.array([counter], np.uint64))
        y0, _ = threefry2x32(x0, x1, k0, k1)
        return y0.reshape(()), np.uint64(counter) + np.uint64(1)
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
    if split is None:
        split = max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = list(dims)
    half[split] = -(-dims[split] // 2)
    n = int(np.prod(half, dtype=np.int64))
    x0, x1 = _split(np.uint64(counter) + np.arange(n, dtype=np.uint64))
    y0, y1 = threefry2x32(x0, x1, k0, k1)
    shape_h = half[: split + 1] + [1] + half[split + 1 :]
    both = np.concatenate([y0.reshape(shape_h), y1.reshape(shape_h)], axis=split + 1)
    full = list(dims)
    full[split] = half[split] * 2
    out = both.reshape(full)[tuple(slice(0, d) for d in dims)]
    return out, np.uint64(counter) + np.uint64(n)


def _philox_bits(key, lo, hi, dims, bits):
    n = int(np.prod(dims, dtype=np.int64))
    n32 = n * 2 if bits == 64 else n
    n4 = -(-n32 // 4)
    iota = np.arange(n4, dtype=np.uint64)
    new_lo = np.uint64(lo) + iota
    new_hi = np.where(new_lo < np.uint64(lo), np.uint64(hi) + np.uint64(1), np.uint64(hi))
    c0, c1 = _split(new_lo)
    c2, c3 = _split(new_hi)
    k0, k1 = _split(np.uint64(key))
    b = philox4x32(c0, c1, c2, c3, k0, k1)
    if bits == 64:
        words = np.stack([_join(b[0], b[1]), _join(b[2], b[3])], axis=1).reshape(-1)
    else:
        words = np.stack(b, axis=1).reshape(-1)
    end_lo = np.uint64(lo) + np.uint64(n4)
    end_hi = np.uint64(hi) + np.uint64(1) if end_lo < np.uint64(lo) else np.uint64(hi)
    return words[:n].reshape(dims), end_lo, end_hi


@handler("rng-bit-generator")
def _rng_bit_generator(interp, op, args):
    (state,) = args
    state = state.astype(np.uint64)
    out_dt = dtype_of(op.shape.elements[1])
    dims = tuple(op.shape.elements[1].dims)
    bits = out_dt.itemsize * 8
    algorithm = op.attr("algorithm")
    if algorithm == "rng_three_fry":
        data, counter = _threefry_bits(state[0], state[1], dims, 64 if bits == 64 else 32)
        new_state = np.array([state[0], counter], np.uint64)
    elif algorithm in ("rng_philox", "rng_default"):
        if state.size >= 3:
            lo, hi = state[1], state[2]
        else:
            lo, hi = state[1], state[0]
        data, new_lo, new_hi = _philox_bits(state[0], lo, hi, dims, 64 if bits == 64 else 32)
        rest = [new_lo, new_hi] if state.size >= 3 else [new_lo]
        new_state = np.array([state[0], *rest] + list(state[3:]), np.uint64)
    else:
        raise unsupported(op, f"algorithm {algorithm}")
    if bits < 32:
        data = data.astype(np.dtype(f"u{out_dt.itemsize}"))
    data = (
        np.ascontiguousarray(data).view(out_dt)
        if data.dtype.itemsize == out_dt.itemsize
        else data.astype(out_dt)
    )
    return (new_state.astype(dtype_of(op.shape.elements[0])), data.reshape(dims))


# --- `rng`: XLA's RngExpander -----------------------------------------------------------
#
# XLA-CPU never runs `rng` itself: its RngExpander rewrites each one into Philox-4x32 bits
# keyed by a compile-time u64 and counted by a `rng-get-and-update-state` (a 128-bit counter
# from 0x7012395, advanced by the 32-bit words drawn each time it runs; one per instruction,
# but one shared by everything in a while loop's body and condition), converted as
# xla/hlo/builder/lib/prng.cc does (uniform: top mantissa bits, then an FMA to [a, b);
# integers: modulo the range, in two halves; normal: Box-Muller over the shape split in
# halves; f16/bf16 drawn in f32). The key of the i-th expanded rng is
# `module_stream[i] ^ process_stream[j]`: the module's own mt19937_64 (seed 42, fresh per
# module) and a process-global mt19937_64 that every compilation in the process advances
# (j counts the rngs expanded before, in any module). With jaxlib 0.10.2 that process
# stream is mt19937_64 seeded with 8 (measured from the keys of a fresh process's first
# compilations). So the semantics: XLA-CPU's values for the FIRST compilation of the module
# in a fresh process, executed once per `evaluate` (a second execution continues the
# counters; a second compilation draws new keys).
#
# f32 Box-Muller takes XLA-CPU's own vectorised log and the C library's sinf/cosf
# (hlopass/interpreter/xla_cpu_f32.py): numpy's f32 versions round differently.
#
# Known differences (tests/test_rng.py, strict xfails): a computation `call`ed from several
# sites is cloned per site by XLA (own key, own counter) but runs as one instance here; an
# unused rng-get-and-update-state in a loop advances the loop's counter on XLA-CPU, not
# here (the interpreter skips dead instructions).

MODULE_SEED = 42
"""Seed of HloModule's own generator (`HloModule::rng_`), fresh for every module."""
PROCESS_SEED = 8
"""Seed of the process-global generator RngExpander draws from, as jaxlib 0.10.2 has it."""
STATE_INIT = 0x7012395
"""Initial value of each rng-get-and-update-state counter on XLA-CPU (kRngStateInitialValue)."""

_MASK64 = (1 << 64) - 1


def mt19937_64(seed: int, n: int) -> list[int]:
    """The first `n` outputs of C++'s std::mt19937_64 seeded with `seed`."""
    mt = [seed & _MASK64]
    for i in range(1, 312):
        mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & _MASK64)
    out: list[int] = []
    while len(out) < n:
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            mt[i] = mt[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
        for y in mt:
            y ^= (y >> 29) & 0x5555555555555555
            y ^= (y << 17) & 0x71D67FFFEDA60000
            y ^= (y << 37) & 0xFFF7EEE000000000
            out.append((y ^ (y >> 43)) & _MASK64)
    return out[:n]


def expander_order(interp) -> list:
    """The `rng` instructions of the module in the order RngExpander visits them: each
    computation's instructions in post order, computations in the order XLA-CPU creates
    them converting the module back from StableHLO: the `call`ed computations (functions
    there) in text order and the entry last, each one after the computations it holds as
    regions (while body, then condition; branches; other callees), created as its
    instructions meet them. (Checked against XLA-CPU's keys: tests/test_rng.py.)"""
    entry = interp.entry()
    calls = {name for c in interp.comps.values() for op in c.instructions
             if op.opcode == "call" for name in op.callees()}  # fmt: skip
    funcs = [c for c in interp.comps.values() if c.comp_name in calls and c is not entry]
    order: list = []
    seen = {c.comp_name for c in funcs} | {entry.comp_name}

    def create(comp) -> None:
        for op in _post_order(comp):
            if op.opcode == "call":
                continue
            for name in _callees(op):
                if name not in seen and name in interp.comps:
                    seen.add(name)
                    create(interp.comps[name])
        order.append(comp)

    for comp in [*funcs, entry]:
        create(comp)
    return [op for comp in order for op in _post_order(comp) if op.opcode == "rng"]


def _callees(op) -> list[str]:
    names = op.callees()
    if op.opcode == "while":  # StableHLO's while converts its body region first
        return [op.attr("body"), op.attr("condition")]
    return names


def _post_order(comp) -> list:
    """XLA's MakeInstructionPostOrder: from each instruction without users, in text order,
    operands depth first, first operand first."""
    ops = list(comp.instructions)
    used = {id(v.owner) for op in ops for v in op.operands}
    order: list = []
    state: dict[int, int] = {}  # 1 visiting, 2 done
    for top in ops:
        if id(top) in used:
            continue
        stack = [top]
        while stack:
            cur = stack[-1]
            if id(cur) in state:
                stack.pop()
                if state[id(cur)] == 1:
                    state[id(cur)] = 2
                    order.append(cur)
                continue
            state[id(cur)] = 1
            stack.extend(v.owner for v in reversed(cur.operands))
    return order


def _rng_state(interp) -> dict:
    """Keys and counters of this run (reset by `evaluate`, which drops `_rng`)."""
    state = interp.__dict__.get("_rng")
    if not isinstance(state, dict):
        ops = expander_order(interp)
        mod, proc = mt19937_64(MODULE_SEED, len(ops)), mt19937_64(PROCESS_SEED, len(ops))
        keys = {id(op): m ^ p for op, m, p in zip(ops, mod, proc, strict=True)}
        state = interp.__dict__["_rng"] = {"keys": keys, "counters": {}, "loops": _loops(interp)}
    return state


def _loops(interp) -> dict[str, str]:
    """Computation name -> the while loop whose body or condition holds it (directly or
    through its callees): XLA-CPU gives all rng-get-and-update-state of one loop one shared
    counter, while elsewhere (entry, called or conditional computations) each instruction
    has its own (measured with rng-get-and-update-state outputs, tests/test_rng.py)."""
    loops: dict[str, str] = {}
    for comp in interp.comps.values():
        for op in comp.instructions:
            if op.opcode != "while" or comp.comp_name in loops:
                continue
            todo = [op.attr("body"), op.attr("condition")]
            while todo:
                name = todo.pop()
                if name in loops or name not in interp.comps:
                    continue
                loops[name] = op.inst_name + "@" + comp.comp_name
                todo += [n for o in interp.comps[name].instructions for n in o.callees()]
    return loops


def _counter(state: dict, op) -> object:
    """Which counter `op` advances: its loop's, or its own."""
    node = op.parent_op()
    while node is not None and not isinstance(node, ComputationOp):
        node = node.parent_op()
    loop = state["loops"].get(node.comp_name) if node is not None else None
    return loop if loop is not None else id(op)


def _draw(interp, op, dims: tuple, bits: int) -> np.ndarray:
    """Philox words for one execution of `op` (XLA's PhiloxBitGenerator), advancing the
    counter of its rng-get-and-update-state by the 32-bit words drawn."""
    state = _rng_state(interp)
    key = state["keys"].get(id(op))
    if key is None:  # an instruction outside the module (eval_instruction): first key
        key = mt19937_64(MODULE_SEED, 1)[0] ^ mt19937_64(PROCESS_SEED, 1)[0]
    which = _counter(state, op)
    counter = state["counters"].get(which, STATE_INIT)
    n = int(np.prod(dims, dtype=np.int64))
    state["counters"][which] = (counter + n * (bits // 32)) & ((1 << 128) - 1)
    lo, hi = np.uint64(counter & _MASK64), np.uint64(counter >> 64)
    words, _, _ = _philox_bits(np.uint64(key), lo, hi, dims, bits)
    return words


_UNIFORM_BITS = {np.dtype(np.float32): 32, np.dtype(np.float64): 64}
_INT_BITS = {"s32": 32, "u32": 32, "s64": 64, "u64": 64}


@handler("rng")
def _rng(interp, op, args):
    """`rng(a, b)`: XLA-CPU's values (the RngExpander lowering above): uniform in [a, b)
    or normal(mean a, stddev b); f16/bf16 drawn in f32 and converted."""
    a, b = args[:2]  # a third operand (a shape) may follow
    out = dtype_of(op.shape)
    dims = tuple(op.shape.dims)
    etype = element_type(op)
    normal = op.attr("distribution") == "rng_normal"
    if etype in _INT_BITS and not normal:
        return _uniform_int(_draw(interp, op, dims, _INT_BITS[etype]), a, b, out)
    if etype in ("f16", "bf16"):
        a, b = a.astype(np.float32), b.astype(np.float32)
    elif etype not in ("f32", "f64"):
        raise unsupported(op, f"rng of {etype} (XLA-CPU's RngExpander aborts on it)")
    ft = np.dtype(np.float64 if etype == "f64" else np.float32)
    if normal:
        z = _standard_normal(interp, op, dims, ft)
        return as_dtype(fma(b.astype(ft), z, a.astype(ft)), out)
    bits = _draw(interp, op, dims, _UNIFORM_BITS[ft])
    u = _unit_floats(bits, ft)
    return as_dtype(fma(u, (b - a).astype(ft), a.astype(ft)), out)


def _unit_floats(bits: np.ndarray, ft: np.dtype) -> np.ndarray:
    """[0, 1) from the top mantissa-width bits, exactly (prng.cc's conversion)."""
    mant = np.finfo(ft).nmant
    shift = np.array(ft.itemsize * 8 - mant, bits.dtype)
    return (bits >> shift).astype(ft) * ft.type(2.0**-mant)


def _uniform_int(bits: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.dtype) -> np.ndarray:
    """prng.cc's ConvertRandomBitsToUniformInt, wrapping arithmetic in the unsigned type;
    a range of zero leaves the bits as they are (XLA's x % 0 = x)."""
    ut = bits.dtype
    span = (np.asarray(b).astype(out).view(ut) - np.asarray(a).astype(out).view(ut)).astype(ut)
    safe = np.where(span == 0, ut.type(1), span)
    dist = np.where(span == 0, bits, bits % safe).astype(ut)
    half = dist >> ut.type(1)
    total = np.asarray(a).astype(out).view(ut) + half + (dist - half)
    return total.astype(ut).view(out)


def _standard_normal(interp, op, dims: tuple, ft: np.dtype) -> np.ndarray:
    """prng.cc's NormalFloatingPointDistribution: uniform pairs over the shape split in
    halves (SplitShapeIntoHalves), then Box-Muller."""
    split, half = _split_halves(dims)
    concat = list(half)
    concat.insert(split + 1, 2)
    u = _unit_floats(_draw(interp, op, tuple(concat), _UNIFORM_BITS[ft]), ft)
    u1 = np.take(u, 0, axis=split + 1)
    u2 = np.take(u, 1, axis=split + 1)
    u1 = np.maximum(u1, ft.type(1.0e-7))
    v1 = ft.type(2.0 * np.pi) * u2
    # f32: XLA-CPU's vectorised log (every lane of this loop) and the C library's sin/cos
    log, sin, cos = (
        (xla_cpu_f32.log_vector_lanes, xla_cpu_f32.sin, xla_cpu_f32.cos)
        if (ft == np.float32)
        else (np.log, np.sin, np.cos)
    )
    r = np.sqrt(ft.type(-2.0) * log(u1))
    z = np.stack([sin(v1) * r, cos(v1) * r], axis=split + 1)
    if not dims:
        return z.reshape(-1)[0].reshape(())
    full = list(dims)
    full[split] = half[split] * 2
    return z.reshape(full)[tuple(slice(0, d) for d in dims)]


def _split_halves(dims: tuple) -> tuple[int, list[int]]:
    """The dimension halved (the first even one, else the largest, the first of equals)
    and the half shape; a scalar draws one pair."""
    if not dims:
        return 0, [1]
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
    if split is None:
        split = max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = list(dims)
    half[split] = -(-dims[split] // 2)
    return split, half


@handler("rng-get-and-update-state")
def _rng_get_and_update_state(interp, op, args):
    """XLA-CPU's counter as u64[2] (low, high), then it advances by `delta`: the
    instruction's own, or its while loop's (`_loops`), starting at STATE_INIT each run."""
    state = _rng_state(interp)
    which = _counter(state, op)
    counter = state["counters"].get(which, STATE_INIT)
    state["counters"][which] = (counter + int(op.attr("delta"))) & ((1 << 128) - 1)
    state = np.array([counter & _MASK64, counter >> 64], np.uint64)
    return state.astype(dtype_of(op.shape))
