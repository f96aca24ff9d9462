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
    "all-gather-start": "asynchronous collectives: no multi-replica runtime yet",
    "all-gather-done": "asynchronous collectives: no multi-replica runtime yet",
    "all-reduce-start": "asynchronous collectives: no multi-replica runtime yet",
    "all-reduce-done": "asynchronous collectives: no multi-replica runtime yet",
    "collective-permute-start": "asynchronous collectives: no multi-replica runtime yet",
    "collective-permute-done": "asynchronous collectives: no multi-replica runtime yet",
    "all-to-all": "collectives across replicas: no multi-replica runtime yet",
    "ragged-all-to-all": "collectives across replicas: no multi-replica runtime yet",
    "reduce-scatter": "collectives across replicas: no multi-replica runtime yet",
    "collective-permute": "collectives across replicas: no multi-replica runtime yet",
    "batch-norm-training": "not implemented (XLA expands it with BatchNormExpander first)",
    "batch-norm-inference": "not implemented (XLA expands it with BatchNormExpander first)",
    "batch-norm-grad": "not implemented (XLA expands it with BatchNormExpander first)",
    "cholesky": "not implemented (XLA-CPU calls LAPACK through a custom call)",
    "triangular-solve": "not implemented (XLA-CPU calls LAPACK through a custom call)",
    "dynamic-reshape": "dynamic shapes are not modelled",
    "set-dimension-size": "dynamic shapes are not modelled",
    "infeed": "host transfers have no source in the interpreter",
    "outfeed": "host transfers have no sink in the interpreter",
    "send": "channels between programs are not modelled",
    "send-done": "channels between programs are not modelled",
    "recv": "channels between programs are not modelled",
    "recv-done": "channels between programs are not modelled",
    "rng": "XLA's rng algorithm is backend-specific; not reproduced",
    "rng-get-and-update-state": "XLA's rng state is backend-specific; not reproduced",
    "ragged-dot": "not implemented",
    "scaled-dot": "not implemented (block-scaled low-precision dot)",
    "stochastic-convert": "rounding depends on random bits; not implemented",
}
