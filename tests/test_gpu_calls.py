"""cuBLAS / cuDNN custom-calls under the interpreter, each checked against XLA:CPU running the
equivalent plain HLO (dot / convolution plus the epilogue written out) in a child process.

Tolerances come from the computation: a sum of L products of operands bounded by 1 (inputs
are uniform in [-1, 1)) is off by at most L * eps(f32) per summation order, and results in
a narrow type may round to a neighbouring value: one ulp of the result type.
"""

from __future__ import annotations

import numpy as np
import pytest

import hlopass
from hlopass.errors import UnsupportedOpError
from tests.interp_util import xla_execute_many

F32_EPS = float(np.finfo(np.float32).eps)

_GEMM_DN = (
    '"dot_dimension_numbers":{{"lhs_contracting_dimensions":["{lc}"],'
    '"rhs_contracting_dimensions":["{rc}"],"lhs_batch_dimensions":[{lb}],'
    '"rhs_batch_dimensions":[{rb}]}}'
)


def _gemm_cfg(alpha=1.0, beta=0.0, epilogue="DEFAULT", lc=1, rc=0, lb="", rb="", wrap=True):
    dn = _GEMM_DN.format(lc=lc, rc=rc, lb=lb, rb=rb)
    body = f'"alpha_real":{alpha},"alpha_imag":0,"beta":{beta},{dn},"epilogue":"{epilogue}"'
    if wrap:  # XLA's current form: GpuBackendConfig wrapping gemm_backend_config
        return '{"operation_queue_id":"0","gemm_backend_config":{' + body + "}}"
    return '"{' + body.replace('"', '\\"') + '}"'  # the seeds' form: a bare escaped string


def _conv_cfg(act="kNone", scale=1, side=0):
    return ('{"cudnn_conv_backend_config":{"activation_mode":"' + act + '","conv_result_scale":'
            + str(scale) + ',"side_input_scale":' + str(side) + ',"leakyrelu_alpha":0}}')  # fmt: skip


