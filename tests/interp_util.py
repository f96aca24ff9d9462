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
from hlopass.dialects.hlo import entry_computation
from hlopass.execution.inputs import random_inputs  # noqa: F401 (the tests import it from here)
from hlopass.interpreter.replicas import replicas_needed
from hlopass.ir.literal import numpy_dtype
from hlopass.text.importer import parse_hlo
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


def xla_execute_replicas(
    cases: list[tuple[str, list[list[np.ndarray]]]], timeout: float = 900
) -> list[dict]:
    """Run each (HLO text, arguments of each replica) on as many XLA:CPU replicas, in a
    child process; {"outputs": [[arrays of replica 0], ...]} or {"error"/"crash": ...}."""
    most = max((len(per) for _, per in cases), default=1)
    flat = [(text, [a for args in per for a in args]) for text, per in cases]
    saved = os.environ.get("HLOPASS_XLA_DEVICES")
    os.environ["HLOPASS_XLA_DEVICES"] = str(most)
    try:
        res = xla_execute_many(flat, timeout, [len(per) for _, per in cases])
    finally:
        if saved is None:
            del os.environ["HLOPASS_XLA_DEVICES"]
        else:
            os.environ["HLOPASS_XLA_DEVICES"] = saved
    for r, (_, per) in zip(res, cases, strict=True):
        if "outputs" in r:
            k = len(r["outputs"]) // len(per)
            r["outputs"] = [r["outputs"][i * k : (i + 1) * k] for i in range(len(per))]
    return res


def xla_execute_many(
    cases: list[tuple[str, list[np.ndarray]]],
    timeout: float = 900,
    replicas: list[int] | None = None,
) -> list[dict]:
    """Run each (HLO text, args) on XLA:CPU in a child process, restarted after a crash.

    For each case: {"outputs": [arrays]} or {"error": XLA's message} or {"crash": detail}.
    `replicas` (see `xla_execute_replicas`): how many replicas share each case's args.
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
                {
                    "hlo": hlo,
                    "inputs": ins,
                    "outputs": os.path.join(tmp, f"m{i}_out.npz"),
                    "replicas": replicas[i] if replicas else 1,
                }  # fmt: skip
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


# --- A module as XLA:CPU's execution path accepts it --------------------------------------
#
# XLA:CPU compiles modules through hlo_to_stablehlo, which rejects or CHECK-fails on
# already-fused, layout-assigned modules (XLA's emitter tests: fusion computations as the
# entry, `kind=kInput` fusions, bitcasts between layouts, partial layouts). For the oracle
# run only, `xla_friendly` rewrites such a module into an equivalent plain one: fusions are
# inlined into their callers, each bitcast becomes transpose/reshape/bitcast-convert ops
# following the source and result layouts (bitcast's meaning: same bytes, physically
# reinterpreted), cuDNN convolution calls become the convolutions they compute, and then
# all layouts are dropped (nothing else depends on them).
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
    from hlopass.passes.conv_rewriter.lowering import lower_cudnn_calls

    lower_cudnn_calls(module)  # XLA:CPU has no cuDNN: the calls as the HLO they compute
    for comp in computations(module):
        for op in list(comp.instructions):
            if op.opcode == "bitcast":
                _lower_bitcast(op)
            elif op.opcode == "custom-call" and op.attr("custom_call_target") in _TOPK_CALLS:
                _lower_topk_call(op)
    for name in fused:
        comps[name].detach()
        comps[name].erase()
    out = hlopass.print_hlo(module)
    lines = out.split("\n")
    if lines and lines[0].startswith("HloModule"):
        lines[0] = "HloModule xla_friendly"
    return _LAYOUT.sub(r"\1", "\n".join(lines))


# TopK custom calls (topk-rewriter's `TopK`, topk-specializer's GPU kernel `__gpu$TopK`):
# XLA:CPU runs neither target from text, so they become the `topk` instruction they stand
# for (the passes make them with a greater-than comparator: the largest K, stable).
_TOPK_CALLS = frozenset({"TopK", "__gpu$TopK"})


def _lower_topk_call(op) -> None:
    from hlopass.dialects.hlo import create_op

    k = op.shape.elements[0].dims[-1]
    new = create_op("topk", [op.operands[0]], op.shape, op.inst_name + ".topk",
                    {"k": k, "largest": True})  # fmt: skip
    op.parent_block().insert_op_before(new, op)
    op.result.replace_all_uses_with(new.result)
    op.detach()
    op.erase()


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
    from hlopass.ir.shape import ArrayShape

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
        # the result keeps dst's layout: a bitcast reading it (a chain) is lowered from it
        emit("transpose", dst, {"dimensions": tuple(np.argsort(dst_major).tolist())})
    op.result.replace_all_uses_with(value)
    op.detach()
    op.erase()


def _np_dtype(element_type: str):
    from hlopass.ir.literal import numpy_dtype

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


# --- modules of the collective tests: a replica count, random arguments per replica ----

ALL_REPLICAS = 4
"""Replicas for modules whose groups are all `{}` and whose header names no count."""


def with_replica_count(text: str) -> str:
    """The module with `replica_count` in its header: the passes read it, and the run uses
    it (groups all `{}` name every replica: run those on `ALL_REPLICAS`)."""
    header = text[text.index("HloModule") :].splitlines()[0]
    if "replica_count" in header:
        return text
    n = replicas_needed(parse_hlo(text))
    # (a gather or scatter over `{}` fixes the count by its shapes: replicas_needed's)
    explicit = re.search(r"replica_groups=(\{\{|\[)", text)
    if n == 1 and not explicit and not re.search(r"(reduce-scatter|all-gather)\(", text):
        n = ALL_REPLICAS
    return text.replace(
        header, re.sub(r"^(HloModule [^,\s]+)", rf"\1, replica_count={n}", header), 1
    )


def replica_args(module, n: int) -> list[list[np.ndarray]]:
    """Per replica: random values, the same on every replica for parameters marked
    `parameter_replication={true}` (the simplifier relies on that); integer offsets small."""
    rng = np.random.default_rng(7)
    params = entry_computation(module).parameters()
    per: list[list[np.ndarray]] = [[] for _ in range(n)]
    for p in params:
        shape, same = p.shape, bool(p.attr("parameter_replication"))
        for r in range(n):
            if same and r:
                per[r].append(per[0][-1].copy())
                continue
            dt = np.dtype(numpy_dtype(shape.element_type))
            if dt.kind == "b":
                a = rng.integers(0, 2, shape.dims).astype(dt)
            elif dt.kind in "iu":
                a = rng.integers(0, 8, shape.dims).astype(dt)
            else:
                a = rng.standard_normal(shape.dims).astype(dt)
            per[r].append(a)
    return per
