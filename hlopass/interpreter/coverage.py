"""Opcodes the interpreter has no handler for, each with the reason.

`tests/test_grammar.py` checks that every opcode of XLA's list is either handled (in
`HANDLERS`) or listed here; `docs/GRAMMAR.md` shows both. An opcode that gains a handler
is reported as handled whatever this table says.
"""

from __future__ import annotations

BUILT_IN = {
    "parameter": "bound by the engine to the computation's arguments",
}

UNSUPPORTED: dict[str, str] = {
    "scaled-dot": "not implemented (block-scaled low-precision dot)",
}

# Opcodes with a handler that still refuses some forms, with the reason (the refusal is an
# UnsupportedOpError naming the instruction):
REFUSED_FORMS: dict[str, str] = {
    "infeed": "host transfers have no source in the interpreter",
    "outfeed": "host transfers have no sink in the interpreter",
    "send": "without _xla_send_recv_source_target_pairs (a peer in another program) or "
    "to the host (is_host_transfer=true): only sends between the devices of one run",
    "recv": "without _xla_send_recv_source_target_pairs (a peer in another program) or "
    "from the host (is_host_transfer=true): only recvs between the devices of one run",
    "collective-permute": "the in-place form (output buffer, offsets, slice_sizes)",
    "custom-call": "targets with no meaning outside their backend or test ('foo', "
    "'PartialReduce', 'DynamicConvolutionForward', xla_builder targets without a "
    "decomposition but the math ones listed in custom_calls.py)",
}
