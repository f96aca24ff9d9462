"""One small module per HLO opcode, using the opcode's attributes with non-default values:
the table `tests/test_grammar.py` runs through XLA's parser and printer and through ours.

`SAMPLES` maps a sample id (`opcode` or `opcode/variant`) to module text. Every result
shape is written; the shape-inference test strips those XLA can infer.
"""

from __future__ import annotations

import re

_ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
"""
_LT = """lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT
}
"""
_GE = """ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}
"""
_NEG = """neg {
  x = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(x)
}
"""
_EXP = """ex {
  x = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} exponential(x)
}
"""
_LOOP = """cond {
  t = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}

body {
  t = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[4] get-tuple-element(t), index=1
  y = f32[4] negate(x)
  ROOT r = (s32[], f32[4]) tuple(j, y)
}
"""
_SCAN_BODY = """step {
  x = f32[] parameter(0)
  c = f32[] parameter(1)
  s = f32[] add(x, c)
  m = f32[] multiply(x, c)
  ROOT r = (f32[], f32[]) tuple(m, s)
}
"""


def _module(body: str, comps: str = "", header: str = "") -> str:
    lines = "\n".join("  " + ln.strip() for ln in body.strip().splitlines())
    return f"HloModule sample{header}\n\n{comps}\nENTRY main {{\n{lines}\n}}\n"


def _params(*shapes: str) -> str:
    return "\n".join(f"p{i} = {s} parameter({i})" for i, s in enumerate(shapes))


SAMPLES: dict[str, str] = {}


def _add(key: str, body: str, comps: str = "", header: str = "") -> None:
    SAMPLES[key] = _module(body, comps, header)


for _op in ("abs", "ceil", "floor", "negate", "sign", "round-nearest-afz", "round-nearest-even",
            "cbrt", "cosine", "cosh", "erf", "exponential", "exponential-minus-one", "log",
            "log-plus-one", "logistic", "rsqrt", "sine", "sinh", "sqrt", "tan", "tanh", "acos",
            "acosh", "asin", "asinh", "atanh"):  # fmt: skip
    _add(_op, _params("f32[2,3]{0,1}") + f"\nROOT r = f32[2,3]{{0,1}} {_op}(p0)")
for _op in ("acos", "acosh", "asin", "asinh", "atanh", "cbrt", "cosine", "cosh", "erf",
            "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt",
            "sine", "sinh", "sqrt", "tan", "tanh"):  # fmt: skip
    _add(f"{_op}/accuracy", _params("f32[4]") + f"\nROOT r = f32[4] {_op}(p0), "
         "result_accuracy={tolerance={atol=0.5,rtol=0.25,ulps=2}}")  # fmt: skip
_add(
    "sqrt/highest", _params("f32[4]") + "\nROOT r = f32[4] sqrt(p0), result_accuracy={mode=highest}"
)
for _op in ("not", "count-leading-zeros", "popcnt"):
    _add(_op, _params("s32[4]") + f"\nROOT r = s32[4] {_op}(p0)")
_add("is-finite", _params("f32[2,3]{0,1}") + "\nROOT r = pred[2,3]{0,1} is-finite(p0)")
for _op in ("real", "imag"):
    _add(_op, _params("c64[2,3]{0,1}") + f"\nROOT r = f32[2,3]{{0,1}} {_op}(p0)")
_add("abs/complex", _params("c64[4]") + "\nROOT r = f32[4] abs(p0)")
for _op in ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
            "atan2"):  # fmt: skip
    _add(
        _op, _params("f32[2,3]{0,1}", "f32[2,3]{1,0}") + f"\nROOT r = f32[2,3]{{0,1}} {_op}(p0, p1)"
    )
for _op in ("and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical",
            "mulhi"):  # fmt: skip
    _add(_op, _params("s32[4]", "s32[4]") + f"\nROOT r = s32[4] {_op}(p0, p1)")
_add("complex", _params("f32[4]", "f32[4]") + "\nROOT r = c64[4] complex(p0, p1)")
_add(
    "stochastic-convert",
    _params("f32[4]", "u32[4]") + "\nROOT r = bf16[4] stochastic-convert(p0, p1)",
)
_add(
    "compare",
    _params("f32[4]", "f32[4]")
    + "\nROOT r = pred[4] compare(p0, p1), direction=GE, type=TOTALORDER",
)
_add(
    "compare/default-type",
    _params("s32[4]", "s32[4]") + "\nROOT r = pred[4] compare(p0, p1), direction=NE",
)
_add(
    "select",
    _params("pred[2,3]{0,1}", "f32[2,3]", "f32[2,3]")
    + "\nROOT r = f32[2,3]{0,1} select(p0, p1, p2)",
)
_add(
    "clamp",
    _params("f32[]", "f32[2,3]{0,1}", "f32[]") + "\nROOT r = f32[2,3]{0,1} clamp(p0, p1, p2)",
)
_add("convert", _params("f32[4]") + "\nROOT r = s32[4] convert(p0)")
_add("bitcast-convert", _params("f32[4]") + "\nROOT r = u32[4] bitcast-convert(p0)")
_add(
    "reduce-precision",
    _params("f32[4]") + "\nROOT r = f32[4] reduce-precision(p0), exponent_bits=5, mantissa_bits=10",
)
_add(
    "parameter",
    "p0 = f32[4] parameter(0), parameter_replication={true}\nROOT r = f32[4] negate(p0)",
)
_add("constant", "ROOT c = f32[2,2] constant({{1, 2.5}, {-0.5, 1e+10}})")
_add("iota", "ROOT r = s32[3,4] iota(), iota_dimension=1")
_add("broadcast", _params("f32[3]") + "\nROOT r = f32[2,3] broadcast(p0), dimensions={1}")
_add("reshape", _params("f32[2,3]") + "\nROOT r = f32[6] reshape(p0), inferred_dimension=0")
_add("dynamic-reshape", _params("f32[4]", "s32[]") + "\nROOT r = f32[<=4] dynamic-reshape(p0, p1)")
_add("transpose", _params("f32[2,3]{0,1}") + "\nROOT r = f32[3,2] transpose(p0), dimensions={1,0}")
_add(
    "transpose/layout",
    _params("f32[2,3,4]{0,2,1}") + "\nROOT r = f32[4,2,3]{1,0,2} transpose(p0), dimensions={2,0,1}",
)
_add(
    "transpose/row-major",
    _params("f32[2,3,4]") + "\nROOT r = f32[3,4,2]{0,2,1} transpose(p0), dimensions={1,2,0}",
)
_add("bitcast", _params("f32[2,3]") + "\nROOT r = f32[6] bitcast(p0)")
_add("copy", _params("f32[2,3]") + "\nROOT r = f32[2,3]{0,1} copy(p0)")
_add("reverse", _params("f32[2,3]{0,1}") + "\nROOT r = f32[2,3]{0,1} reverse(p0), dimensions={0,1}")
_add("slice", _params("f32[8,6]") + "\nROOT r = f32[3,6] slice(p0), slice={[1:7:2], [0:6]}")
_add(
    "dynamic-slice",
    _params("f32[8]", "s32[]") + "\nROOT r = f32[2] dynamic-slice(p0, p1), dynamic_slice_sizes={2}",
)
_add(
    "dynamic-update-slice",
    _params("f32[8]", "f32[2]", "s32[]") + "\nROOT r = f32[8] dynamic-update-slice(p0, p1, p2)",
)
_add(
    "concatenate",
    _params("f32[2,3]", "f32[4,3]") + "\nROOT r = f32[6,3] concatenate(p0, p1), dimensions={0}",
)
_add("pad", _params("f32[2,3]", "f32[]") + "\nROOT r = f32[5,10] pad(p0, p1), padding=1_2x0_1_3")
_add(
    "reduce",
    _params("f32[2,3]", "f32[]") + "\nROOT r = f32[2] reduce(p0, p1), dimensions={1}, to_apply=add",
    _ADD,
)
_add(
    "reduce-window",
    _params("f32[4,6]", "f32[]")
    + "\nROOT r = f32[2,3] reduce-window(p0, p1), window={size=2x2 stride=2x2 pad=0_0x0_0 lhs_dilate=1x1 rhs_dilate=1x1}, to_apply=add",
    _ADD,
)
_add(
    "reduce-window/dilated",
    _params("f32[4,6]", "f32[]")
    + "\nROOT r = f32[4,5] reduce-window(p0, p1), window={size=2x2 pad=1_0x0_0 rhs_dilate=1x2 rhs_reversal=0x1}, to_apply=add",
    _ADD,
)
_add(
    "select-and-scatter",
    _params("f32[4]", "f32[2]", "f32[]")
    + "\nROOT r = f32[4] select-and-scatter(p0, p1, p2), window={size=2 stride=2}, select=ge, scatter=add",
    _ADD + "\n" + _GE,
)
_add(
    "map",
    _params("f32[4]", "f32[4]") + "\nROOT r = f32[4] map(p0, p1), dimensions={0}, to_apply=add",
    _ADD,
)
_add(
    "dot",
    _params("f32[5,2,3]", "f32[5,3,4]")
    + "\nROOT r = f32[5,2,4] dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={high,highest}",
)
_add(
    "dot/algorithm",
    _params("f32[2,3]", "f32[3,4]")
    + "\nROOT r = f32[2,4] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, algorithm=dot_bf16_bf16_f32",
)
_add(
    "ragged-dot",
    _params("f32[11,5]", "f32[3,5,7]", "s32[3]")
    + "\nROOT r = f32[11,7] ragged-dot(p0, p1, p2), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}, operand_precision={high,high}",
)
_add(
    "scaled-dot",
    _params("f8e4m3fn[2,32]", "f8e8m0fnu[2,1]", "f8e4m3fn[4,32]", "f8e8m0fnu[4,1]")
    + "\nROOT r = bf16[2,4] scaled-dot(p0, p1, p2, p3), lhs_contracting_dims={1}, rhs_contracting_dims={1}",
)
_add(
    "ragged-dot/batch",
    _params("f32[2,11,5]", "f32[3,2,5,7]", "s32[2,3]")
    + "\nROOT r = f32[2,11,7] ragged-dot(p0, p1, p2), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}",
)
_add(
    "scaled-dot/batch",
    _params("f8e4m3fn[2,3,32]", "f8e8m0fnu[2,3,1]", "f8e4m3fn[2,4,32]", "f8e8m0fnu[2,4,1]")
    + "\nROOT r = bf16[2,3,4] scaled-dot(p0, p1, p2, p3), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}, operand_precision={high,high}, algorithm=dot_bf16_bf16_f32",
)
_add(
    "collective-permute-start/inplace",
    _params("f32[8]", "f32[8]", "s32[1]", "s32[1]")
    + "\ns = (f32[8], f32[8]) collective-permute-start(p0, p1, p2, p3), source_target_pairs={{0,1}}, slice_sizes={{4}}\nROOT d = f32[8] collective-permute-done(s)",
)
_add(
    "convolution",
    _params("f32[1,6,8]", "f32[3,8,16]")
    + "\nROOT r = f32[1,3,16] convolution(p0, p1), window={size=3 stride=2 pad=1_0}, dim_labels=b0f_0io->b0f, convolution_kind=fprop, operand_precision={high,default}",
)
_add(
    "convolution/groups",
    _params("f32[4,6,8]", "f32[3,4,16]")
    + "\nROOT r = f32[4,4,16] convolution(p0, p1), window={size=3 lhs_dilate=1 rhs_dilate=1}, dim_labels=b0f_0io->b0f, feature_group_count=2, convolution_kind=wgrad",
)
_add(
    "convolution/batch-groups",
    _params("f32[4,6,8]", "f32[3,8,16]")
    + "\nROOT r = f32[2,4,16] convolution(p0, p1), window={size=3}, dim_labels=b0f_0io->b0f, batch_group_count=2",
)
_add(
    "convolution/nowindow",
    _params("f32[2,3]", "f32[3,4]")
    + "\nROOT r = f32[2,4] convolution(p0, p1), dim_labels=bf_io->bf, convolution_kind=dgrad",
)
_add("fft", _params("c64[8,4]") + "\nROOT r = c64[8,4] fft(p0), fft_type=IFFT, fft_length={4}")
_add("fft/rfft", _params("f32[8,6]") + "\nROOT r = c64[8,4] fft(p0), fft_type=RFFT, fft_length={6}")
_add(
    "fft/irfft", _params("c64[8,4]") + "\nROOT r = f32[8,6] fft(p0), fft_type=IRFFT, fft_length={6}"
)
_add(
    "gather",
    _params("f32[3,4,5]", "s32[2,2]")
    + "\nROOT r = f32[2,4,5] gather(p0, p1), offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,4,5}, indices_are_sorted=true",
)
_add(
    "gather/batching",
    _params("f32[2,3,5]", "s32[2,4,1]")
    + "\nROOT r = f32[2,4,5] gather(p0, p1), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,5}",
)
_add(
    "scatter",
    _params("f32[3,5]", "s32[2,1]", "f32[2,5]")
    + "\nROOT r = f32[3,5] scatter(p0, p1, p2), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, indices_are_sorted=true, unique_indices=true, to_apply=add",
    _ADD,
)
_add(
    "scatter/batching",
    _params("f32[2,3,5]", "s32[2,4,1]", "f32[2,4,5]")
    + "\nROOT r = f32[2,3,5] scatter(p0, p1, p2), update_window_dims={2}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add",
    _ADD,
)
_add(
    "sort",
    _params("f32[2,3]{0,1}")
    + "\nROOT r = f32[2,3]{0,1} sort(p0), dimensions={1}, is_stable=true, to_apply=lt",
    _LT,
)
_add(
    "sort/pair",
    _params("f32[4]", "s32[4]")
    + "\nROOT r = (f32[4], s32[4]) sort(p0, p1), dimensions={0}, to_apply=lt4",
    _LT.replace("lt {", "lt4 {").replace(
        "b = f32[] parameter(1)",
        "b = f32[] parameter(1)\n  c = s32[] parameter(2)\n  d = s32[] parameter(3)",
    ),
)
_add(
    "scan",
    _params("f32[8]", "f32[]")
    + "\nROOT r = (f32[8], f32[]) scan(p0, p1), dimensions={0}, num_carries=1, is_reverse=true, is_associative=true, to_apply=step",
    _SCAN_BODY,
)
_add(
    "scan/plain",
    _params("f32[8]", "f32[]")
    + "\nROOT r = (f32[8], f32[]) scan(p0, p1), dimensions={0}, num_carries=1, to_apply=step",
    _SCAN_BODY,
)
_add("topk", _params("f32[3,8]") + "\nROOT r = (f32[3,2], s32[3,2]) topk(p0), k=2, largest=false")
_add("topk/default", _params("f32[3,8]") + "\nROOT r = (f32[3,2], s32[3,2]) topk(p0), k=2")
_add("tuple", _params("f32[2]{0}", "s32[]") + "\nROOT r = (f32[2], s32[]) tuple(p0, p1)")
_add(
    "get-tuple-element",
    _params("(f32[2,3]{0,1}, s32[])") + "\nROOT r = f32[2,3]{0,1} get-tuple-element(p0), index=0",
)
_add(
    "while",
    _params("(s32[], f32[4])") + "\nROOT r = (s32[], f32[4]) while(p0), condition=cond, body=body",
    _LOOP,
)
_add(
    "conditional",
    _params("pred[]", "f32[4]", "f32[4]")
    + "\nROOT r = f32[4] conditional(p0, p1, p2), true_computation=neg, false_computation=ex",
    _NEG + "\n" + _EXP,
)
_add(
    "conditional/branches",
    _params("s32[]", "f32[4]", "f32[4]")
    + "\nROOT r = f32[4] conditional(p0, p1, p2), branch_computations={neg, ex}",
    _NEG + "\n" + _EXP,
)
_add(
    "call",
    _params("f32[4]")
    + '\nROOT r = f32[4] call(p0), to_apply=neg, is_composite=true, frontend_attributes={composite.attributes={},composite.name="my.neg",composite.version="1"}',
    _NEG,
)
_add(
    "fusion",
    _params("f32[4]")
    + "\nROOT r = f32[4] fusion(p0), kind=kLoop, calls=neg, output_to_operand_aliasing={{}: (0, {})}",
    _NEG,
)
_add(
    "custom-call",
    _params("f32[4]", "f32[4]")
    + '\nROOT r = f32[4] custom-call(p0, p1), custom_call_target="foo", operand_layout_constraints={f32[4]{0}, f32[4]{0}}, custom_call_has_side_effect=true, output_to_operand_aliasing={{}: (1, {})}, schedule=SCHEDULE_LATEST, api_version=API_VERSION_STATUS_RETURNING, backend_config="cfg"',
)
_add(
    "custom-call/conv",
    _params("f32[1,6,8]", "f32[3,8,16]")
    + '\nROOT r = f32[1,3,16] custom-call(p0, p1), window={size=3 stride=2 pad=1_0}, dim_labels=b0f_0io->b0f, feature_group_count=1, batch_group_count=1, custom_call_target="conv", operand_precision={high,high}, padding_type=PADDING_SAME',
)
_add(
    "custom-call/called",
    _params("f32[4]")
    + '\nROOT r = f32[4] custom-call(p0), custom_call_target="with_comp", called_computations={neg}, literal=s32[2]{0} {1, 2}',
    _NEG,
)
_add(
    "custom-call/to_apply",
    _params("f32[4]")
    + '\nROOT r = f32[4] custom-call(p0), custom_call_target="apply", to_apply=neg',
    _NEG,
)
_add(
    "triangular-solve",
    _params("f32[4,4]", "f32[4,3]")
    + "\nROOT r = f32[4,3] triangular-solve(p0, p1), left_side=true, lower=true, unit_diagonal=true, transpose_a=TRANSPOSE",
)
_add("cholesky", _params("f32[4,4]") + "\nROOT r = f32[4,4] cholesky(p0), lower=true")
_add(
    "batch-norm-training",
    _params("f32[2,3,4]", "f32[3]", "f32[3]")
    + "\nROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-training(p0, p1, p2), epsilon=0.001, feature_index=1",
)
_add(
    "batch-norm-inference",
    _params("f32[2,3,4]", "f32[3]", "f32[3]", "f32[3]", "f32[3]")
    + "\nROOT r = f32[2,3,4] batch-norm-inference(p0, p1, p2, p3, p4), epsilon=0.5, feature_index=1",
)
_add(
    "batch-norm-grad",
    _params("f32[2,3,4]", "f32[3]", "f32[3]", "f32[3]", "f32[2,3,4]")
    + "\nROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-grad(p0, p1, p2, p3, p4), epsilon=0.25, feature_index=1",
)
_add("rng", _params("f32[]", "f32[]") + "\nROOT r = f32[4] rng(p0, p1), distribution=rng_normal")
_add(
    "rng-bit-generator",
    _params("u64[2]") + "\nROOT r = (u64[2], u32[4]) rng-bit-generator(p0), algorithm=rng_philox",
)
_add("rng-get-and-update-state", "ROOT r = u64[2] rng-get-and-update-state(), delta=4")
_add(
    "get-dimension-size",
    _params("f32[2,<=3]") + "\nROOT r = s32[] get-dimension-size(p0), dimensions={1}",
)
_add(
    "set-dimension-size",
    _params("f32[2,3]{0,1}", "s32[]")
    + "\nROOT r = f32[2,<=3]{0,1} set-dimension-size(p0, p1), dimensions={1}",
)
_add(
    "domain",
    _params("f32[4]")
    + '\nROOT r = f32[4] domain(p0), domain={kind="sharding", entry={maximal device=0}, exit={maximal device=1}}',
)
_add("opt-barrier", _params("(f32[4], s32[])") + "\nROOT r = (f32[4], s32[]) opt-barrier(p0)")
_add(
    "add-dependency",
    _params("f32[2,3]{0,1}")
    + "\nt = token[] after-all()\nROOT r = f32[2,3]{0,1} add-dependency(p0, t)",
)
_add("after-all", "a = token[] after-all()\nROOT r = token[] after-all(a, a)")
_add("infeed", 't = token[] after-all()\nROOT r = (f32[4], token[]) infeed(t), infeed_config="cfg"')
_add(
    "outfeed",
    _params("f32[4]")
    + '\nt = token[] after-all()\nROOT r = token[] outfeed(p0, t), outfeed_shape=f32[4]{0}, outfeed_config="cfg"',
)
_add(
    "send",
    _params("f32[4]")
    + "\nt = token[] after-all()\ns = (f32[4], u32[], token[]) send(p0, t), channel_id=5, is_host_transfer=true\nROOT d = token[] send-done(s), channel_id=5, is_host_transfer=true",
)
_add(
    "recv",
    "t = token[] after-all()\nr = (f32[4], u32[], token[]) recv(t), channel_id=6, is_host_transfer=true\nROOT d = (f32[4], token[]) recv-done(r), channel_id=6, is_host_transfer=true",
)
_add("replica-id", "ROOT r = u32[] replica-id()")
_add("partition-id", "ROOT r = u32[] partition-id()")
_add(
    "all-gather",
    _params("f32[4]")
    + "\nROOT r = f32[8] all-gather(p0), channel_id=1, replica_groups={{0,1}}, constrain_layout=true, dimensions={0}, use_global_device_ids=true",
)
_add(
    "all-gather-start",
    _params("f32[4]")
    + "\ns = (f32[4], f32[8]) all-gather-start(p0), channel_id=1, replica_groups=[1,2]<=[2], constrain_layout=true, dimensions={0}, use_global_device_ids=true\nROOT d = f32[8] all-gather-done(s)",
)
_add(
    "all-reduce",
    _params("f32[4]")
    + "\nROOT r = f32[4] all-reduce(p0), channel_id=2, replica_groups={{0},{1}}, constrain_layout=true, use_global_device_ids=true, mode=flattened_id, to_apply=add",
    _ADD,
)
_add(
    "all-reduce-start",
    _params("f32[4]")
    + "\ns = f32[4] all-reduce-start(p0), channel_id=3, replica_groups={}, constrain_layout=true, use_global_device_ids=true, to_apply=add\nROOT d = f32[4] all-reduce-done(s)",
    _ADD,
)
_add(
    "reduce-scatter",
    _params("f32[8]")
    + "\nROOT r = f32[4] reduce-scatter(p0), channel_id=3, replica_groups={{0,1}}, constrain_layout=true, use_global_device_ids=true, dimensions={0}, to_apply=add",
    _ADD,
)
_add(
    "all-to-all",
    _params("f32[4,2]")
    + "\nROOT r = f32[4,2] all-to-all(p0), channel_id=4, replica_groups={{0,1}}, constrain_layout=true, dimensions={0}",
)
_add(
    "ragged-all-to-all",
    _params("f32[8]", "f32[8]", "s32[2]", "s32[2]", "s32[2]", "s32[2]")
    + "\nROOT r = f32[8] ragged-all-to-all(p0, p1, p2, p3, p4, p5), channel_id=7, replica_groups={{0,1}}, dimensions={0}",
)
_add(
    "collective-broadcast",
    _params("f32[4]")
    + "\nROOT r = f32[4] collective-broadcast(p0), channel_id=8, replica_groups={{0,1}}",
)
_add(
    "collective-permute",
    _params("f32[4]")
    + "\nROOT r = f32[4] collective-permute(p0), channel_id=9, source_target_pairs={{0,1},{1,0}}",
)
_add(
    "collective-permute/inplace",
    _params("f32[8]", "f32[8]", "s32[1]", "s32[1]")
    + "\nROOT r = f32[8] collective-permute(p0, p1, p2, p3), source_target_pairs={{0,1}}, slice_sizes={{4}}",
)
_add(
    "collective-permute-start",
    _params("f32[4]")
    + "\ns = (f32[4], f32[4]) collective-permute-start(p0), channel_id=9, source_target_pairs={{0,1},{1,0}}\nROOT d = f32[4] collective-permute-done(s)",
)
_add(
    "copy-start",
    _params("f32[4]")
    + "\ns = (f32[4], f32[4], u32[]) copy-start(p0), cross_program_prefetch_index=0\nROOT d = f32[4] copy-done(s)",
)
_add("async-start", _params("f32[4]") + "\ns = ((f32[4]), f32[4], s32[]) async-start(p0), output_to_operand_aliasing={{1}: (0, {})}, async_execution_thread=\"side\", calls=twostep\nu = ((f32[4]), f32[4], s32[]) async-update(s), async_execution_thread=\"side\", calls=twostep\nROOT d = f32[4] async-done(u), async_execution_thread=\"side\", calls=twostep",
     "twostep {\n  x = f32[4] parameter(0)\n  n = f32[4] negate(x)\n  ROOT e = f32[4] exponential(n)\n}, execution_thread=\"side\"\n")  # fmt: skip
_add(
    "common-attributes",
    _params("f32[4]")
    + '\nb = f32[4] negate(p0)\nROOT r = f32[4] add(p0, b), sharding={replicated}, frontend_attributes={b="2",a="1"}, control-predecessors={b}, statistics={visualizing_index=1,stat-1=33}, origin={{"r"}}, metadata={op_type="Add" op_name="x/add" source_file="f.py" source_line=3}, backend_config={"k":1}',
)

# Opcodes XLA's sugar prints for an async-start wrapping them, with a wrapped instruction.
ASYNC_WRAPPED: dict[str, tuple[str, str, str]] = {
    # opcode: (wrapped instruction, its result shape, extra computations)
    "copy": ("c = f32[4] copy(x)", "f32[4]", ""),
    "all-reduce": ("c = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add", "f32[4]", _ADD),
    "all-gather": ("c = f32[8] all-gather(x), replica_groups={{0,1}}, dimensions={0}", "f32[8]", ""),
    "collective-permute": ("c = f32[4] collective-permute(x), source_target_pairs={{0,1}}", "f32[4]", ""),
    "all-to-all": ("c = f32[4] all-to-all(x), replica_groups={{0,1}}, dimensions={0}", "f32[4]", ""),
    "reduce-scatter": ("c = f32[2] reduce-scatter(x), replica_groups={{0,1}}, dimensions={0}, to_apply=add", "f32[2]", _ADD),
    "collective-broadcast": ("c = f32[4] collective-broadcast(x), replica_groups={{0,1}}", "f32[4]", ""),
    "custom-call": ("c = f32[4] custom-call(x), custom_call_target=\"foo\"", "f32[4]", ""),
    "negate": ("c = f32[4] negate(x)", "f32[4]", ""),
}  # fmt: skip


# send and recv take a token: whole modules.
ASYNC_MODULES: dict[str, str] = {
    "send": _module(
        "p0 = f32[4] parameter(0)\nt = token[] after-all()\n"
        "s = ((f32[4], token[]), (f32[4], u32[], token[]), u32[]) async-start(p0, t), calls=wrapped\n"
        "ROOT d = (f32[4], u32[], token[]) async-done(s)",
        "wrapped {\n  x = f32[4] parameter(0)\n  t = token[] parameter(1)\n"
        "  ROOT s = (f32[4], u32[], token[]) send(x, t), channel_id=1\n}\n",
    ),
    "recv": _module(
        "t = token[] after-all()\n"
        "s = ((token[]), (f32[4], u32[], token[]), u32[]) async-start(t), calls=wrapped\n"
        "ROOT d = (f32[4], u32[], token[]) async-done(s)",
        "wrapped {\n  t = token[] parameter(0)\n"
        "  ROOT s = (f32[4], u32[], token[]) recv(t), channel_id=1\n}\n",
    ),
}


def async_module(opcode: str, update: bool) -> str:
    if opcode in ASYNC_MODULES:
        return ASYNC_MODULES[opcode]
    inst, shape, comps = ASYNC_WRAPPED[opcode]
    wrapped = f"wrapped {{\n  x = f32[4] parameter(0)\n  ROOT {inst}\n}}\n"
    t = f"((f32[4]), {shape}, u32[])"
    body = f"p0 = f32[4] parameter(0)\ns = {t} async-start(p0), calls=wrapped\n"
    if update:
        body += f"u = {t} async-update(s)\nROOT d = {shape} async-done(u)"
    else:
        body += f"ROOT d = {shape} async-done(s)"
    return _module(body, comps + "\n" + wrapped)


# Whole-module forms (issue 13's fidelity list): a scheduled module keeps the text order of
# every computation but fusion bodies, which print in post order; inline computations.
SAMPLES["module/scheduled-fusion"] = """HloModule scheduled, is_scheduled=true