# (name, GPU-optimized HLO, plain HLO, argument shapes, dtype, reduction length)
CASES = [
    (
        "cublas_batched_alpha_beta",
        f"""HloModule g
ENTRY e {{
  a = f32[3,5,4] parameter(0)
  b = f32[3,6,5] parameter(1)
  c = f32[3,4,6] parameter(2)
  ROOT g = f32[3,4,6] custom-call(a, b, c), custom_call_target="__cublas$gemm", backend_config={_gemm_cfg(2, 0.5, lc=1, rc=2, lb='"0"', rb='"0"')}
}}""",
        """HloModule p
ENTRY e {
  a = f32[3,5,4] parameter(0)
  b = f32[3,6,5] parameter(1)
  c = f32[3,4,6] parameter(2)
  d = f32[3,4,6] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  two = f32[] constant(2)
  half = f32[] constant(0.5)
  btwo = f32[3,4,6] broadcast(two), dimensions={}
  bhalf = f32[3,4,6] broadcast(half), dimensions={}
  d2 = f32[3,4,6] multiply(d, btwo)
  c2 = f32[3,4,6] multiply(c, bhalf)
  ROOT r = f32[3,4,6] add(d2, c2)
}""",
        [(3, 5, 4), (3, 6, 5), (3, 4, 6)],
        np.float32,
        5,
    ),
    (
        "cublas_seed_style_config_workspace",
        f"""HloModule g
ENTRY e {{
  a = f32[7,4] parameter(0)
  b = f32[9,7] parameter(1)
  ROOT g = (f32[4,9], s8[256]) custom-call(a, b), custom_call_target="__cublas$gemm", backend_config={_gemm_cfg(lc=0, rc=1, wrap=False)}
}}""",
        """HloModule p
ENTRY e {
  a = f32[7,4] parameter(0)
  b = f32[9,7] parameter(1)
  d = f32[4,9] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={1}
  z = s8[] constant(0)
  ws = s8[256] broadcast(z), dimensions={}
  ROOT t = (f32[4,9], s8[256]) tuple(d, ws)
}""",
        [(7, 4), (9, 7)],
        np.float32,
        7,
    ),
    (
        "cublaslt_f16_bias_relu",
        f"""HloModule g
ENTRY e {{
  a = f16[8,16] parameter(0)
  b = f16[16,12] parameter(1)
  bias = f16[12] parameter(2)
  ROOT g = (f16[8,12], s8[64]) custom-call(a, b, bias), custom_call_target="__cublas$lt$matmul", backend_config={_gemm_cfg(epilogue="BIAS_RELU")}
}}""",
        """HloModule p
ENTRY e {
  a = f16[8,16] parameter(0)
  b = f16[16,12] parameter(1)
  bias = f16[12] parameter(2)
  a32 = f32[8,16] convert(a)
  b32 = f32[16,12] convert(b)
  d = f32[8,12] dot(a32, b32), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bias32 = f32[12] convert(bias)
  bb = f32[8,12] broadcast(bias32), dimensions={1}
  s = f32[8,12] add(d, bb)
  zero = f32[] constant(0)
  bz = f32[8,12] broadcast(zero), dimensions={}
  r = f32[8,12] maximum(s, bz)
  r16 = f16[8,12] convert(r)
  z = s8[] constant(0)
  ws = s8[64] broadcast(z), dimensions={}
  ROOT t = (f16[8,12], s8[64]) tuple(r16, ws)
}""",
        [(8, 16), (16, 12), (12,)],
        np.float16,
        16,
    ),
    (
        "cublaslt_beta_bias_gelu_aux",
        f"""HloModule g
ENTRY e {{
  a = f32[8,16] parameter(0)
  b = f32[16,12] parameter(1)
  c = f32[8,12] parameter(2)
  bias = f32[12] parameter(3)
  ROOT g = (f32[8,12], f32[8,12], s8[0]) custom-call(a, b, c, bias), custom_call_target="__cublas$lt$matmul", backend_config={_gemm_cfg(beta=1, epilogue="BIAS_GELU_AUX")}
}}""",
        """HloModule p
ENTRY e {
  a = f32[8,16] parameter(0)
  b = f32[16,12] parameter(1)
  c = f32[8,12] parameter(2)
  bias = f32[12] parameter(3)
  d = f32[8,12] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  dc = f32[8,12] add(d, c)
  bb = f32[8,12] broadcast(bias), dimensions={1}
  x = f32[8,12] add(dc, bb)
  xx = f32[8,12] multiply(x, x)
  x3 = f32[8,12] multiply(x, xx)
  k = f32[] constant(0.044715)
  bk = f32[8,12] broadcast(k), dimensions={}
  kx3 = f32[8,12] multiply(x3, bk)
  inner = f32[8,12] add(x, kx3)
  s = f32[] constant(0.7978845608028654)
  bs = f32[8,12] broadcast(s), dimensions={}
  si = f32[8,12] multiply(inner, bs)
  th = f32[8,12] tanh(si)
  one = f32[] constant(1)
  bone = f32[8,12] broadcast(one), dimensions={}
  half = f32[] constant(0.5)
  bhalf = f32[8,12] broadcast(half), dimensions={}
  hx = f32[8,12] multiply(x, bhalf)
  th1 = f32[8,12] add(th, bone)
  g = f32[8,12] multiply(hx, th1)
  ws = s8[0] constant({})
  ROOT t = (f32[8,12], f32[8,12], s8[0]) tuple(g, x, ws)
}""",
        [(8, 16), (16, 12), (8, 12), (12,)],
        np.float32,
        17,
    ),
    (
        "cublaslt_bias_follows_output_layout",
        f"""HloModule g
ENTRY e {{
  a = f32[8,16]{{1,0}} parameter(0)
  b = f32[16,12]{{1,0}} parameter(1)
  bias = f32[8]{{0}} parameter(2)
  ROOT g = f32[8,12]{{0,1}} custom-call(a, b, bias), custom_call_target="__cublas$lt$matmul", backend_config={_gemm_cfg(alpha=0.5, epilogue="BIAS")}
}}""",
        """HloModule p
ENTRY e {
  a = f32[8,16] parameter(0)
  b = f32[16,12] parameter(1)
  bias = f32[8] parameter(2)
  d = f32[8,12] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  half = f32[] constant(0.5)
  bhalf = f32[8,12] broadcast(half), dimensions={}
  dh = f32[8,12] multiply(d, bhalf)
  bb = f32[8,12] broadcast(bias), dimensions={0}
  ROOT r = f32[8,12] add(dh, bb)
}""",
        [(8, 16), (16, 12), (8,)],
        np.float32,
        17,
    ),
    (
        "cudnn_forward_grouped_strided",
        f"""HloModule g
ENTRY e {{
  x = f32[2,9,9,4] parameter(0)
  w = f32[6,3,3,2] parameter(1)
  ROOT c = (f32[2,4,4,6], u8[0]) custom-call(x, w), window={{size=3x3 stride=2x2 pad=1_0x0_1}}, dim_labels=b01f_o01i->b01f, feature_group_count=2, custom_call_target="__cudnn$convForward", backend_config={_conv_cfg()}
}}""",
        """HloModule p
ENTRY e {
  x = f32[2,9,9,4] parameter(0)
  w = f32[6,3,3,2] parameter(1)
  c = f32[2,4,4,6] convolution(x, w), window={size=3x3 stride=2x2 pad=1_0x0_1}, dim_labels=b01f_o01i->b01f, feature_group_count=2
  ws = u8[0] constant({})
  ROOT t = (f32[2,4,4,6], u8[0]) tuple(c, ws)
}""",
        [(2, 9, 9, 4), (6, 3, 3, 2)],
        np.float32,
        18,
    ),
    (
        "cudnn_forward_nchw_dilated_scaled",
        f"""HloModule g
ENTRY e {{
  x = f32[2,3,10,8] parameter(0)
  w = f32[5,3,2,3] parameter(1)
  ROOT c = (f32[2,5,9,8], u8[16]) custom-call(x, w), window={{size=2x3 pad=0_1x1_1 rhs_dilate=2x1}}, dim_labels=bf01_oi01->bf01, custom_call_target="__cudnn$convForward", backend_config={_conv_cfg(scale=0.5)}
}}""",
        """HloModule p
ENTRY e {
  x = f32[2,3,10,8] parameter(0)
  w = f32[5,3,2,3] parameter(1)
  c = f32[2,5,9,8] convolution(x, w), window={size=2x3 pad=0_1x1_1 rhs_dilate=2x1}, dim_labels=bf01_oi01->bf01
  half = f32[] constant(0.5)
  bhalf = f32[2,5,9,8] broadcast(half), dimensions={}
  ch = f32[2,5,9,8] multiply(c, bhalf)
  z = u8[] constant(0)
  ws = u8[16] broadcast(z), dimensions={}
  ROOT t = (f32[2,5,9,8], u8[16]) tuple(ch, ws)
}""",
        [(2, 3, 10, 8), (5, 3, 2, 3)],
        np.float32,
        18,
    ),
    (
        "cudnn_backward_input",
        f"""HloModule g
ENTRY e {{
  dy = f32[2,4,4,4] parameter(0)
  w = f32[4,3,3,3] parameter(1)
  ROOT c = (f32[2,7,7,3], u8[0]) custom-call(dy, w), window={{size=3x3 stride=2x2 pad=1_1x1_1}}, dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convBackwardInput", backend_config={_conv_cfg()}
}}""",
        # dx = conv(dy dilated by the stride, w reversed, features swapped)
        """HloModule p
ENTRY e {
  dy = f32[2,4,4,4] parameter(0)
  w = f32[4,3,3,3] parameter(1)
  wr = f32[4,3,3,3] reverse(w), dimensions={1,2}
  c = f32[2,7,7,3] convolution(dy, wr), window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=b01f_i01o->b01f
  ws = u8[0] constant({})
  ROOT t = (f32[2,7,7,3], u8[0]) tuple(c, ws)
}""",
        [(2, 4, 4, 4), (4, 3, 3, 3)],
        np.float32,
        36,
    ),
    (
        "cudnn_backward_filter",
        f"""HloModule g
ENTRY e {{
  x = f32[2,7,7,3] parameter(0)
  dy = f32[2,4,4,4] parameter(1)
  ROOT c = (f32[4,3,3,3], u8[0]) custom-call(x, dy), window={{size=3x3 stride=2x2 pad=1_1x1_1}}, dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convBackwardFilter", backend_config={_conv_cfg()}
}}""",
        # dw = conv(x, dy) contracting the batch: dy's window, the stride as rhs dilation
        """HloModule p
ENTRY e {
  x = f32[2,7,7,3] parameter(0)
  dy = f32[2,4,4,4] parameter(1)
  c = f32[4,3,3,3] convolution(x, dy), window={size=4x4 pad=1_1x1_1 rhs_dilate=2x2}, dim_labels=f01b_i01o->f01b
  ws = u8[0] constant({})
  ROOT t = (f32[4,3,3,3], u8[0]) tuple(c, ws)
}""",
        [(2, 7, 7, 3), (2, 4, 4, 4)],
        np.float32,
        32,
    ),
    (
        "cudnn_bias_side_input_relu",
        f"""HloModule g
ENTRY e {{
  x = f32[2,6,6,4] parameter(0)
  w = f32[5,3,3,4] parameter(1)
  bias = f32[5] parameter(2)
  side = f32[2,6,6,5] parameter(3)
  ROOT c = (f32[2,6,6,5], u8[0]) custom-call(x, w, bias, side), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convBiasActivationForward", backend_config={_conv_cfg("kRelu", 0.5, 0.25)}
}}""",
        """HloModule p
ENTRY e {
  x = f32[2,6,6,4] parameter(0)
  w = f32[5,3,3,4] parameter(1)
  bias = f32[5] parameter(2)
  side = f32[2,6,6,5] parameter(3)
  c = f32[2,6,6,5] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_o01i->b01f
  half = f32[] constant(0.5)
  quarter = f32[] constant(0.25)
  bhalf = f32[2,6,6,5] broadcast(half), dimensions={}
  bquarter = f32[2,6,6,5] broadcast(quarter), dimensions={}
  ch = f32[2,6,6,5] multiply(c, bhalf)
  sq = f32[2,6,6,5] multiply(side, bquarter)
  s = f32[2,6,6,5] add(ch, sq)
  bb = f32[2,6,6,5] broadcast(bias), dimensions={3}
  b = f32[2,6,6,5] add(s, bb)
  zero = f32[] constant(0)
  bz = f32[2,6,6,5] broadcast(zero), dimensions={}
  r = f32[2,6,6,5] maximum(b, bz)
  ws = u8[0] constant({})
  ROOT t = (f32[2,6,6,5], u8[0]) tuple(r, ws)
}""",
        [(2, 6, 6, 4), (5, 3, 3, 4), (5,), (2, 6, 6, 5)],
        np.float32,
        38,
    ),
]


