"""Helpers shared by the interpreter tests: compare hlopass.evaluate with XLA:CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import hlopass
from tests.child_runner import run_batch
from tests.error_bound import assert_within_bound, error_bounds


def assert_same(got, want, rtol=0.0, atol=0.0, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind in "iub" or (rtol == 0 and atol == 0):
        if got.dtype.kind in "fc" or got.dtype.kind == "V":
            g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
            w = want.astype(g.dtype)
            same = (g == w) | (np.isnan(g) & np.isnan(w))
            assert same.all(), f"{what}: {int((~same).sum())} elements differ\n{got}\n{want}"
        else:
            assert np.array_equal(got, want), (
                f"{what}: {int((got != want).sum())} elements differ\n{got}\n{want}"
            )
        return
    kind = np.complex128 if got.dtype.kind == "c" else np.float64
    np.testing.assert_allclose(got.astype(kind), want.astype(kind), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)  # fmt: skip


def check_against_xla(xla, text: str, *args, derived=False):
    """Run `text` on `args` with the interpreter and with XLA:CPU; assert equal results:
    bit for bit, or with `derived` floats within the bound `tests.error_bound` derives from
    the computation (integers and pred stay exact)."""
    _enable_x64()
    module = hlopass.parse_hlo(text)
    got = hlopass.evaluate(module, *args)
    want = xla.execute(text, list(args))
    assert len(got) == len(want)
    bounds = error_bounds(module, *args) if derived else None
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if bounds is not None and np.asarray(g).dtype.kind not in "iub":
            assert_within_bound(g, w, bounds[i][1], what=f"output {i}")
        else:
            assert_same(g, w, what=f"output {i}")
    return got


def _enable_x64() -> None:
    """64-bit inputs reach XLA unchanged only with jax's x64 mode on."""
    import jax

    jax.config.update("jax_enable_x64", True)


# --- XLA:CPU execution of many modules in child processes (XLA may abort) ---------------

_CHILD = Path(__file__).with_name("_xla_exec_child.py")


def xla_execute_many(cases: list[tuple[str, list[np.ndarray]]], timeout: float = 900) -> list[dict]:
    """Run each (HLO text, args) on XLA:CPU in a child process, restarted after a crash.

    For each case: {"outputs": [arrays]} or {"error": XLA's message} or {"crash": detail}.
    """
    from tests._xla_exec_child import load_arrays, save_arrays

    with tempfile.TemporaryDirectory() as tmp:
        manifest = []
        for i, (text, args) in enumerate(cases):
            hlo = os.path.join(tmp, f"m{i}.hlo")
            with open(hlo, "w") as f:
                f.write(text)
            ins = os.path.join(tmp, f"m{i}_in.npz")
            save_arrays(ins, "in", args)
            manifest.append(
                {"hlo": hlo, "inputs": ins, "outputs": os.path.join(tmp, f"m{i}_out.npz")}
            )
        path = os.path.join(tmp, "manifest.json")
        with open(path, "w") as f:
            json.dump(manifest, f)
        out: list[dict] = []
        for i, msg in enumerate(run_batch(_CHILD, path, len(cases), timeout)):
            if msg.get("ok"):
                out.append({"outputs": load_arrays(manifest[i]["outputs"], "out")})
            elif "error" in msg:
                out.append({"error": msg["error"]})
            elif msg["crash"] == "no result":
                out.append(msg)
            else:
                tail = msg["stderr"].strip().splitlines()[-1:] or [""]
                out.append({"crash": f"XLA aborted (rc {msg['crash']}): {tail[0][:200]}"})
    return out


# --- Seeded random arguments for a module ------------------------------------------------
#
# Floats: uniform in [-2, 2) (complex: both parts), rounded to the element type. Integers:
# the full range for types of 8 bits or fewer, [-100, 100] (unsigned [0, 200]) for wider
# ones; pred: fair coin. Integer parameters that feed the start indices of dynamic-slice,
# dynamic-update-slice, gather or scatter (directly, or through fusion/call parameters and
# bitcast/reshape/copy/convert) are drawn in range: every slice/window fits. Scatter indices
# are unique where the scatter says `unique_indices=true` or its combiner is not an
# order-independent add/multiply/maximum/minimum/and/or (else duplicates make the result
# implementation-defined), and sorted where it says `indices_are_sorted=true`.

_PASS_THROUGH = ("bitcast", "reshape", "copy", "convert")
_ORDER_FREE = ("add", "multiply", "maximum", "minimum", "and", "or")


