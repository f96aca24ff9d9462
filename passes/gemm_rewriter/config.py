"""The cuBLAS call's `backend_config` (XLA's GpuBackendConfig with its GemmBackendConfig),
read and written as a dict, printed in the field order XLA's JSON printer uses, and the
questions the rewrites ask of a call (which library, which epilogue)."""

from __future__ import annotations

import json
from typing import Any

from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import backend_config

GEMM = "__cublas$gemm"
"""Legacy cuBLAS (XLA's kGemmCallTarget)."""
LT = "__cublas$lt$matmul"
"""cublasLt (XLA's kCublasLtMatmulCallTarget): the library with epilogues."""

_FIELDS = (
    "alpha_real", "beta", "dot_dimension_numbers", "alpha_imag", "precision_config",
    "epilogue", "lhs_stride", "rhs_stride", "grad_x", "grad_y", "damax_output",
)  # fmt: skip
"""GemmBackendConfig's fields in the order XLA prints them."""


def is_gemm(op: object, targets: tuple[str, ...] = (GEMM, LT)) -> bool:
    """`op` is a cuBLAS call of one of `targets` (before the workspace is added: an
    array-shaped custom-call)."""
    return (
        isinstance(op, HloOp)
        and op.opcode == "custom-call"
        and op.attr("custom_call_target") in targets
    )


def gemm_config(op: HloOp) -> dict[str, Any]:
    """The call's GemmBackendConfig (a fresh dict: edit it and `set_gemm_config`), with
    the proto's defaults for the fields XLA may leave out."""
    cfg = backend_config(op)
    g = dict(cfg.get("gemm_backend_config", cfg))
    for key, default in (
        ("alpha_real", 1),
        ("alpha_imag", 0),
        ("beta", 0),
        ("epilogue", "DEFAULT"),
    ):
        g.setdefault(key, default)
    return g


def set_gemm_config(op: HloOp, gemm: dict[str, Any]) -> None:
    op.set_attr("backend_config", config_text(gemm))


def _number(x: float) -> int | float:
    """XLA prints whole doubles without a fraction (`"alpha_real":1`)."""
    return int(x) if float(x).is_integer() else float(x)


def config_text(gemm: dict[str, Any]) -> str:
    """The GpuBackendConfig text XLA prints for a cuBLAS call with this GemmBackendConfig."""
    g = {k: gemm[k] for k in _FIELDS if k in gemm}
    for k in ("alpha_real", "alpha_imag", "beta"):
        g[k] = _number(g[k])
    outer = {
        "operation_queue_id": "0",
        "wait_on_operation_queues": [],
        "gemm_backend_config": g,
        "force_earliest_schedule": False,
    }
    return json.dumps(outer, separators=(",", ":"))


def _dims(values: Any) -> list[str]:
    return [str(int(d)) for d in values or ()]


def new_config(dot: HloOp) -> dict[str, Any]:
    """XLA's HandleDot: alpha 1, beta 0, the dot's dimension numbers and precision, the
    gradient marks of its frontend attributes, operand strides, DEFAULT epilogue."""
    lb = list(dot.attr("lhs_batch_dims") or ())
    dn = {
        "lhs_contracting_dimensions": _dims(dot.attr("lhs_contracting_dims")),
        "rhs_contracting_dimensions": _dims(dot.attr("rhs_contracting_dims")),
        "lhs_batch_dimensions": _dims(lb),
        "rhs_batch_dimensions": _dims(dot.attr("rhs_batch_dims")),
    }
    prec = dot.attr("operand_precision") or ("default", "default")
    fa = str(dot.attr("frontend_attributes") or "")
    return {
        "alpha_real": 1, "beta": 0, "dot_dimension_numbers": dn, "alpha_imag": 0,
        "precision_config": {"operand_precision": [str(p).upper() for p in prec],
                             "algorithm": "ALG_UNSET"},
        "epilogue": "DEFAULT",
        "lhs_stride": str(_stride(dot, 0, len(lb))), "rhs_stride": str(_stride(dot, 1, len(lb))),
        "grad_x": 'grad_x="true"' in fa, "grad_y": 'grad_y="true"' in fa,
        "damax_output": False,
    }  # fmt: skip


def _stride(dot: HloOp, side: int, n_batch: int) -> int:
    """Elements between two batch entries of the operand as XLA computes it: the product of
    the two dimensions after the batch ones (one for a vector operand)."""
    dims = dot.operands[side].type.data.dims  # type: ignore[attr-defined]
    if len(dims) == n_batch + 1:
        return dims[n_batch]
    return dims[n_batch] * dims[n_batch + 1]


def n_col_dims(op: HloOp, gemm: dict[str, Any]) -> int:
    """The output's column dimensions: the RHS's non-contracting ones."""
    dn = gemm["dot_dimension_numbers"]
    rank = op.operands[1].type.data.rank  # type: ignore[attr-defined]
    return rank - len(dn["rhs_batch_dimensions"]) - len(dn["rhs_contracting_dimensions"])