def _args(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]


@pytest.fixture(scope="module")
def xla_results(xla):
    cases = [(plain, _args(shapes, dt, i)) for i, (_, _, plain, shapes, dt, _) in enumerate(CASES)]
    return xla_execute_many(cases)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_library_call_matches_plain_hlo_on_xla(index, xla_results):
    name, gpu, _plain, shapes, dtype, length = CASES[index]
    want = xla_results[index]
    assert "outputs" in want, f"XLA:CPU failed on the plain form of {name}: {want}"
    got = hlopass.evaluate(hlopass.parse_hlo(gpu, name), *_args(shapes, dtype, index))
    assert len(got) == len(want["outputs"])
    for k, (g, w) in enumerate(zip(got, want["outputs"], strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{name} out{k}"
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=f"{name} out{k}")
            continue
        w64 = w.astype(np.float64)
        scale = max(1.0, float(np.max(np.abs(w64)))) if w.size else 1.0
        # summation order (L products of |.| <= 1, in f32) + one ulp of the result type
        atol = 2 * length * F32_EPS + float(np.finfo(g.dtype).eps) * scale
        np.testing.assert_allclose(g.astype(np.float64), w64, rtol=0, atol=atol,
                                   err_msg=f"{name} out{k}")  # fmt: skip


def test_workspace_is_zeros():
    _, gpu, _, shapes, dtype, _ = CASES[1]
    out = hlopass.evaluate(hlopass.parse_hlo(gpu), *_args(shapes, dtype, 0))
    assert out[1].dtype == np.int8 and out[1].shape == (256,) and not out[1].any()


@pytest.mark.parametrize(
    "target,config,why",
    [
        ("__cublas$lt$matmul", _gemm_cfg(epilogue="BIAS_SWISH"), "epilogue BIAS_SWISH"),
        ("__cublas$gemm", '{"gemm_backend_config":{"alpha_real":1}}', "no dot_dimension_numbers"),
        ("__cudnn$convForwardGraph", _conv_cfg(), "__cudnn$convForwardGraph"),
    ],
)
def test_unsupported_calls_name_the_instruction(target, config, why):
    m = hlopass.parse_hlo(f"""HloModule g
ENTRY e {{
  a = f32[2,2] parameter(0)
  ROOT odd_call = f32[2,2] custom-call(a, a), custom_call_target="{target}", backend_config={config}
}}""")
    with pytest.raises(UnsupportedOpError, match="odd_call") as e:
        hlopass.evaluate(m, np.ones((2, 2), np.float32))
    assert why in str(e.value)


# Backward convolutions of any geometry, checked as adjoints of XLA's forward convolution:
# <conv(x, w), dy> = <x, backward_input(dy, w)> = <w, backward_filter(x, dy)>.
# (window, dim_labels, x shape, w shape, y shape, feature groups)
ADJOINT_CASES = [
    ("size=3x3 stride=2x2 pad=1_0x0_1 rhs_dilate=1x2", "b01f_o01i->b01f",
     (2, 9, 10, 4), (6, 3, 3, 2), (2, 4, 4, 6), 2),
    ("size=2x3 stride=1x2 pad=-1_2x1_1 rhs_dilate=2x1", "bf01_oi01->bf01",
     (3, 3, 8, 7), (5, 3, 2, 3), (3, 5, 7, 4), 1),
]  # fmt: skip


def _fwd_text(window, labels, xs, ws, ys, groups):
    def t(s):
        return "f32[" + ",".join(map(str, s)) + "]"

    return f"""HloModule fwd
ENTRY e {{
  x = {t(xs)} parameter(0)
  w = {t(ws)} parameter(1)
  ROOT y = {t(ys)} convolution(x, w), window={{{window}}}, dim_labels={labels}, feature_group_count={groups}
}}"""


def _bwd_text(target, window, labels, a, b, out, groups):
    def t(s):
        return "f32[" + ",".join(map(str, s)) + "]"

    return f"""HloModule bwd
ENTRY e {{
  a = {t(a)} parameter(0)
  b = {t(b)} parameter(1)
  ROOT c = ({t(out)}, u8[0]) custom-call(a, b), window={{{window}}}, dim_labels={labels}, feature_group_count={groups}, custom_call_target="{target}", backend_config={_conv_cfg()}
}}"""


@pytest.fixture(scope="module")
def adjoint_forward(xla):
    cases = []
    for i, (window, labels, xs, ws, ys, g) in enumerate(ADJOINT_CASES):
        x, w, _ = _args([xs, ws, ys], np.float64, 100 + i)
        cases.append((_fwd_text(window, labels, xs, ws, ys, g), [x.astype(np.float32),
                                                                  w.astype(np.float32)]))  # fmt: skip
    return xla_execute_many(cases)


@pytest.mark.parametrize("index", range(len(ADJOINT_CASES)))
def test_backward_convolutions_are_adjoints_of_xla_forward(index, adjoint_forward):
    window, labels, xs, ws, ys, g = ADJOINT_CASES[index]
    x, w, dy = (a.astype(np.float32) for a in _args([xs, ws, ys], np.float64, 100 + index))
    assert "outputs" in adjoint_forward[index], adjoint_forward[index]
    (y,) = adjoint_forward[index]["outputs"]
    assert y.shape == ys
    bi = _bwd_text("__cudnn$convBackwardInput", window, labels, ys, ws, xs, g)
    bf = _bwd_text("__cudnn$convBackwardFilter", window, labels, xs, ys, ws, g)
    dx = hlopass.evaluate(hlopass.parse_hlo(bi), dy, w)[0]
    dw = hlopass.evaluate(hlopass.parse_hlo(bf), x, dy)[0]
    lhs = float(np.sum(y.astype(np.float64) * dy))
    # each side is a sum of |y| * |dy| terms in f32: bounded by (terms) * L * eps
    atol = 4 * F32_EPS * (y.size * 3 * 3 * 4 + x.size + w.size) * max(1.0, float(np.abs(y).max()))
    assert abs(float(np.sum(x.astype(np.float64) * dx)) - lhs) <= atol
    assert abs(float(np.sum(w.astype(np.float64) * dw)) - lhs) <= atol