def _index_constraints(module) -> dict[int, dict]:
    from hlopass.dialects.hlo import computations, entry_computation

    comps = {c.comp_name: c for c in computations(module)}
    found: dict[int, dict] = {}

    def source(v, env, scalar):
        op = v.owner
        while op.opcode in _PASS_THROUGH and (scalar or op.opcode in ("copy", "convert")):
            op = op.operands[0].owner
        return env.get(op.attr("number")) if op.opcode == "parameter" else None

    def add(src, his, ivd=None, unique=False, sorted_=False):
        if src is None:
            return
        c = found.setdefault(src, {"his": list(his), "ivd": ivd, "unique": False, "sorted": False})
        if "his" not in c:
            return
        if len(c["his"]) == len(his):
            c["his"] = [min(a, b) for a, b in zip(c["his"], his, strict=True)]
        c["unique"] |= unique
        c["sorted"] |= sorted_

    def walk(comp, env, depth=0):
        for op in comp.instructions:
            oc = op.opcode
            dims = lambda v: v.type.data.dims  # noqa: E731
            if oc in ("fusion", "call") and depth < 8:
                callee = comps.get(op.callees()[0])
                if callee is not None:
                    walk(
                        callee,
                        {i: source(v, env, False) for i, v in enumerate(op.operands)},
                        depth + 1,
                    )
            elif oc == "dynamic-slice":
                base = dims(op.operands[0])
                sizes = op.attr("dynamic_slice_sizes")
                for k, v in enumerate(op.operands[1:]):
                    add(source(v, env, True), [max(0, base[k] - sizes[k])])
            elif oc == "dynamic-update-slice":
                base, upd = dims(op.operands[0]), dims(op.operands[1])
                for k, v in enumerate(op.operands[2:]):
                    add(source(v, env, True), [max(0, base[k] - upd[k])])
            elif oc == "gather":
                base = dims(op.operands[0])
                sizes = op.attr("slice_sizes")
                his = [max(0, base[d] - sizes[d]) for d in op.attr("start_index_map")]
                add(source(op.operands[1], env, False), his, op.attr("index_vector_dim"),
                    sorted_=bool(op.attr("indices_are_sorted")))  # fmt: skip
            elif oc in ("reduce", "reduce-window", "select-and-scatter"):
                # XLA may apply the init value more than once: only its identity is portable.
                n = len(op.operands) // 2 if oc != "select-and-scatter" else 1
                inits = op.operands[n:] if oc != "select-and-scatter" else op.operands[2:]
                combiner = comps.get(
                    op.attr("to_apply") if oc != "select-and-scatter" else op.attr("scatter")
                )
                root = combiner.root if combiner is not None else None
                if root is not None and n == 1 and root.opcode in _ORDER_FREE:
                    src = source(inits[0], env, True)
                    if src is not None:
                        found[src] = {"identity": root.opcode}
            elif oc == "scatter":
                n = (len(op.operands) - 1) // 2
                base, upd = dims(op.operands[0]), dims(op.operands[n + 1])
                inserted = set(op.attr("inserted_window_dims"))
                obatch = set(op.attr("input_batching_dims") or ())
                window = [d for d in range(len(base)) if d not in inserted and d not in obatch]
                size = [1] * len(base)
                for j, d in enumerate(window):
                    size[d] = upd[op.attr("update_window_dims")[j]]
                his = [max(0, base[d] - size[d]) for d in op.attr("scatter_dims_to_operand_dims")]
                combiner = comps.get(op.attr("to_apply"))
                root = combiner.root if combiner is not None else None
                order_free = root is not None and root.opcode in _ORDER_FREE and all(
                    o.owner.opcode == "parameter" for o in root.operands)  # fmt: skip
                add(source(op.operands[n], env, False), his, op.attr("index_vector_dim"),
                    unique=bool(op.attr("unique_indices")) or not order_free,
                    sorted_=bool(op.attr("indices_are_sorted")))  # fmt: skip

    entry = entry_computation(module)
    walk(entry, {p.attr("number"): p.attr("number") for p in entry.parameters()})
    return found


