"""Small printer cases; each expected line was checked against XLA's own re-print (jaxlib 0.10.2)."""

from hlopass import parse_hlo, print_hlo


def _print(body: str, header: str = "HloModule m") -> str:
    return print_hlo(parse_hlo(f"{header}\n\nENTRY e {{\n{body}\n}}\n"))


def test_slice_prints_every_stride_once_one_is_not_one():
    out = _print(
        "  p0 = f32[3,3,4,4] parameter(0)\n"
        "  ROOT s = f32[3,3,2,4] slice(p0), slice={[0:3], [0:3], [0:4:2], [0:4]}"
    )
    assert "slice={[0:3:1], [0:3:1], [0:4:2], [0:4:1]}" in out


def test_narrow_floats_use_max_digits10_and_negative_zero_keeps_its_sign():
    """XLA prints these as `{..., 0, -0, ...}` and `constant(0)`: it reads `-0` as +0.0 and
    prints -0.0 as `-0`. We read `-0` as -0.0 and print `-0.0` (which XLA reads back as
    -0.0): the one intended difference from XLA's printer."""
    out = _print(
        "  a = bf16[9] constant({0.1, 65504, -0, -0.0, 1e-5, 3.14159265, 1.5, 100000, 0.3333333333})\n"
        "  ROOT b = f16[] constant(0.1)\n  c = f32[] constant(-0)"
    )
    assert (
        "constant({0.1001, 6.554e+04, -0.0, -0.0, 1.001e-05, 3.141, 1.5, 9.984e+04, 0.334})" in out
    )
    assert "f16[] constant(0.099976)" in out
    assert "%c = f32[] constant(-0.0)" in out


def test_scalar_literal_for_array_sets_first_element():
    out = _print("  ROOT e = f32[2,2] constant(3)")
    assert "constant({ { 3, 0 }, { 0, 0 } })" in out


def test_nested_anonymous_instructions():
    out = _print("  ROOT root = sqrt(f32[10,10] broadcast(f32[] parameter(0)))")
    assert "%broadcast.anon = f32[10,10]{1,0} broadcast(%parameter.anon), dimensions={}" in out
    assert "ROOT %root = f32[10,10]{1,0} sqrt(%broadcast.anon)" in out


def test_tuple_result_shape_has_index_comments():
    out = _print(
        "  v = f32[] parameter(0)\n  ROOT t = (f32[], f32[], f32[], f32[], f32[], f32[]) "
        "tuple(v, v, v, v, v, v)"
    )
    assert "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]) tuple(" in out


def test_instruction_names_unique_module_wide():
    text = (
        "HloModule m\n\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT t = f32[] negate(x)\n}\n\n"
        "h {\n  x = f32[] parameter(0)\n  ROOT t = f32[] negate(x)\n}\n"
    )
    out = print_hlo(parse_hlo(text))
    assert "%h (x.1: f32[]) -> f32[] {" in out
    assert "ROOT %t.1 = f32[] negate(%x.1)" in out


def test_frontend_attributes_sorted_and_io_alias_spelled_out():
    out = _print(
        "  p = s32[10] parameter(0)\n  ROOT a = s32[10] add(p, p), "
        'frontend_attributes={ z="1", a="{x}"}',
        "HloModule f, input_output_alias={{}: (0, {}, must-alias)}",
    )
    assert 'frontend_attributes={a={x},z="1"}' in out
    assert "input_output_alias={ {}: (0, {}, must-alias) }" in out


def test_stack_frames_renumbered_in_first_use_order():
    text = """HloModule m

FileNames
1 "a.py"

FunctionNames
1 "f1"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=1 end_column=2}
2 {file_name_id=1 function_name_id=1 line=20 end_line=20 column=1 end_column=2}
3 {file_name_id=1 function_name_id=1 line=30 end_line=30 column=1 end_column=2}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}
3 {file_location_id=3 parent_frame_id=1}

ENTRY e {
  x = f32[] parameter(0), metadata={op_name="x" stack_frame_id=3}
  y = f32[] parameter(1), metadata={op_name="x" stack_frame_id=2}
  ROOT t = f32[] add(y, x), metadata={op_name="x" stack_frame_id=1}
}
"""
    out = print_hlo(parse_hlo(text))
    assert "1 {file_name_id=1 function_name_id=1 line=30 end_line=30 column=1 end_column=2}" in out
    assert '%x = f32[] parameter(0), metadata={op_name="x" stack_frame_id=1}' in out
    assert 'ROOT %t = f32[] add(%y, %x), metadata={op_name="x" stack_frame_id=3}' in out


def test_result_accuracy_is_normalized_like_xla():
    base = "  p = f32[] parameter(0)\n  ROOT r = f32[] exponential(p), result_accuracy="
    out = _print(base + "{tolerance={atol=1.5e-7,rtol=0.1234567,ulps=10}}")
    assert "result_accuracy={tolerance={atol=1.5e-07,rtol=0.123457,ulps=10}}" in out
    assert "result_accuracy={tolerance={atol=0,rtol=2,ulps=0}}" in _print(
        base + "{tolerance={rtol=2}}"
    )
    assert "result_accuracy={mode=highest}" in _print(base + "{mode=HIGHEST}")
    assert "result_accuracy" not in _print(base + "{mode=DEFAULT}")


def test_outfeed_always_prints_its_shape():
    out = _print(
        "  p = s32[3] parameter(0)\n  t = token[] after-all()\n"
        '  ROOT o = token[] outfeed(p, t), outfeed_config="x"'
    )
    assert 'outfeed(%p, %t), outfeed_shape=s32[3]{0}, outfeed_config="x"' in out


