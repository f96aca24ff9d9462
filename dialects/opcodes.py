"""Every HLO opcode as data: spelling, arity, traits and attributes in XLA's print order.

The dialect (`hlo.py`) turns each row into an IRDL op class; the text importer and exporter
read the same rows, so an attribute is declared once. Attribute kinds are the keys of
`hlopass.ir.attrs.KINDS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VARIADIC = -1


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: str
    required: bool = False


@dataclass(frozen=True)
class OpcodeSpec:
    opcode: str
    arity: int = VARIADIC
    traits: frozenset[str] = frozenset()
    attrs: tuple[AttrSpec, ...] = ()
    computations: tuple[AttrSpec, ...] = ()
    """Attributes naming called computations, printed after `attrs` as XLA does."""
    by_name: dict[str, AttrSpec] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for a in (*self.attrs, *self.computations):
            self.by_name[a.name] = a


def _a(spec: str) -> tuple[AttrSpec, ...]:
    """Parse `"name:kind name?:kind"`: `?` marks an optional attribute."""
    out = []
    for item in spec.split():
        name, kind = item.split(":")
        required = not name.endswith("?")
        out.append(AttrSpec(name.rstrip("?"), kind, required))
    return tuple(out)


# Traits: pure (no side effect), elementwise, commutative, transcendental, binary, unary,
# side_effect, collective, async, shape_only (reshape-like: moves data, no arithmetic).
_T = frozenset
PURE_EW = _T({"pure", "elementwise"})
UNARY = PURE_EW | {"unary"}
BINARY = PURE_EW | {"binary"}
TRANSC = UNARY | {"transcendental"}
COMM = BINARY | {"commutative"}

_COLLECTIVE_GATHER = "channel_id?:int replica_groups?:replica_groups constrain_layout?:bool dimensions:ints use_global_device_ids?:bool"
# `mode=` is read and dropped, as XLA's parser does (the feature was rolled back).
_COLLECTIVE_REDUCE = "channel_id?:int replica_groups?:replica_groups constrain_layout?:bool use_global_device_ids?:bool mode?:ident"
_DOT = "lhs_batch_dims?:ints lhs_contracting_dims?:ints rhs_batch_dims?:ints rhs_contracting_dims?:ints"
# The kind is printed before the precision; `sparsity_config={}` (empty) is dropped.
_CONV = "window?:window dim_labels:dim_labels feature_group_count?:int batch_group_count?:int convolution_kind?:ident operand_precision?:precision sparsity_config?:raw"
_RESULT_ACCURACY = "result_accuracy?:result_accuracy"

_ROWS: list[OpcodeSpec] = []


def op(opcode: str, arity: int = VARIADIC, traits: frozenset[str] = _T(), attrs: str = "",
       comps: str = "") -> None:  # fmt: skip
    _ROWS.append(OpcodeSpec(opcode, arity, frozenset(traits), _a(attrs), _a(comps)))


for _name in ("abs", "ceil", "floor", "negate", "not", "sign", "round-nearest-afz",
              "round-nearest-even", "real", "imag", "is-finite", "count-leading-zeros",
              "popcnt"):  # fmt: skip
    op(_name, 1, UNARY)
for _name in ("acos", "acosh", "asin", "asinh", "atanh", "cbrt", "cosine", "cosh", "erf",
              "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt",
              "sine", "sinh", "sqrt", "tan", "tanh"):  # fmt: skip
    op(_name, 1, TRANSC, _RESULT_ACCURACY)
for _name in ("add", "multiply", "maximum", "minimum", "and", "or", "xor", "mulhi"):
    op(_name, 2, COMM)
for _name in ("subtract", "divide", "remainder", "power", "atan2", "complex", "shift-left",
              "shift-right-arithmetic", "shift-right-logical", "stochastic-convert"):  # fmt: skip
    op(_name, 2, BINARY)
op("power", 2, BINARY | {"transcendental"})
op("atan2", 2, BINARY | {"transcendental"})
op("clamp", 3, PURE_EW)
op("select", 3, PURE_EW)
op("compare", 2, BINARY, "direction:ident type?:ident")
op("convert", 1, UNARY)
op("bitcast-convert", 1, _T({"pure"}))
op("reduce-precision", 1, UNARY, "exponent_bits:int mantissa_bits:int")

op("parameter", 0, _T({"pure"}), "number:int parameter_replication?:bools")
op("constant", 0, _T({"pure"}), "value:constant")
op("iota", 0, _T({"pure"}), "iota_dimension:int")
op("broadcast", 1, _T({"pure", "shape_only"}), "dimensions:ints")
op("reshape", 1, _T({"pure", "shape_only"}), "inferred_dimension?:int")
op("dynamic-reshape", VARIADIC, _T({"pure"}))
op("transpose", 1, _T({"pure", "shape_only"}), "dimensions:ints")
op("bitcast", 1, _T({"pure", "shape_only"}))
op("copy", 1, _T({"pure", "shape_only"}))
op("reverse", 1, _T({"pure"}), "dimensions:ints")
op("slice", 1, _T({"pure"}), "slice:slice")
op("dynamic-slice", VARIADIC, _T({"pure"}), "dynamic_slice_sizes:ints")
op("dynamic-update-slice", VARIADIC, _T({"pure"}))
op("concatenate", VARIADIC, _T({"pure"}), "dimensions:ints")
op("pad", 2, _T({"pure"}), "padding:padding")
op("reduce", VARIADIC, _T({"pure"}), "dimensions:ints", "to_apply:comp")
op("reduce-window", VARIADIC, _T({"pure"}), "window?:window", "to_apply:comp")
op("select-and-scatter", 3, _T({"pure"}), "window?:window", "select:comp scatter:comp")
op("map", VARIADIC, _T({"pure"}), "dimensions?:ints", "to_apply:comp")
op("dot", 2, _T({"pure"}), f"{_DOT} operand_precision?:precision algorithm?:dot_algorithm")
op(
    "ragged-dot",
    3,
    _T({"pure"}),
    f"{_DOT} lhs_ragged_dims?:ints rhs_group_dims?:ints operand_precision?:precision",
)
op("scaled-dot", 4, _T({"pure"}), f"{_DOT} operand_precision?:precision algorithm?:dot_algorithm")
op("convolution", VARIADIC, _T({"pure"}), _CONV)
op("fft", 1, _T({"pure"}), "fft_type:ident fft_length:ints")
op("gather", 2, _T({"pure"}),
   "offset_dims:ints collapsed_slice_dims:ints start_index_map:ints operand_batching_dims?:ints "
   "start_indices_batching_dims?:ints index_vector_dim:int "
   "slice_sizes:ints indices_are_sorted?:bool")  # fmt: skip
op("scatter", VARIADIC, _T({"pure"}),
   "update_window_dims:ints inserted_window_dims:ints scatter_dims_to_operand_dims:ints "
   "input_batching_dims?:ints scatter_indices_batching_dims?:ints index_vector_dim:int "
   "indices_are_sorted?:bool unique_indices?:bool", "to_apply:comp")  # fmt: skip
op("scan", VARIADIC, _T({"pure"}),
   "dimensions:ints num_carries:int is_reverse?:bool is_associative?:bool", "to_apply:comp")  # fmt: skip
op("sort", VARIADIC, _T({"pure"}), "dimensions:ints is_stable?:bool", "to_apply:comp")
op("topk", 1, _T({"pure"}), "k:int largest?:bool")
op("tuple", VARIADIC, _T({"pure"}))
op("get-tuple-element", 1, _T({"pure"}), "index:int")
op("while", 1, _T(), "", "condition:comp body:comp")
op(
    "conditional",
    VARIADIC,
    _T(),
    "",
    "true_computation?:comp false_computation?:comp branch_computations?:comps",
)
op("call", VARIADIC, _T(), "", "to_apply:comp is_composite?:bool")
op("fusion", VARIADIC, _T({"pure"}), "kind:ident output_to_operand_aliasing?:raw", "calls:comp")
op("custom-call", VARIADIC, _T({"side_effect_attr"}),
   "window?:window dim_labels?:dim_labels feature_group_count?:int batch_group_count?:int "
   "operand_precision?:precision padding_type?:ident custom_call_target:str "
   "operand_layout_constraints?:shapes custom_call_has_side_effect?:bool literal?:literal "
   "output_to_operand_aliasing?:raw schedule?:ident api_version?:ident",
   "to_apply?:comp called_computations?:comps")  # fmt: skip
op(
    "triangular-solve",
    2,
    _T({"pure"}),
    "left_side?:bool lower?:bool unit_diagonal?:bool transpose_a?:ident",
)
op("cholesky", 1, _T({"pure"}), "lower?:bool")
op("batch-norm-training", 3, _T({"pure"}), "epsilon:float feature_index:int")
op("batch-norm-inference", 5, _T({"pure"}), "epsilon:float feature_index:int")
op("batch-norm-grad", 5, _T({"pure"}), "epsilon:float feature_index:int")
op("rng", VARIADIC, _T({"side_effect", "rng"}), "distribution:ident")
op("rng-bit-generator", 1, _T({"pure", "rng"}), "algorithm:ident")
op("rng-get-and-update-state", 0, _T({"side_effect", "rng"}), "delta:int")
op("get-dimension-size", 1, _T({"pure"}), "dimensions:ints")
op("set-dimension-size", 2, _T({"pure"}), "dimensions:ints")
op("domain", 1, _T(), "domain:raw")
op("opt-barrier", 1, _T())
op("add-dependency", 2, _T())
op("after-all", VARIADIC, _T({"side_effect"}))
op("infeed", 1, _T({"side_effect"}), "infeed_config?:str")
op("outfeed", 2, _T({"side_effect"}), "outfeed_shape?:shape outfeed_config?:str")
op("send", 2, _T({"side_effect"}), "channel_id?:int is_host_transfer?:bool")
op("send-done", 1, _T({"side_effect"}), "channel_id?:int is_host_transfer?:bool")
op("recv", 1, _T({"side_effect"}), "channel_id?:int is_host_transfer?:bool")
op("recv-done", 1, _T({"side_effect"}), "channel_id?:int is_host_transfer?:bool")
op("replica-id", 0, _T())
op("partition-id", 0, _T())
op("all-gather", VARIADIC, _T({"side_effect", "collective"}), _COLLECTIVE_GATHER)
op("all-gather-start", VARIADIC, _T({"side_effect", "collective", "async"}), _COLLECTIVE_GATHER)
op("all-gather-done", 1, _T({"side_effect", "collective", "async"}))
op("all-reduce", VARIADIC, _T({"side_effect", "collective"}), _COLLECTIVE_REDUCE, "to_apply:comp")
op("all-reduce-start", VARIADIC, _T({"side_effect", "collective", "async"}), _COLLECTIVE_REDUCE,
   "to_apply:comp")  # fmt: skip
op("all-reduce-done", 1, _T({"side_effect", "collective", "async"}))
op("reduce-scatter", VARIADIC, _T({"side_effect", "collective"}),
   "channel_id?:int replica_groups?:replica_groups constrain_layout?:bool "
   "use_global_device_ids?:bool dimensions:ints mode?:ident", "to_apply:comp")  # fmt: skip
op(
    "all-to-all",
    VARIADIC,
    _T({"side_effect", "collective"}),
    "channel_id?:int replica_groups?:replica_groups constrain_layout?:bool dimensions?:ints",
)
op(
    "ragged-all-to-all",
    6,
    _T({"side_effect", "collective"}),
    "channel_id?:int replica_groups?:replica_groups dimensions?:ints",
)
op(
    "collective-broadcast",
    VARIADIC,
    _T({"side_effect", "collective"}),
    "channel_id?:int replica_groups:replica_groups",
)
op(
    "collective-permute",
    VARIADIC,
    _T({"side_effect", "collective"}),
    "channel_id?:int source_target_pairs:intss slice_sizes?:intss",
)
op(
    "collective-permute-start",
    VARIADIC,
    _T({"side_effect", "collective", "async"}),
    "channel_id?:int source_target_pairs:intss slice_sizes?:intss",
)
op("collective-permute-done", 1, _T({"side_effect", "collective", "async"}))
op("async-start", VARIADIC, _T({"async"}),
   "async_execution_thread?:str output_to_operand_aliasing?:raw", "calls:comp")  # fmt: skip
op("async-update", VARIADIC, _T({"async"}), "async_execution_thread?:str", "calls?:comp")
op("async-done", 1, _T({"async"}), "async_execution_thread?:str", "calls?:comp")
op("copy-start", 1, _T({"async"}), "cross_program_prefetch_index?:int")
op("copy-done", 1, _T({"async"}))

# Attributes every instruction may carry, in XLA's print order after the opcode's own.
COMMON_ATTRS: tuple[AttrSpec, ...] = _a(
    "sharding?:raw frontend_attributes?:raw control-predecessors?:names statistics?:raw "
    "origin?:raw metadata?:metadata backend_config?:backend_config"
)

OPCODES: dict[str, OpcodeSpec] = {}
for _row in _ROWS:
    OPCODES[_row.opcode] = _row  # later rows (power, atan2) refine earlier ones

COMMON_BY_NAME = {a.name: a for a in COMMON_ATTRS}

# Enumerated identifier values accepted for `ident` attributes.
IDENT_VALUES: dict[str, frozenset[str]] = {
    "direction": _T({"EQ", "NE", "GE", "GT", "LE", "LT"}),
    "type": _T({"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"}),
    "kind": _T({"kLoop", "kInput", "kOutput", "kCustom"}),
    "fft_type": _T({"FFT", "IFFT", "RFFT", "IRFFT"}),
    "distribution": _T({"rng_uniform", "rng_normal"}),
    "algorithm": _T({"rng_default", "rng_three_fry", "rng_philox"}),
    "schedule": _T({"SCHEDULE_NONE", "SCHEDULE_LATEST", "SCHEDULE_EARLIEST"}),
    "api_version": _T({"API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
                       "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"}),
    "padding_type": _T({"PADDING_INVALID", "PADDING_VALID", "PADDING_SAME"}),
    "transpose_a": _T({"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT", "TRANSPOSE_INVALID"}),
    "convolution_kind": _T({"fprop", "dgrad", "wgrad"}),
    "mode": _T({"cross_replica", "cross_partition", "cross_replica_and_partition",
                "flattened_id"}),
}  # fmt: skip

# Module header attributes, in XLA's print order, with their value kinds (the importer reads
# them, the exporter prints them in this order).
MODULE_ATTRS: dict[str, str] = {
    "is_scheduled": "bool",
    "input_output_alias": "raw",
    "buffer_donor": "raw",
    "alias_passthrough_params": "bool",
    "entry_computation_layout": "program_shape",
    "allow_spmd_sharding_propagation_to_parameters": "raw",
    "allow_spmd_sharding_propagation_to_output": "raw",
    "replica_count": "int",
    "num_partitions": "int",
    "frontend_attributes": "raw",
    "origin_recovery_table": "raw",
}

# What XLA's printer leaves out or adds, per attribute (the exporter's omission rules).
# Attributes printed only when they differ from XLA's default value.
OMIT_DEFAULT: dict[str, object] = {
    "feature_group_count": 1,
    "batch_group_count": 1,
    "api_version": "API_VERSION_ORIGINAL",
    "schedule": "SCHEDULE_NONE",
    "algorithm_dot": "unset",
}
# Attributes XLA prints even when the text left them out, with the value it prints.
ALWAYS_PRINTED: dict[str, dict[str, str]] = {
    "dot": {"lhs_contracting_dims": "{}", "rhs_contracting_dims": "{}"},
    "all-gather": {"replica_groups": "{}"},
    "all-gather-start": {"replica_groups": "{}"},
    "all-to-all": {"replica_groups": "{}"},
    "all-reduce": {"replica_groups": "{}"},
    "all-reduce-start": {"replica_groups": "{}"},
    "reduce-scatter": {"replica_groups": "{}"},
    "scan": {"is_associative": "false"},
    "topk": {"largest": "true"},
}
# Attributes XLA prints on an async-start only, never on its update or done.
FROM_START = frozenset({"calls", "async_execution_thread"})
# Attributes left out when false / empty (the batch dimensions: on a dot only).
OMIT_FALSE = frozenset({"unique_indices", "indices_are_sorted", "is_stable", "is_reverse"})
OMIT_EMPTY = frozenset({"lhs_batch_dims", "rhs_batch_dims"})
# The metadata fields XLA's printer shows: metadata holding none of them is left out.
METADATA_PRINTED = frozenset(
    ("op_type", "op_name", "source_file", "scheduling_name", "metadata_payload")
)
# The wrapped instruction's common attributes an async-start's shorthand shows (after the
# wrapped op's own attributes; XLA's PrintExtraAttributes), unless the start has its own
# frontend_attributes (which then replace the wrapped instruction's).
SUGAR_SHOWN = ("sharding", "frontend_attributes", "statistics")


def default_compare_type(element_type: str) -> str:
    """The comparison type XLA's printer leaves out for operands of `element_type`."""
    if element_type in ("pred",) or element_type.startswith("u"):
        return "UNSIGNED"
    if element_type.startswith("s"):
        return "SIGNED"
    return "FLOAT"
