"""Launch grids: the (blocks, threads per block) XLA's emitters pick on a device.

Loop (one thread per output element, unrolled x4 when the output fills every SM, 128
threads per block), row / multi-row / column / small-column reduction, tiled transpose
(32x32 tiles, 64x64 for 16-bit types), scatter and in-place dynamic-update-slice (one
thread per update element), concatenate, input slices, Triton (output tiles x warps from the
block-level config) and Triton gemm (block_m x block_n tiles x split_k). Which emitter a
kernel gets is a structural fact (`hlopass.kernel_structure.emitter`); its grid depends on
the device's SM count and threads per SM, and prices the kernel (`model.kernel_time`).
"""

from __future__ import annotations

import math
from typing import Any

from hlopass.ir.attrs import backend_config as _backend
from hlopass.ir.shape import ELEMENT_BITS, ArrayShape, TupleShape
from hlopass.kernel_structure.emitter import (
    FIND,
    WARP,
    EmitterFacts,
    HeroParts,
    reduction_dims,
    slices_of_one_input,
    transpose_tiling,
)
from hlopass.kernel_structure.shapes import elements, first_array, operand_shapes

LOOP_THREADS = 128
THREADS_PER_SM = 2048  # default threads_per_core_limit (gpu_specs; DeviceSpec.threads_per_sm)
ROW_REDUCTION_MAX_THREADS = 512  # XLA MinThreadsXRowReduction
REDUCTION_THREADS_TARGET = 256
ROW_THREADS_TARGET = 128


def _vector_size(minor: int, threads: int, in_bits: int, complex_input: bool) -> int:
    """XLA GetVectorSizeForMlir."""
    if minor % 2 or threads * 2 > minor or complex_input:
        return 1
    if in_bits >= 64:
        return 1
    if in_bits >= 32:
        return 2
    if threads * 4 > minor:
        return 2
    return 4 if minor % 4 == 0 else 2