def test_recv_done_takes_its_shape_from_recv():
    out = _print(
        "  t = token[] parameter(0)\n"
        "  r = (f32[4], u32[], token[]) recv(t), channel_id=5\n"
        "  ROOT d = (f32[9], token[]) recv-done(r), channel_id=5"
    )
    assert "%d = (f32[4]{0}, token[]) recv-done(%r)" in out


def test_buffer_result_shape_and_dotted_module_name_with_colon():
    out = _print(
        "  c = f32[] constant(1)\n"
        '  ROOT b = b(f32[]) custom-call(c), custom_call_target="Pin", '
        "api_version=API_VERSION_TYPED_FFI",
        header="HloModule conv.167:",
    )
    assert out.startswith("HloModule conv.167, ")
    assert "%b = b(f32[]) custom-call(%c)" in out


def test_custom_call_tuple_literal():
    out = _print(
        '  ROOT c = f32[] custom-call(), custom_call_target="x", '
        "literal=(s32[] 1, (f32[] 2, pred[] 1))"
    )
    assert "literal=( s32[] 1, ( f32[] 2, pred[] true ) )" in out
    out = _print('  ROOT c = f32[] custom-call(), custom_call_target="x", literal=( )')
    assert "literal=(  )" in out


def test_tuple_sharding_elements_are_comma_space_separated():
    out = _print(
        "  ROOT p = (f32[], f32[]) parameter(0), sharding={{replicated},{maximal device=1}}"
    )
    assert "sharding={{replicated}, {maximal device=1}}" in out


def test_async_shorthand_round_trips_and_hides_the_wrapped_computation():
    body = (
        "  p0 = f32[10]{0} parameter(0)\n"
        "  s = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-start(p0), "
        'async_execution_thread="th", custom_call_target="foo"\n'
        "  u = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-update(s)\n"
        "  ROOT d = f32[20]{0} custom-call-done(u)"
    )
    module = parse_hlo(f"HloModule m\n\nENTRY e {{\n{body}\n}}\n")
    from hlopass.dialects.hlo import computations

    names = [c.comp_name for c in computations(module)]
    assert names == ["async_wrapped", "e"]
    ops = {op.inst_name: op for op in computations(module)[1].instructions}
    assert ops["s"].opcode == "async-start" and ops["s"].attr("calls") == "async_wrapped"
    assert ops["d"].opcode == "async-done" and ops["d"].attr("calls") == "async_wrapped"
    out = print_hlo(module)
    assert "async_wrapped" not in out
    assert 'custom-call-start(%p0), async_execution_thread="th", custom_call_target="foo"' in out
    assert "%u = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-update(%s)\n" in out
    assert "ROOT %d = f32[20]{0} custom-call-done(%u)\n" in out
    assert print_hlo(parse_hlo(out)) == out


def test_rejected_like_xla():
    import pytest

    from hlopass import HloParseError

    a = "%a (x: f32[]) -> f32[] {\n  ROOT %x = f32[] parameter(0)\n}\n\n"
    call_a = (
        "ENTRY %b (y: f32[]) -> f32[] {\n  %y = f32[] parameter(0)\n"
        "  ROOT %c = f32[] call(%y), to_apply=%a\n}\n"
    )
    with pytest.raises(HloParseError, match="without an HloModule header"):
        parse_hlo(a + call_a)  # XLA reads this as one (malformed) instruction
    parse_hlo("HloModule m\n\n" + a + call_a)
    with pytest.raises(HloParseError, match="non-negative"):
        _print(
            "  p = f32[] parameter(0)\n  ROOT r = f32[] exponential(p), "
            "result_accuracy={tolerance={atol=-1}}"
        )


def test_metadata_fields_in_xla_order_and_escaped_strings():
    out = _print(
        "  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p), "
        'metadata={op_name="a" op_type="b" source_line=3 source_file="f.py"}'
    )
    assert 'metadata={op_type="b" op_name="a" source_file="f.py" source_line=3}' in out
    out = _print(
        "  p = f32[] parameter(0)\n  ROOT c = f32[] custom-call(p), "
        'custom_call_target="x\\"y\'z", backend_config="{\\"k\\": \\"}{\\"}"'
    )
    assert 'custom_call_target="x\\"y\\\'z", backend_config={"k": "}{"}' in out
    out = _print(
        "  p = f32[] parameter(0)\n  ROOT c = f32[] custom-call(p), "
        'custom_call_target="t", backend_config="{} x"'
    )
    assert 'backend_config="{} x"' in out


def test_scalar_float_constants():
    out = _print(
        "  a = f16[] constant(0.1)\n  b = f32[] constant(3.4028235e38)\n"
        "  c = f64[] constant(0.1)\n  d = f32[] constant(1e-45)\n"
        "  ROOT t = (f16[], f32[], f64[], f32[]) tuple(a, b, c, d)"
    )
    assert "constant(0.099976)" in out
    assert "constant(3.40282347e+38)" in out
    assert "%c = f64[] constant(0.1)" in out
    assert "constant(1.4013e-45)" in out


def test_escape_test_is_every_character_but_printable_ascii_and_quotes():
    """`c_escape`'s quick test (a negated class, cheap to compile) picks exactly the
    characters below space, from DEL up, and `"`, `'`, `\\`, over every code point."""
    from hlopass.ir.attrs import _NEEDS_ESCAPE

    picked = "".join(c for c in map(chr, range(0x110000)) if _NEEDS_ESCAPE.match(c))
    assert picked == "".join(
        chr(c) for c in range(0x110000) if c < 0x20 or c >= 0x7F or chr(c) in "\"'\\"
    )