def _random_array(rng, shape, dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind == "c":
        return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(dtype)
    if dtype.kind in "iu" or dtype.name.startswith(("int", "uint")):
        import ml_dtypes

        info = ml_dtypes.iinfo(dtype)
        if info.bits > 8:
            lo, hi = (0, 200) if info.min == 0 else (-100, 100)
        else:
            lo, hi = int(info.min), int(info.max)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


def _identity(opcode: str, shape, dtype: np.dtype) -> np.ndarray:
    import ml_dtypes

    kind = dtype.kind
    is_int = kind in "iu" or dtype.name.startswith(("int", "uint"))
    if opcode in ("add", "or"):
        v = 0
    elif opcode == "multiply":
        v = 1
    elif opcode == "and":
        v = True if kind == "b" else -1
    elif kind == "b":
        v = opcode == "minimum"
    elif is_int:
        info = ml_dtypes.iinfo(dtype)
        v = info.min if opcode == "maximum" else info.max
    else:
        v = -np.inf if opcode == "maximum" else np.inf
    return (
        np.full(shape, v).astype(dtype)
        if not (is_int and v == -1)
        else np.full(shape, -1, np.int64).astype(dtype)
    )


def _random_indices(rng, shape, dtype, c) -> np.ndarray:
    shape = tuple(shape)
    his = c["his"]
    ivd = c["ivd"]
    if ivd is None:  # scalar start index
        return np.asarray(rng.integers(0, his[0], shape, endpoint=True)).astype(dtype)
    vector = ivd < len(shape)
    k = shape[ivd] if vector else 1
    if len(his) != k:
        return np.zeros(shape, dtype)
    batch_shape = tuple(s for i, s in enumerate(shape) if not (vector and i == ivd))
    count = int(np.prod(batch_shape, dtype=np.int64))
    space = [h + 1 for h in his]
    total = int(np.prod(space, dtype=np.int64))
    if c["unique"] and count <= total:
        flat = rng.choice(total, count, replace=False)
    else:
        flat = rng.integers(0, total, count)
    if c["sorted"]:
        flat = np.sort(flat)
    rows = np.stack(np.unravel_index(flat, space), axis=-1) if k else np.zeros((count, 0), np.int64)
    rows = rows.reshape(batch_shape + (k,))
    out = np.moveaxis(rows, -1, ivd) if vector else rows[..., 0]
    return np.ascontiguousarray(out).astype(dtype)


def random_inputs(module, seed: int = 0) -> list:
    """Seeded random arguments for the entry computation (tuples for tuple parameters)."""
    from hlopass.dialects.hlo import entry_computation
    from hlopass.literal import numpy_dtype

    rng = np.random.default_rng(seed)
    constraints = _index_constraints(module)

    def build(shape, number):
        if shape.is_tuple:
            return tuple(build(e, None) for e in shape.elements)
        dtype = numpy_dtype(shape.element_type)
        c = constraints.get(number) if number is not None else None
        if c is not None and "identity" in c:
            return _identity(c["identity"], tuple(shape.dims), dtype)
        if c is not None and (dtype.kind in "iu" or dtype.name.startswith(("int", "uint"))):
            return _random_indices(rng, shape.dims, dtype, c)
        return _random_array(rng, tuple(shape.dims), dtype)

    return [build(p.shape, p.attr("number")) for p in entry_computation(module).parameters()]


# --- A module as XLA:CPU's execution path accepts it --------------------------------------
#
# XLA:CPU compiles modules through hlo_to_stablehlo, which rejects or CHECK-fails on
# already-fused, layout-assigned modules (XLA's emitter tests: fusion computations as the
# entry, `kind=kInput` fusions, bitcasts between layouts, partial layouts). For the oracle
# run only, `xla_friendly` rewrites such a module into an equivalent plain one: fusions are
# inlined into their callers, each bitcast becomes transpose/reshape/bitcast-convert ops
# following the source and result layouts (bitcast's meaning: same bytes, physically
# reinterpreted), and then all layouts are dropped (nothing else depends on them).
# The interpreter itself runs the original module.

_LAYOUT = re.compile(r"(\b[a-z][a-z0-9]*\[[^\]]*\])\{[^{}]*\}")


def xla_friendly(text: str) -> str:
    import hlopass
    from hlopass.dialects.hlo import computations

    module = hlopass.parse_hlo(text)
    comps = {c.comp_name: c for c in computations(module)}
    fused: set[str] = set()
    for _ in range(8):
        fusions = [
            op for c in computations(module) for op in c.instructions if op.opcode == "fusion"
        ]
        if not fusions:
            break
        for op in fusions:
            name = op.callees()[0]
            fused.add(name)
            _inline(op, comps[name])
    for comp in computations(module):
        for op in list(comp.instructions):
            if op.opcode == "bitcast":
                _lower_bitcast(op)
    for name in fused:
        comps[name].detach()
        comps[name].erase()
    out = hlopass.print_hlo(module)
    lines = out.split("\n")
    if lines and lines[0].startswith("HloModule"):
        lines[0] = "HloModule xla_friendly"
    return _LAYOUT.sub(r"\1", "\n".join(lines))


def _inline(op, callee) -> None:
    """Replace a fusion op by a copy of its computation's instructions."""
    block = op.parent_block()
    mapping = {}
    for p in callee.parameters():
        mapping[p.result] = op.operands[p.attr("number")]
    for inner in callee.instructions:
        if inner.opcode == "parameter":
            continue
        new = inner.clone(value_mapper=dict(mapping))
        new.inst_name = f"{op.inst_name}.{inner.inst_name}"
        block.insert_op_before(new, op)
        mapping[inner.result] = new.result
    op.result.replace_all_uses_with(mapping[callee.root.result])
    op.detach()
    op.erase()


def _lower_bitcast(op) -> None:
    from hlopass.dialects.hlo import create_op
    from hlopass.shape import ArrayShape

    src = op.operands[0].type.data
    dst = op.shape
    block = op.parent_block()
    value = op.operands[0]
    n = [0]

    def emit(opcode, shape, attrs=None):
        nonlocal value
        n[0] += 1
        new = create_op(opcode, [value], shape, f"{op.inst_name}.{opcode}{n[0]}", attrs or {})
        block.insert_op_before(new, op)
        value = new.result

    def m2m(shape):
        return (
            list(shape.minor_to_major)
            if shape.layout is not None
            else list(range(len(shape.dims)))[::-1]
        )

    src_major = m2m(src)[::-1]
    if src_major != sorted(src_major):
        emit("transpose", ArrayShape(src.element_type, tuple(src.dims[d] for d in src_major)),
             {"dimensions": tuple(src_major)})  # fmt: skip
    dst_major = m2m(dst)[::-1]
    phys = tuple(dst.dims[d] for d in dst_major)
    if src.element_type != dst.element_type:
        bits_src = np.dtype(_np_dtype(src.element_type)).itemsize
        bits_dst = np.dtype(_np_dtype(dst.element_type)).itemsize
        total = int(np.prod(src.dims, dtype=np.int64))
        if bits_src == bits_dst:
            emit("reshape", ArrayShape(src.element_type, phys))
            emit("bitcast-convert", ArrayShape(dst.element_type, phys))
        else:  # sizes differ: go through a flat vector of the result's element type
            flat = (total * bits_src) // bits_dst
            emit("reshape", ArrayShape(src.element_type, (total,)))
            if bits_src > bits_dst:
                emit("bitcast-convert", ArrayShape(dst.element_type, (total, bits_src // bits_dst)))
            else:
                emit("reshape", ArrayShape(src.element_type, (flat, bits_dst // bits_src)))
                emit("bitcast-convert", ArrayShape(dst.element_type, (flat,)))
            emit("reshape", ArrayShape(dst.element_type, phys))
    else:
        emit("reshape", ArrayShape(src.element_type, phys))
    if dst_major != sorted(dst_major):
        emit(
            "transpose",
            ArrayShape(dst.element_type, tuple(dst.dims)),
            {"dimensions": tuple(np.argsort(dst_major).tolist())},
        )
    op.result.replace_all_uses_with(value)
    op.detach()
    op.erase()


def _np_dtype(element_type: str):
    from hlopass.literal import numpy_dtype

    return numpy_dtype(element_type)


class XlaCrash(RuntimeError):
    """XLA aborted the worker process on this module."""


class XlaWorker:
    """One long-lived child process running modules on XLA:CPU; restarted after a crash."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self._proc: subprocess.Popen | None = None
        self._n = 0

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self._stderr = open(os.path.join(self._tmp.name, "stderr.txt"), "w+")  # noqa: SIM115
        return subprocess.Popen([sys.executable, str(_CHILD), "--serve"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env)  # fmt: skip

    def execute(self, text: str, args: list[np.ndarray]) -> list[np.ndarray]:
        """XLA:CPU's outputs; raises RuntimeError (XLA's message) or XlaCrash."""
        from tests._xla_exec_child import load_arrays, save_arrays

        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        self._n += 1
        base = os.path.join(self._tmp.name, f"c{self._n}")
        with open(base + ".hlo", "w") as f:
            f.write(text)
        save_arrays(base + "_in.npz", "in", args)
        case = {"hlo": base + ".hlo", "inputs": base + "_in.npz", "outputs": base + "_out.npz"}
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps(case) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self._proc.wait()
            self._stderr.seek(0)
            tail = [ln for ln in self._stderr.read().splitlines() if ln.startswith("F")][-1:] or [
                ""
            ]
            self._proc = None
            raise XlaCrash(f"XLA aborted: {tail[0][:300]}")
        msg = json.loads(line)
        if not msg.get("ok"):
            raise RuntimeError(msg["error"])
        outs = load_arrays(case["outputs"], "out")
        for p in (case["hlo"], case["inputs"], case["outputs"]):
            os.unlink(p)
        return outs

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
        self._proc = None
        self._tmp.cleanup()