def reduction_launch(is_row: bool, dims: tuple[int, int, int], in_bits: int, out_bits: int,
                     complex_input: bool, sm_count: int) -> tuple[int, int]:  # fmt: skip
    """(blocks, threads per block) of XLA's reduction emitters."""
    if 0 in dims:  # an empty reduction: no elements to spread, as for any empty launch
        return 1, 1
    if is_row:
        _major, kept, minor = dims
        # multi-row: a power-of-two row that fits in one warp
        if minor & (minor - 1) == 0:
            small = min(in_bits, out_bits)
            large = max(in_bits, out_bits)
            vs = min(minor, max(1, 64 // max(small, 1)))
            if large >= 32:
                vs = min(max(1, 128 // large), vs)

            def threads(v: int) -> tuple[int, int]:
                tr = max(1, minor // v)
                tk = (
                    kept
                    if kept * tr <= REDUCTION_THREADS_TARGET
                    else max(1, REDUCTION_THREADS_TARGET // tr)
                )
                return tk, tr

            if minor <= WARP * vs:
                while vs > 1 and math.ceil(kept / threads(vs)[0]) < sm_count:
                    vs //= 2
                if minor <= WARP * vs:
                    tk, tr = threads(vs)
                    return math.ceil(kept / tk), tk * tr
        per_thread = 32
        tr = min(ROW_REDUCTION_MAX_THREADS, math.ceil(math.ceil(minor / per_thread) / WARP) * WARP)
        tk = 1
        if tr * 2 <= ROW_THREADS_TARGET:
            tk = kept if kept * tr <= ROW_THREADS_TARGET else ROW_THREADS_TARGET // tr
        vs = _vector_size(minor, tr, in_bits, complex_input)
        row = minor // vs
        tile = min(per_thread // vs, math.ceil(row / tr))
        blocks = math.ceil(kept / tk) * math.ceil(row / (tile * tr))
        return blocks, tk * tr
    major_kept, _reduced, minor_kept = dims
    if WARP % minor_kept == 0:  # small column reduction
        return major_kept, LOOP_THREADS
    vs = _vector_size(minor_kept, WARP, in_bits, complex_input)
    return major_kept * math.ceil(minor_kept / (WARP * vs)), WARP * WARP


def transpose_launch(op: Any, size_rule: bool = False) -> tuple[int, int] | None:
    """(blocks, threads) of the tiled transpose emitter, None if not a tiled transpose."""
    t = transpose_tiling(op, size_rule)
    if t is None:
        return None
    blocks = 1
    for i, s in enumerate(t.sizes):
        blocks *= math.ceil(s / t.tile) if i in (t.in_minor, t.out_minor) else s
    return blocks, LOOP_THREADS


def loop_launch(n: int, sm_count: int, threads_per_sm: int = THREADS_PER_SM) -> tuple[int, int]:
    """XLA's loop emitter: 128-thread blocks, unrolled x4/x2 once the elements reach
    `threads_per_core_limit x core_count` of the device."""
    if n <= 1:
        return 1, 1
    unroll = 1
    if n >= sm_count * threads_per_sm:
        for f in (4, 2):
            if n % f == 0:
                unroll = f
                break
    n = math.ceil(n / unroll)
    tpb = min(LOOP_THREADS, n)
    return math.ceil(n / tpb), tpb


def _bits(shape: Any) -> int:
    leaves = shape.leaves() if hasattr(shape, "leaves") else []
    return min((ELEMENT_BITS.get(s.element_type, 32) for s in leaves), default=32)


def launch(emitter: str, fusion_op: Any, outputs: list[Any], parts: HeroParts, sm_count: int,
           members: list[Any], threads_per_sm: int = THREADS_PER_SM,
           slices: Any = FIND) -> tuple[int, int]:  # fmt: skip
    """(blocks, threads per block) of `emitter` for a kernel writing `outputs`."""
    out_shape = outputs[0].shape if outputs else None
    if outputs and outputs[0].opcode == "tuple" and outputs[0].operands:
        out_shape = outputs[0].operands[0].type.data
    n_out = elements(first_array(out_shape)) if out_shape is not None else 1
    if emitter == "reduction":
        r = parts.reduces[0]
        is_row, dims = reduction_dims(r)
        ins = operand_shapes(r)
        nin = max(1, len(ins) // 2)
        in_bits = min(_bits(s) for s in ins[:nin])
        out_bits = _bits(r.shape)
        cplx = any(getattr(s, "element_type", "").startswith("c") for s in ins[:nin])
        return reduction_launch(is_row, dims, in_bits, out_bits, cplx, sm_count)
    if emitter == "transpose":
        for t in parts.transposes:
            lt = transpose_launch(t)
            if lt:
                return lt
    if emitter == "scatter":
        sh = operand_shapes(parts.scatters[0])
        n = (len(sh) - 1) // 2
        return loop_launch(elements(sh[n + 1]), sm_count, threads_per_sm)
    if emitter == "concatenate":
        n_in = max(elements(s) for s in operand_shapes(parts.concats[0]))
        return loop_launch(n_in, sm_count, threads_per_sm)
    if emitter == "input_slices":
        src = slices_of_one_input(outputs) if slices is FIND else slices
        return loop_launch(elements(src), sm_count, threads_per_sm)
    if emitter == "in_place_dus":
        return loop_launch(elements(operand_shapes(outputs[0])[1]), sm_count, threads_per_sm)
    if emitter in ("triton", "triton_gemm"):
        cfg = _backend(fusion_op).get("fusion_backend_config", {})
        blc = cfg.get("block_level_fusion_config", {}) if isinstance(cfg, dict) else {}
        tiles = blc.get("output_tiles") or []
        warps = int(blc.get("num_warps", 4) or 4)
        if tiles and isinstance(out_shape, (ArrayShape, TupleShape)):
            arr = first_array(out_shape)
            sizes = [int(x) for x in tiles[0].get("sizes", [])]
            if isinstance(arr, ArrayShape) and len(sizes) == len(arr.dims):
                blocks = math.prod(
                    math.ceil(d / max(1, t)) for d, t in zip(arr.dims, sizes, strict=True)
                )
                return max(1, blocks), warps * WARP
    if emitter == "triton":
        return loop_launch(n_out, sm_count, threads_per_sm)
    if emitter == "triton_gemm":
        cfg = _backend(fusion_op).get("fusion_backend_config", {})
        g = cfg.get("triton_gemm_config", {}) if isinstance(cfg, dict) else {}
        dot = next((m for m in members if m.opcode in ("dot", "scaled-dot")), None)
        if g and dot is not None and isinstance(dot.shape, ArrayShape) and dot.shape.rank >= 2:
            d = dot.shape.dims
            bm, bn = int(g.get("block_m", 64)), int(g.get("block_n", 64))
            sk, warps = int(g.get("split_k", 1)), int(g.get("num_warps", 4))
            blocks = math.prod(d[:-2]) * math.ceil(d[-2] / bm) * math.ceil(d[-1] / bn) * sk
            return max(1, blocks), warps * WARP
        return max(1, sm_count), LOOP_THREADS
    return loop_launch(n_out, sm_count, threads_per_sm)


def facts_launch(facts: EmitterFacts, emitter: str, sm_count: int,
                 threads_per_sm: int) -> tuple[int, int]:  # fmt: skip
    """The launch grid of a (possibly merged) sibling kernel described by `facts`."""
    return launch(emitter, None, list(facts.outputs), facts.parts(), sm_count, [],
                  threads_per_sm, slices=facts.slices_shape)  # fmt: skip
