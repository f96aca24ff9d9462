"""rng-bit-generator: XLA's ThreeFry-2x32 (20 rounds) and Philox-4x32 (10 rounds) bit streams.

State layout as XLA's expander uses it: threefry u64[2] = (key, counter); philox u64[3] =
(key, counter_lo, counter_hi), or u64[2] = (key, counter) with a 128-bit counter whose high
half is the key. `rng_default` is Philox, XLA:CPU's default.
"""

from __future__ import annotations

import numpy as np

from hlopass.interpreter.core import dtype_of, handler, unsupported
from hlopass.interpreter.numeric import as_dtype, widen

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


RNG_SEED = 0x5EED
"""Seed of the `rng` instruction's generator (numpy's PCG64), reset for each evaluate run."""


@handler("rng")
def _rng(interp, op, args):
    """`rng(a, b)`: uniform in [a, b) or normal(mean a, stddev b), from a numpy generator
    seeded with RNG_SEED per interpreter. XLA's values come from its own generator (an
    implementation-defined stream): only the distribution and the bounds are XLA's."""
    a, b = (widen(x) for x in args[:2])  # a third operand (a shape) may follow
    out = dtype_of(op.shape)
    gen = interp.__dict__.setdefault("_rng", np.random.default_rng(RNG_SEED))
    dims = tuple(op.shape.dims)
    if op.attr("distribution") == "rng_normal":
        return as_dtype(gen.normal(size=dims) * b + a, out)
    if np.issubdtype(a.dtype, np.integer):
        lo, hi = int(a), int(b)
        return as_dtype(gen.integers(lo, max(hi, lo + 1), size=dims), out)
    r = a + (b - a) * gen.random(size=dims)
    return as_dtype(np.minimum(r, np.nextafter(b, a)) if (b > a).all() else r, out)


@handler("rng-get-and-update-state")
def _rng_state(interp, op, args):
    """The state before the update, then the counter advances by `delta`. XLA's initial state
    is implementation-defined; here it is (RNG_SEED, 0) at the start of each run."""
    counter = interp.__dict__.get("_rng_counter", 0)
    interp.__dict__["_rng_counter"] = counter + int(op.attr("delta"))
    return np.array([RNG_SEED, counter], np.uint64).astype(dtype_of(op.shape))