add {
  b = f32[] parameter(1)
  a = f32[] parameter(0)
  ROOT r = f32[] add(a, b)
}

fused {
  q = f32[] parameter(1)
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT s = f32[] reduce(n, q), dimensions={0}, to_apply=add
}

ENTRY main {
  z = f32[] constant(0)
  x = f32[4] parameter(0)
  ROOT f = f32[] fusion(x, z), kind=kLoop, calls=fused
}
"""
SAMPLES["module/inline-computations"] = """HloModule inline

ENTRY main {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  r = f32[] reduce(x, z), dimensions={0}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT r = f32[] add(a, b)
  }
  ROOT t = f32[] reduce(x, z), dimensions={0}, to_apply={a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT m = f32[] maximum(a, b) }
}
"""
# Non-ASCII text in strings prints as XLA's CEscape writes it (octal UTF-8 bytes).
SAMPLES["module/non-ascii-strings"] = """HloModule text, frontend_attributes={k="\u00e9"}

ENTRY main {
  p = f32[3] parameter(0), metadata={op_name="\u00e9" source_file="\u00fc.py"}
  ROOT c = f32[3] custom-call(p), custom_call_target="tg\u00e9", backend_config="b\u00e9", frontend_attributes={a="\u00f1"}
}
"""

# Column-major operands: which inferred shapes keep the operand's layout (XLA's answer).
_CM = "f32[4,6]{0,1}"
for _key, _body, _comps in (
    ("reduce", "ROOT r = f32[4] reduce(p0, p1), dimensions={1}, to_apply=add", _ADD),
    ("pad", "ROOT r = f32[6,7] pad(p0, p1), padding=1_1x0_1", ""),
    ("concatenate", "ROOT r = f32[8,6] concatenate(p0, p0), dimensions={0}", ""),
    ("reverse", "ROOT r = f32[4,6]{0,1} reverse(p0), dimensions={1}", ""),
    ("map", "ROOT r = f32[4,6] map(p0, p0), dimensions={0,1}, to_apply=add", _ADD),
    ("sort", "ROOT r = f32[4,6]{0,1} sort(p0), dimensions={0}, to_apply=lt", _LT),
    ("reduce-window", "ROOT r = f32[2,3] reduce-window(p0, p1), window={size=2x2 stride=2x2}, to_apply=add", _ADD),
    ("select-and-scatter", "s = f32[2,3] parameter(2)\nROOT r = f32[4,6]{0,1} select-and-scatter(p0, s, p1), window={size=2x2 stride=2x2}, select=ge, scatter=add", _ADD + "\n" + _GE),
    ("dot", "ROOT r = f32[6,6] dot(p0, p0), lhs_contracting_dims={0}, rhs_contracting_dims={0}", ""),
    ("clamp", "ROOT r = f32[4,6]{0,1} clamp(p1, p0, p1)", ""),
    ("is-finite", "ROOT r = pred[4,6]{0,1} is-finite(p0)", ""),
    ("copy", "ROOT r = f32[4,6]{0,1} copy(p0)", ""),
    ("tuple", "ROOT r = (f32[4,6]{0,1}, f32[]) tuple(p0, p1)", ""),
):  # fmt: skip
    _add(f"{_key}/column-major", _params(_CM, "f32[]") + "\n" + _body, _comps)


_PARAM = re.compile(r"(\w+) = (.+?) parameter\(\d+\)(.*)$")


def async_of_sample(key: str, update: bool) -> str | None:
    """Sample `key` with its ROOT instruction wrapped in an async-start/[update]/done (the
    wrapped computation is the sample's entry), or None unless the entry is its parameters
    and a ROOT taking them in order: every opcode XLA prints with async sugar, with every
    attribute."""
    head, _, entry = SAMPLES[key].partition("ENTRY main {\n")
    lines = [ln.strip() for ln in entry.rstrip().removesuffix("}").strip().splitlines()]
    params = [m for m in map(_PARAM.match, lines) if m is not None]
    rest = [ln for ln in lines if _PARAM.match(ln) is None]
    if len(rest) != 1 or not rest[0].startswith("ROOT "):
        return None
    shape = re.match(r"ROOT [\w.]+ = (.+?) [a-z][a-z0-9\-]*\(([^)]*)\)", rest[0])
    assert shape is not None, key
    names = ", ".join(m.group(1) for m in params)
    if shape.group(2) != names:
        return None  # the sugar shows the parameters: only when they are the operands
    t = f"(({', '.join(m.group(2) for m in params)}), {shape.group(1)}, u32[])"
    body = [m.group(0) for m in params]
    body.append(f"async.start = {t} async-start({names}), calls=wrapped")
    last = "async.start"
    if update:
        body.append(f"async.update = {t} async-update(async.start)")
        last = "async.update"
    body.append(f"ROOT async.done = {shape.group(1)} async-done({last})")
    wrapped = [f"{m.group(1)} = {m.group(2)} parameter({i})" for i, m in enumerate(params)]
    comp = "wrapped {\n" + "\n".join("  " + ln for ln in [*wrapped, rest[0]]) + "\n}\n"
    return f"{head}{comp}\nENTRY main {{\n" + "\n".join("  " + ln for ln in body) + "\n}\n"


def _async_attrs(inner: str, start: str = "", done: str = "") -> str:
    return _module(
        "p0 = f32[4] parameter(0)\n"
        f"s = ((f32[4]), f32[4], u32[]) async-start(p0), calls=wrapped{start}\n"
        f"ROOT d = f32[4] async-done(s){done}",
        f"wrapped {{\n  x = f32[4] parameter(0)\n  ROOT c = f32[4] negate(x){inner}\n}}\n",
    )


_SH, _FA, _ST = ", sharding={replicated}", ', frontend_attributes={a="1"}', ", statistics={visualizing_index=1,s=2}"  # fmt: skip
_MD, _BC = ', metadata={op_name="w"}', ', backend_config={"w":1}'
# Common attributes on the wrapped instruction, the start and the done of a sugared async
# op: XLA shows the wrapped one's sharding, frontend_attributes and statistics on the start.
ASYNC_ATTRS: dict[str, str] = {
    "wrapped-all": _async_attrs(_SH + _FA + _ST + _MD + _BC + ', origin={{"w"}}'),
    "start-all": _async_attrs("", _SH + _FA + _MD + _BC),
    "both-fa": _async_attrs(_FA, ', frontend_attributes={b="2"}'),
    "wrapped-sh-start-fa": _async_attrs(_SH, ', frontend_attributes={b="2"}'),
    "wrapped-fa-start-sh": _async_attrs(_FA, ", sharding={maximal device=0}"),
    "wrapped-st-start-fa": _async_attrs(_ST, ', frontend_attributes={b="2"}'),
    "done-fa": _async_attrs("", "", ', frontend_attributes={b="2"}'),
    "done-fa-wrapped-st": _async_attrs(_ST, "", ', frontend_attributes={b="2"}'),
    "done-fa-wrapped-fa": _async_attrs(_FA, "", ', frontend_attributes={b="2"}'),
    "done-st": _async_attrs("", "", ", statistics={visualizing_index=3,t=2}"),
    "done-sh-wrapped-fa": _async_attrs(_FA, "", _SH),
    # XLA prints the start's statistics twice (its own and the wrapped instruction's) and
    # both shardings: it cannot read these prints back.
    "start-st": _async_attrs("", ", statistics={visualizing_index=3,t=2}"),
    "both-sh": _async_attrs(_SH, ", sharding={maximal device=0}"),
}


# Module header attributes, stack frames with every metadata field, the recovery table and
# the forms of the attributes every instruction may carry (checked against XLA's lists of
# module attributes and metadata fields by tests/test_grammar.py).
SAMPLES["module/header-attributes"] = (
    'HloModule hdr, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, buffer_donor={ (2, {}) }, alias_passthrough_params=true, entry_computation_layout={(f32[4]{0}, f32[4]{0}, f32[4]{0})->(f32[4]{0}, f32[4]{0})}, allow_spmd_sharding_propagation_to_parameters={false,true,false}, allow_spmd_sharding_propagation_to_output={true}, replica_count=2, num_partitions=4, frontend_attributes={z="1",a="2"}\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n  p1 = f32[4] parameter(1)\n  p2 = f32[4] parameter(2)\n  ROOT t = (f32[4], f32[4]) tuple(p0, p1)\n}\n'
)
SAMPLES["module/stack-frames-and-metadata"] = (
    'HloModule st\n\nFileNames\n1 "a.py"\n2 "b.py"\n\nFunctionNames\n1 "f"\n2 "g"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=3 end_line=4 column=1 end_column=5}\n2 {file_name_id=2 function_name_id=2 line=7 end_line=7 column=2 end_column=9}\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n2 {file_location_id=2 parent_frame_id=1}\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p0), metadata={op_type="Neg" op_name="jit(f)/neg" source_file="a.py" source_line=3 source_end_line=4 source_column=1 source_end_column=5 profile_type={1,2} deduplicated_name="neg.1" scheduling_name="n" metadata_payload="payload" stack_frame_id=2}\n}\n'
)
SAMPLES["module/origin-recovery-table"] = (
    'HloModule ort, entry_computation_layout={(f32[6,3]{1,0})->f32[6,3]{1,0}}, origin_recovery_table={\n  {"reshape.2341"} : {"placeholder_reshape.201"},\n  "\n    ENTRY %recovery_computation.1 (p.1: f32[192]) -> f32[1,192] {\n    %p.1 = f32[192]{0} parameter(0)\n    ROOT %reshape.2 = f32[1,192]{1,0} reshape(%p.1)\n  }\n  "\n}\n\nENTRY main {\n  p0 = f32[6,3] parameter(0), origin={{"reshape.2341"}}\n  ROOT c = f32[6,3] copy(p0)\n}\n'
)
SAMPLES["common/sharding-forms"] = (
    'HloModule s\n\nENTRY main {\n  a0 = f32[4,4] parameter(0), sharding={replicated}\n  a1 = f32[4,4] parameter(1), sharding={maximal device=1}\n  a2 = f32[4,4] parameter(2), sharding={devices=[2,2]0,1,2,3}\n  a3 = f32[4,4] parameter(3), sharding={devices=[2,2]<=[4]}\n  a4 = f32[4,4] parameter(4), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}\n  a5 = f32[4,4] parameter(5), sharding={devices=[2,2,2]<=[8] last_tile_dims={manual}}\n  a6 = f32[4,4] parameter(6), sharding={manual}\n  a7 = f32[4,4] parameter(7), sharding={unknown}\n  a8 = f32[4,4] parameter(8), sharding={unknown shard_as 1}\n  a9 = f32[4,4] parameter(9), sharding={devices=[2,2]<=[4] shard_like 2}\n  a10 = f32[4,4] parameter(10), sharding={replicated metadata={op_name="a"}}\n  a11 = f32[4,4] parameter(11), sharding={devices=[4,1]<=[4] metadata={op_name="b" source_file="x.py"}}\n  ROOT t = () tuple()\n}\n'
)
SAMPLES["common/origin-forms"] = (
    'HloModule o\n\nENTRY main {\n  p0 = f32[4] parameter(0), origin={{"p0"}}\n  q = f32[4] negate(p0), origin={[synthetic_call]}\n  tt = (f32[4], f32[4]) tuple(p0, q)\n  ROOT t = ((f32[4], f32[4]), f32[4]) tuple(tt, q), origin={(({"a" {1}}, {"b"}), {"c" {2,3}})}\n}\n'
)
SAMPLES["common/frontend-attributes"] = (
    'HloModule c\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n  q = f32[4] negate(p0)\n  ROOT r = f32[4] add(p0, q), frontend_attributes={z="1",a="x y",_xla_compute_type="host",k="{a=1}"}\n}\n'
)
SAMPLES["common/backend-config-string"] = (
    'HloModule c\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n  q = f32[4] negate(p0)\n  ROOT r = f32[4] add(p0, q), backend_config="plain \\"text\\""\n}\n'
)
SAMPLES["common/statistics"] = (
    "HloModule c\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n  q = f32[4] negate(p0)\n  ROOT r = f32[4] add(p0, q), statistics={visualizing_index=2,stat-a=0.5,stat-b=1e+10,c=123456789}\n}\n"
)
SAMPLES["common/tuple-sharding"] = (
    "HloModule ts\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n  e = () tuple(), sharding={replicated}\n  q = (f32[4], f32[4]) tuple(p0, p0), sharding={{replicated}, {manual}}\n  ROOT t = ((f32[4], f32[4]), f32[4], ()) tuple(q, p0, e), sharding={maximal device=1}\n}\n"
)


def _bad(attrs: str) -> str:
    return f"HloModule bad\n\nENTRY main {{\n  ROOT p0 = f32[4] parameter(0), {attrs}\n}}\n"


# Malformed common attributes XLA's parser rejects (so must we, in one line).
BAD_COMMON: dict[str, str] = {
    "profile-type-name": _bad('metadata={op_name="a" profile_type={relative}}'),
    "profile-type-range": _bad('metadata={op_name="a" profile_type={4}}'),
    "fa-quoted-key": _bad('frontend_attributes={"quoted key"="v"}'),
    "fa-bare-value": _bad("frontend_attributes={k=v}"),
    "fa-trailing-comma": _bad('frontend_attributes={k="v",}'),
    "fa-no-comma": _bad('frontend_attributes={k="v" j="w"}'),
    "statistics-value": _bad("statistics={visualizing_index=1,a=x}"),
    "statistics-index": _bad("statistics={visualizing_index=1.5,a=2}"),
    "statistics-no-comma": _bad("statistics={visualizing_index=1 a=2}"),
    "origin-synthetic": _bad("origin={[synthetic]}"),
    "origin-nested-synthetic": _bad('origin={({"a"}, [synthetic_call])}'),
    "origin-extra": _bad('origin={{"a" {0} "c"}}'),
    "origin-two": _bad("origin={[synthetic_call], [synthetic_call]}"),
    "sharding-word": _bad("sharding={zz}"),
    "metadata-unknown": _bad("metadata={zz=1}"),
}


def _column_major_params(text: str) -> str:
    """`text` with every parameter of rank 2 or more that has no layout written given the
    column-major layout {0,1,...} (to see which inferred shapes keep an operand's layout)."""

    def repl(m: re.Match[str]) -> str:
        rank = len(m.group(2).split(","))
        if rank < 2:
            return m.group(0)
        return f"{m.group(1)}[{m.group(2)}]{{{','.join(map(str, range(rank)))}}}"

    out = []
    for line in text.split("\n"):
        if " parameter(" in line:
            line = re.sub(r"\b([a-z]\w*)\[([\d,]+)\](?!\{)", repl, line)
        out.append(line)
    return "\n".join(out)


# Opcodes whose samples above give no operand a non-default layout: each sample of theirs
# again with column-major parameters.
for _key in [k for k in SAMPLES if k.split("/")[0] in (
    "and", "or", "xor", "not", "shift-left", "shift-right-arithmetic", "shift-right-logical",
    "popcnt", "count-leading-zeros", "mulhi", "compare", "complex", "broadcast", "call",
    "cholesky", "conditional", "convolution", "domain", "fft", "gather", "scatter",
    "ragged-dot", "scaled-dot", "scan", "topk", "triangular-solve", "while",
    "batch-norm-grad", "batch-norm-inference", "batch-norm-training",
)]:  # fmt: skip
    _cm = _column_major_params(SAMPLES[_key])
    if _cm != SAMPLES[_key]:
        SAMPLES[_key + "/operand-layout"] = _cm
for _op in ("and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical",
            "mulhi"):  # fmt: skip
    _add(
        f"{_op}/operand-layout",
        _params("s32[2,3]{0,1}", "s32[2,3]") + f"\nROOT r = s32[2,3] {_op}(p0, p1)",
    )
for _op in ("not", "popcnt", "count-leading-zeros"):
    _add(f"{_op}/operand-layout", _params("s32[2,3]{0,1}") + f"\nROOT r = s32[2,3] {_op}(p0)")
_add(
    "compare/operand-layout",
    _params("f32[2,3]{0,1}", "f32[2,3]") + "\nROOT r = pred[2,3] compare(p0, p1), direction=LT",
)
_add("complex/operand-layout", _params("f32[2,3]{0,1}", "f32[2,3]{0,1}") + "\nROOT r = c64[2,3] complex(p0, p1)")  # fmt: skip
_add(
    "broadcast/operand-layout",
    _params("f32[2,3]{0,1}") + "\nROOT r = f32[2,3,2,3] broadcast(p0), dimensions={2,3}",
)
_add(
    "domain/operand-layout",
    _params("f32[2,3]{0,1}")
    + '\nROOT r = f32[2,3] domain(p0), domain={kind="sharding", entry={maximal device=0}, exit={maximal device=1}}',
)
_NEG2 = "neg2 {\n  x = f32[2,3]{0,1} parameter(0)\n  ROOT n = f32[2,3]{0,1} negate(x)\n}\n"
_add("call/operand-layout", _params("f32[2,3]{0,1}") + "\nROOT r = f32[2,3] call(p0), to_apply=neg2", _NEG2)  # fmt: skip
_add(
    "conditional/operand-layout",
    _params("pred[]", "f32[2,3]{0,1}", "f32[2,3]{0,1}")
    + "\nROOT r = f32[2,3] conditional(p0, p1, p2), true_computation=neg2, false_computation=neg2",
    _NEG2,
)
_add(
    "while/operand-layout",
    _params("(s32[], f32[2,2]{0,1})")
    + "\nROOT r = (s32[], f32[2,2]) while(p0), condition=cond, body=body",
    _LOOP.replace("f32[4]", "f32[2,2]{0,1}"),
)
# Attributes XLA's parser reads and drops, in use: the collective `mode`, an empty
# convolution `sparsity_config`.
_add(
    "all-reduce-start/mode",
    _params("f32[4]")
    + "\ns = f32[4] all-reduce-start(p0), replica_groups={{0,1}}, mode=cross_replica, to_apply=add\nROOT d = f32[4] all-reduce-done(s)",
    _ADD,
)
_add(
    "reduce-scatter/mode",
    _params("f32[8]")
    + "\nROOT r = f32[4] reduce-scatter(p0), replica_groups={{0,1}}, dimensions={0}, mode=cross_replica_and_partition, to_apply=add",
    _ADD,
)
_add(
    "convolution/sparsity-config",
    _params("f32[1,6,8]", "f32[3,8,16]")
    + "\nROOT r = f32[1,4,16] convolution(p0, p1), window={size=3}, dim_labels=b0f_0io->b0f, sparsity_config={}",
)


# Ops on tokens under async sugar (their entry needs an after-all, so not from SAMPLES).
def _async_token(params: str, pshapes: list[str], inst: str, shape: str, args: str) -> str:
    w = (
        "wrapped {\n"
        + "".join(f"  x{i} = {s} parameter({i})\n" for i, s in enumerate(pshapes))
        + f"  ROOT c = {shape} {inst}\n}}\n"
    )
    e = (
        "ENTRY main {\n"
        + params
        + f"  s = (({', '.join(pshapes)}), {shape}, u32[]) async-start({args}), calls=wrapped\n  ROOT d = {shape} async-done(s)\n}}\n"
    )
    return "HloModule m\n\n" + w + "\n" + e


ASYNC_TOKEN_OPS: dict[str, str] = {
    "after-all": _async_token(
        "  t = token[] after-all()\n",
        ["token[]", "token[]"],
        "after-all(x0, x1)",
        "token[]",
        "t, t",
    ),
    "add-dependency": _async_token(
        "  p = f32[4] parameter(0)\n  t = token[] after-all()\n",
        ["f32[4]", "token[]"],
        "add-dependency(x0, x1)",
        "f32[4]",
        "p, t",
    ),
    "infeed": _async_token(
        "  t = token[] after-all()\n",
        ["token[]"],
        'infeed(x0), infeed_config="c"',
        "(f32[4], token[])",
        "t",
    ),
    "outfeed": _async_token(
        "  p = f32[4] parameter(0)\n  t = token[] after-all()\n",
        ["f32[4]", "token[]"],
        'outfeed(x0, x1), outfeed_shape=f32[4]{0}, outfeed_config="c"',
        "token[]",
        "p, t",
    ),
    "send-done": _async_token(
        "  p = f32[4] parameter(0)\n  t = token[] after-all()\n  sd = (f32[4], u32[], token[]) send(p, t), channel_id=1\n",
        ["(f32[4], u32[], token[])"],
        "send-done(x0), channel_id=1",
        "token[]",
        "sd",
    ),
}
_add(
    "scan/operand-layout",
    _params("f32[8,2]{0,1}", "f32[2]")
    + "\nROOT r = (f32[8,2], f32[2]) scan(p0, p1), dimensions={0}, num_carries=1, to_apply=step2",
    _SCAN_BODY.replace("step {", "step2 {").replace("f32[]", "f32[2]"),
)
