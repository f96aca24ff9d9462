"""The `hlo` xDSL dialect: one op per HLO opcode, shapes as types, attributes as properties.

Layout of a module in IR:

    builtin.module attributes {sym_name = "m", hlo.<module attr> = ...} {
      hlo.computation @name {entry} {            // region of one block
        %p = hlo.parameter <{name = "p", number}> : !hlo.shape<"f32[2]{0}">
        ...
        hlo.return %root                          // the ROOT; always last
      }
    }

Instruction names, attributes and shapes are properties holding plain Python values
(`hlopass.ir.shape`, `hlopass.ir.attrs`), so passes read `op.shape`, `op.attr("dimensions")`.
Called computations are symbol references. Op classes are generated from the table in
`opcodes.py`; traits (Pure, Elementwise, Commutative, ...) come from the same rows.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from xdsl.dialects.builtin import UNKNOWN_LOC, ArrayAttr, StringAttr, SymbolRefAttr, UnitAttr
from xdsl.ir import (
    Attribute,
    Block,
    Data,
    Dialect,
    Operation,
    OpResult,
    Region,
    SSAValue,
    SSAValues,
    TypeAttribute,
    Use,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.irdl.constraints import AnyAttr, BaseAttr, EqIntConstraint, RangeLengthConstraint, RangeOf
from xdsl.irdl.operations import (  # noqa: F401
    OpDef,
    OptPropertyDef,
    SingleBlockRegionDef,
    VarOperandDef,
    _PropertyFieldDef,
)
from xdsl.traits import (
    Commutative,
    HasParent,
    IsTerminator,
    NoTerminator,
    OpTrait,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from hlopass.checking.verifier import verify_instruction
from hlopass.dialects.opcodes import COMMON_ATTRS, OPCODES, AttrSpec, OpcodeSpec
from hlopass.ir.fields import set_field
from hlopass.ir.shape import Shape

if TYPE_CHECKING:  # (xDSL's parser and printer: ~25 ms of every process's import)
    from xdsl.context import Context
    from xdsl.parser import AttrParser
    from xdsl.printer import Printer

# --- traits -------------------------------------------------------------------------------


class Elementwise(OpTrait):
    """Applies the same scalar function to each element; operands and result share dims."""


class Transcendental(OpTrait):
    """Counted as a transcendental by XLA's cost analysis."""


class HasSideEffect(OpTrait):
    """Must not be removed, duplicated or reordered across other side effects."""


class ShapeOnly(OpTrait):
    """Moves or relabels data without arithmetic (reshape, transpose, broadcast, copy)."""


class Collective(OpTrait):
    """Communicates across replicas or partitions."""


class RandomNumber(OpTrait):
    """Produces random numbers; never folded or CSE'd."""


_TRAITS: dict[str, OpTrait] = {
    "pure": Pure(),
    "elementwise": Elementwise(),
    "commutative": Commutative(),
    "transcendental": Transcendental(),
    "side_effect": HasSideEffect(),
    "shape_only": ShapeOnly(),
    "collective": Collective(),
    "rng": RandomNumber(),
}

# --- types and attributes -----------------------------------------------------------------


# xDSL's generic text spells an HLO type or attribute as its HLO text, which only the text
# layer (above this one) reads: `hlopass.text.parse_values` installs its reader here when imported,
# as everything that reads such text (`hlopass.text.xdsl_io`, the `xdsl-opt` universe) imports it.
_ATTRIBUTE_READER: list[Callable[[str, str], Any]] = []


def install_attribute_reader(read: Callable[[str, str], Any]) -> None:
    """Make `read(kind, text)` the reader of HLO attribute text in xDSL's generic format."""
    _ATTRIBUTE_READER[:] = [read]


def _parse_hlo_attr_text(kind: str, text: str) -> Any:
    if not _ATTRIBUTE_READER:
        raise RuntimeError("reading HLO attribute text needs hlopass.text.parse_values imported")
    return _ATTRIBUTE_READER[0](kind, text)


@irdl_attr_definition
class ShapeType(Data[Shape], TypeAttribute):
    """An HLO shape (array with layout, tuple, token): `!hlo.shape<"f32[2,3]{1,0}">`."""

    name = "hlo.shape"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> Shape:
        with parser.in_angle_brackets():
            return _parse_hlo_attr_text("shape", parser.parse_str_literal())

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.data.text())

    def __hash__(self) -> int:
        return hash(self.data)


_SHAPE_TYPES: dict[Shape, ShapeType] = {}


def shape_type(shape: Shape, texts: tuple[str, str] | None = None) -> ShapeType:
    """The (interned) IR type of a shape; `texts`, when given, are the shape's text as XLA
    prints it, with and without layouts (the parser passes a token already in that form)."""
    t = _SHAPE_TYPES.get(shape)
    if t is None:
        t = ShapeType.new(shape)
        _SHAPE_TYPES[shape] = t
        if texts is not None:
            # Under the names `exporter._type_text` caches them: the first print renders
            # no shape the module spelled as XLA prints it. (On the type, not the shape,
            # whose fields the parser reads often; stored inline: see `set_field`.)
            set_field(t, "_hlo_text", texts[0])
            set_field(t, "_hlo_text_nl", texts[1])
    return t


class HloAttr(Data[Any]):
    """An attribute value of one HLO kind, printed in xDSL as its HLO text in quotes."""

    kind: ClassVar[str]

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> Any:
        with parser.in_angle_brackets():
            return _parse_hlo_attr_text(cls.kind, parser.parse_str_literal())

    def print_parameter(self, printer: Printer) -> None:
        from hlopass.ir.attrs import format_value

        with printer.in_angle_brackets():
            printer.print_string_literal(format_value(self.kind, self.data))

    def __hash__(self) -> int:
        return hash((type(self), self.data))


ATTR_KINDS = (
    "int", "bool", "float", "str", "ident", "ints", "intss", "bools", "names", "window",
    "dim_labels", "slice", "padding", "precision", "shape", "shapes", "literal", "raw",
    "metadata", "backend_config", "replica_groups", "comps", "constant", "dot_algorithm",
    "result_accuracy",
)  # fmt: skip

ATTR_CLASSES: dict[str, type[HloAttr]] = {}
for _kind in ATTR_KINDS:
    _cls = type(
        f"{_kind.title().replace('_', '')}Attr",
        (HloAttr,),
        {"name": f"hlo.{_kind}", "kind": _kind, "__module__": __name__},
    )
    ATTR_CLASSES[_kind] = irdl_attr_definition(_cls)  # type: ignore[arg-type]


def attr_to_value(kind: str, attr: Attribute) -> Any:
    if kind == "comp":
        assert isinstance(attr, SymbolRefAttr)
        return attr.root_reference.data
    return attr.data  # type: ignore[attr-defined]


def value_to_attr(kind: str, value: Any) -> Attribute:
    if kind == "comp":
        return symbol_ref(value)
    a = _new(ATTR_CLASSES[kind])
    set_field(a, "data", value)
    return a


# --- ops ----------------------------------------------------------------------------------


class Operands(SSAValues[SSAValue]):
    """An instruction's operands: the operand tuple itself, where xDSL's `op.operands` builds
    a view object on every read. Unpacking, iterating and `len` run at the speed of a tuple;
    `ops[i] = v` (as xDSL's rewriters write) replaces operand `i` of the instruction,
    moving its use, as xDSL's view does. Passes read operands several hundred thousand
    times per pipeline on an LLM module: the view's construction alone was a twentieth of
    a pass's time."""

    _op: Operation

    # `ops[i]` in C (SSAValues' `__getitem__` is Python: ~70k calls on Mixtral's pipeline,
    # 3.4% of its machine instructions); a slice is then a plain tuple, without `.types`
    # (see `_ALL_OPERANDS`).
    __getitem__ = tuple.__getitem__  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]

    def __setitem__(self, idx: int, value: SSAValue) -> None:
        op = self._op
        use = op._operand_uses[idx]  # pyright: ignore[reportPrivateUsage]
        values = list(self)  # (a list's indexing, not SSAValues' in Python)
        values[idx].remove_use(use)
        value.add_use(use)
        values[idx] = value
        new = Operands(values)
        new._op = op
        op._operands = new  # pyright: ignore[reportPrivateUsage]


class Results(SSAValues[OpResult]):
    """An instruction's one result, indexed in C (`op.results[0]`, as `Operands`)."""

    __getitem__ = tuple.__getitem__  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]


class HloOp(IRDLOperation):
    """Base of every HLO instruction op: one result, an HLO name, attributes by HLO name."""

    OPCODE: ClassVar[str]
    SPEC: ClassVar[OpcodeSpec]
    ATTR_SPECS: ClassVar[dict[str, AttrSpec]]

    # Identity, as xDSL's operations have it, but in C: xDSL's `__hash__`/`__eq__` are
    # Python calls, and the passes key dicts and sets by instruction (the fixpoint's
    # journals, the call index) some 400k times on Mixtral's pipeline.
    __hash__ = object.__hash__
    __eq__ = object.__eq__  # pyright: ignore[reportAssignmentType]

    @property
    def operands(self) -> Operands:  # pyright: ignore[reportIncompatibleMethodOverride]
        ops = self._operands
        if type(ops) is Operands:
            return ops
        # made on the first read after a construction or an edit (not before: parsing and
        # printing a module never read them this way)
        ops = Operands(ops)
        ops._op = self
        self._operands = ops
        return ops

    @operands.setter
    def operands(self, new: Sequence[SSAValue]) -> None:
        Operation.operands.fset(self, new)  # type: ignore[attr-defined]  # (moves the uses)

    @property
    def opcode(self) -> str:
        return self.OPCODE

    @property
    def spec(self) -> OpcodeSpec:
        return self.SPEC

    @property
    def attr_specs(self) -> dict[str, AttrSpec]:
        return self.ATTR_SPECS

    @property
    def inst_name(self) -> str:
        return self.properties["name"].data  # type: ignore[attr-defined]

    @inst_name.setter
    def inst_name(self, value: str) -> None:
        self.properties["name"] = StringAttr(value)

    @property
    def shape(self) -> Shape:
        (r,) = self.results  # (unpacked: xDSL's `SSAValues` indexes in Python)
        return r._type.data  # type: ignore[attr-defined]  # pyright: ignore[reportPrivateUsage]

    @property
    def result(self) -> SSAValue:
        (r,) = self.results
        return r

    def attr(self, name: str, default: Any = None) -> Any:
        """The Python value of HLO attribute `name`, or `default` when absent."""
        a = self.properties.get(name)
        if a is None:
            return default
        # (`attr_to_value` inline, from the class's specs: passes read attributes ~40k times
        # per fixpoint pipeline on Mixtral)
        if self.ATTR_SPECS[name].kind == "comp":
            return a.root_reference.data  # type: ignore[attr-defined]
        return a.data  # type: ignore[attr-defined]

    def set_attr(self, name: str, value: Any) -> None:
        """Set (or with `None`, remove) HLO attribute `name`."""
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value_to_attr(self.attr_specs[name].kind, value)

    def hlo_attrs(self) -> Iterator[tuple[AttrSpec, Any]]:
        """(spec, value) of each attribute present, in XLA's print order."""
        props = self.properties
        for spec in self.attr_specs.values():
            a = props.get(spec.name)
            if a is not None:
                yield spec, attr_to_value(spec.kind, a)

    def callees(self) -> list[str]:
        names: list[str] = []
        props = self.properties
        for spec in self.spec.computations:
            a = props.get(spec.name)
            if a is None:
                continue
            if spec.kind == "comp":
                names.append(attr_to_value("comp", a))
            elif spec.kind == "comps":
                names.extend(a.data)  # type: ignore[attr-defined]
        return names

    def verify_(self) -> None:
        arity = self.spec.arity
        if arity >= 0 and len(self.operands) != arity:
            raise VerifyException(
                f"{self.opcode} {self.inst_name} takes {arity} operand(s), got {len(self.operands)}"
            )
        for operand in self.operands:
            if not isinstance(operand.type, ShapeType):
                raise VerifyException(f"operand of {self.inst_name} is not an HLO value")
        verify_instruction(self)


def _class_name(opcode: str) -> str:
    return "".join(p.title() for p in re.split(r"[-_]", opcode)) + "Op"


_RESERVED = set(dir(HloOp)) | {"name"}


def _field_name(attr_name: str) -> str:
    field = attr_name.replace("-", "_")
    return field + "_" if field in _RESERVED else field


# An instruction op's `args` accessor: its operands as they are (`SSAValues`, with `.types`,
# which xDSL's generic verifier reads), where xDSL's accessor would slice them.
_ALL_OPERANDS = property(lambda op: op.operands, doc="The instruction's operands (all of them).")


def _make_op_class(spec: OpcodeSpec) -> type[HloOp]:
    specs = {a.name: a for a in (*spec.attrs, *spec.computations, *COMMON_ATTRS)}
    fields: dict[str, Any] = {
        "name": f"hlo.{spec.opcode}",
        "OPCODE": spec.opcode,
        "SPEC": spec,
        "ATTR_SPECS": specs,
        "args": var_operand_def(),
        "out": result_def(ShapeType),
        "inst_name_": prop_def(StringAttr, prop_name="name"),
        "__module__": __name__,
        "__doc__": f"HLO `{spec.opcode}`.",
        "__annotations__": {
            "OPCODE": ClassVar[str],
            "SPEC": ClassVar[OpcodeSpec],
            "ATTR_SPECS": ClassVar[dict[str, AttrSpec]],
        },
    }
    for a in specs.values():
        constraint = SymbolRefAttr if a.kind == "comp" else ATTR_CLASSES[a.kind]
        fields[_field_name(a.name)] = opt_prop_def(constraint, prop_name=a.name)
    traits = [_TRAITS[t] for t in sorted(spec.traits) if t in _TRAITS]
    traits.append(HasParent(ComputationOp))
    fields["traits"] = traits_def(*traits)
    cls = type(_class_name(spec.opcode), (HloOp,), fields)
    op_cls = irdl_op_definition(cls)  # type: ignore[arg-type]
    op_cls.args = _ALL_OPERANDS  # type: ignore[attr-defined]
    op_cls.verify_ = _fast_verify(op_cls.get_irdl_definition(), HloOp.verify_)  # type: ignore[method-assign]
    return op_cls


class _NoAttr:
    """An attribute class nothing is an instance of (an unknown property's constraint)."""


def _definition_fast_path(op_def: OpDef, custom: Any, usual_form: Callable[[Any], bool]) -> Any:
    """`verify_` doing xDSL's generic definition checks of an op as a few direct tests:
    `usual_form(op)` (its operands, results, regions and successors as its definition
    wants them), properties of their classes (the required ones present), then its traits;
    xDSL's own `OpDef.verify` runs only when one of them fails, so every error reads as
    before. Then `custom`, the class's own checks. A module verify under `--verify-each`
    spends most of its time in the generic checks otherwise."""
    props = {name: d.constr.attr for name, d in op_def.properties.items()}  # type: ignore[attr-defined]
    required = tuple(n for n, d in op_def.properties.items() if not isinstance(d, OptPropertyDef))
    traits = tuple(t for t in op_def.traits if type(t).verify is not OpTrait.verify)

    def verify_(self: Operation) -> None:
        p = self.properties
        if (
            usual_form(self)
            and all(n in p for n in required)
            and all(isinstance(a, props.get(k, _NoAttr)) for k, a in p.items())
        ):
            for t in traits:
                t.verify(self)
        else:
            op_def.verify(self)  # raises xDSL's own message
        if custom is not None:
            custom(self)

    return verify_


def _instruction_form(op: Operation) -> bool:
    """An instruction op's usual form: one `ShapeType` result, no regions or successors
    (any operands)."""
    results = op.results
    return (
        len(results) == 1
        and isinstance(results[0].type, ShapeType)
        and not op.regions
        and not op.successors
    )


def _fast_verify(op_def: OpDef, custom: Any) -> Any:
    """An instruction op's `verify_`: `_definition_fast_path` when its definition has
    only what `_instruction_form` and the property test check, else xDSL's."""
    if _fast_checks_suffice(op_def):
        return _definition_fast_path(op_def, custom, _instruction_form)
    return _generic_verify(op_def, custom)


def _fast_checks_suffice(op_def: OpDef) -> bool:
    """The definition has only what `_fast_verify` tests for: any operands, one `ShapeType`
    result, properties constrained by class alone, no attributes, regions or options."""
    ((_, operands),) = op_def.operands
    ((_, result),) = op_def.results
    return (
        isinstance(operands, VarOperandDef)
        and isinstance(operands.constr, RangeOf)
        and isinstance(operands.constr.constr, AnyAttr)
        and isinstance(result.constr, RangeLengthConstraint)
        and result.constr.constraint == RangeOf(BaseAttr(ShapeType))
        and result.constr.length == EqIntConstraint(1)
        and not (op_def.regions or op_def.successors or op_def.attributes or op_def.options)
        and all(type(d.constr) is BaseAttr for d in op_def.properties.values())
    )


def _generic_verify(op_def: OpDef, custom: Any) -> Any:
    def verify_(self: HloOp) -> None:
        op_def.verify(self)
        custom(self)

    return verify_


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Marks the computation's ROOT instruction; not an HLO instruction itself."""

    name = "hlo.return"
    root = var_operand_def(ShapeType)
    traits = traits_def(IsTerminator())

    def __init__(self, root: SSAValue):
        super().__init__(operands=[[root]])


@irdl_op_definition
class ComputationOp(IRDLOperation):
    """An HLO computation; referenced by symbol from calling instructions."""

    name = "hlo.computation"
    __hash__ = object.__hash__  # (identity in C, as `HloOp`'s)
    __eq__ = object.__eq__  # pyright: ignore[reportAssignmentType]
    sym_name = prop_def(StringAttr)
    is_entry = opt_prop_def(UnitAttr)
    execution_thread = opt_prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(SymbolOpInterface())

    def __init__(self, name: str, block: Block | None = None, entry: bool = False):
        props: dict[str, Attribute] = {"sym_name": StringAttr(name)}
        if entry:
            props["is_entry"] = UnitAttr()
        super().__init__(properties=props, regions=[Region(block or Block())])

    @property
    def comp_name(self) -> str:
        # (the properties directly: xDSL's IRDL accessors cost several calls, and passes
        # ask the names of thousands of computations per run)
        return self.properties["sym_name"].data  # type: ignore[attr-defined]

    @property
    def block(self) -> Block:
        """The body's block (as `body.block`, without the IRDL accessor's calls)."""
        return self.regions[0]._first_block  # type: ignore[return-value]  # pyright: ignore[reportPrivateUsage]

    @property
    def root(self) -> HloOp:
        ret = self.body.block.last_op
        assert isinstance(ret, ReturnOp), f"computation {self.comp_name} has no hlo.return"
        owner = ret.operands[0].owner
        assert isinstance(owner, HloOp)
        return owner

    @property
    def instructions(self) -> Iterator[HloOp]:
        """Instructions in insertion order (the terminator excluded)."""
        for o in self.body.block.ops:
            if isinstance(o, HloOp):
                yield o

    def parameters(self) -> list[HloOp]:
        """The parameter instructions by number (down the op chain: the parser asks it of
        the callee at every call and fusion)."""
        params = cast(
            list[HloOp],
            [o for o in op_list(self.block) if getattr(o, "OPCODE", None) == "parameter"],
        )
        params.sort(key=lambda o: o.attr("number", 0))
        return params


def _computation_checks(op: ComputationOp) -> None:
    """ComputationOp's own check, after its definition's (its `verify_` is set below)."""
    if not isinstance(op.body.block.last_op, ReturnOp):
        raise VerifyException(f"computation {op.comp_name} must end with hlo.return")


def _structural_fast_verify(op_def: OpDef, custom: Any, operand_type: type | None,
                            regions: int) -> Any:  # fmt: skip
    """`verify_` of an op with no results or successors, `regions` single-block regions
    (any entry arguments), operands all of `operand_type` (None: no operands), properties
    constrained by class alone and no attributes (`ReturnOp`, `ComputationOp`: a module
    verify runs it on each of Mixtral's 4002 computations and their returns), through
    `_definition_fast_path`."""
    assert not (op_def.results or op_def.successors or op_def.attributes or op_def.options)
    assert all(type(d.constr) is BaseAttr for d in op_def.properties.values())
    assert len(op_def.regions) == regions and all(
        isinstance(d, SingleBlockRegionDef) and d.entry_args == RangeOf(AnyAttr())
        for _, d in op_def.regions
    )
    if operand_type is None:
        assert not op_def.operands
    else:
        ((_, operands),) = op_def.operands
        assert isinstance(operands, VarOperandDef)
        assert operands.constr == RangeOf(BaseAttr(operand_type))

    def usual_form(op: Operation) -> bool:
        rs = op.regions
        return not (
            op.results
            or op.successors
            or len(rs) != regions
            or any(r._first_block is None or r._first_block is not r._last_block for r in rs)  # pyright: ignore[reportPrivateUsage]
            or (
                any(not isinstance(v.type, operand_type) for v in op._operands)  # pyright: ignore[reportPrivateUsage]
                if operand_type is not None
                else op._operands  # pyright: ignore[reportPrivateUsage]
            )
        )

    return _definition_fast_path(op_def, custom, usual_form)


ReturnOp.verify_ = _structural_fast_verify(  # type: ignore[method-assign]
    ReturnOp.get_irdl_definition(), None, ShapeType, 0
)
ComputationOp.verify_ = _structural_fast_verify(  # type: ignore[method-assign]
    ComputationOp.get_irdl_definition(), _computation_checks, None, 1
)


class _OpClasses(dict[str, type[HloOp]]):
    """`OP_CLASSES`: opcode -> op class, each class built the first time it is asked for.

    Building all of XLA's opcodes as IRDL classes is ~15% of a process's imports, and a
    module uses a few dozen of them. As a mapping it is the whole table: iteration, `in`,
    `len`, `get`, `keys`, `values` and `items` cover every opcode (building the rest).
    `on_op_class` tells a callback of every class, built now or later."""

    def __missing__(self, opcode: str) -> type[HloOp]:
        spec = OPCODES[opcode]  # (KeyError for an unknown opcode, as a plain dict)
        with _BUILD_LOCK:  # one class per opcode, whichever thread asks first
            cls = dict.get(self, opcode)
            if cls is None:
                cls = _make_op_class(spec)
                # The fast construction (`create_op`) skips IRDLOperation.__post_init__,
                # which only fills in default property/attribute values: none may have any.
                assert not _has_defaults(cls), opcode
                dict.__setitem__(self, opcode, cls)
                for callback in _ON_OP_CLASS:
                    callback(cls)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(OPCODES)

    def __len__(self) -> int:
        return len(OPCODES)

    def __contains__(self, opcode: object) -> bool:
        return opcode in OPCODES

    def get(self, opcode: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[opcode] if opcode in OPCODES else default

    def keys(self) -> Any:  # type: ignore[override]
        return OPCODES.keys()

    def values(self) -> Any:  # type: ignore[override]
        return [self[o] for o in OPCODES]

    def items(self) -> Any:  # type: ignore[override]
        return [(o, self[o]) for o in OPCODES]


_BUILD_LOCK = threading.RLock()
_ON_OP_CLASS: list[Callable[[type[HloOp]], None]] = []
OP_CLASSES: dict[str, type[HloOp]] = _OpClasses()


# Built at import: the opcodes found in at least 3% of the 756 modules of the shared corpus
# (counted 2026-11-28); the other 87, each found in fewer, are built when a module uses
# them (~0.5 ms each).
_PREBUILT = (
    "parameter", "constant", "add", "tuple", "broadcast", "compare", "multiply", "reduce",
    "custom-call", "get-tuple-element", "select", "dot", "transpose", "convert", "fusion",
    "negate", "subtract", "reshape", "maximum", "sqrt", "call", "concatenate", "log", "iota",
    "exponential", "copy", "divide", "slice", "and", "bitcast", "or", "while", "scatter",
    "dynamic-update-slice", "abs", "dynamic-slice", "pad", "not", "sine", "reduce-window",
    "all-reduce", "minimum", "rsqrt", "xor", "all-gather", "shift-right-logical",
)  # fmt: skip


def on_op_class(callback: Callable[[type[HloOp]], None]) -> None:
    """Call `callback(cls)` for each op class of `OP_CLASSES` built so far, and for each
    one built later (for tables keyed by op class that must know them all)."""
    with _BUILD_LOCK:
        _ON_OP_CLASS.append(callback)
        for cls in list(dict.values(OP_CLASSES)):
            callback(cls)


def op_list(block: Block) -> list[Operation]:
    """`list(block.ops)`, about three times faster: xDSL's iterator makes two Python calls
    per op (its `__next__`, the `next_op` property) and `list()` first walks the block once
    more for its length; passes list the ops of Mixtral's entry computation (31k ops) a few
    times per run."""
    out: list[Operation] = []
    append = out.append
    op = block._first_op  # pyright: ignore[reportPrivateUsage]
    while op is not None:
        append(op)
        op = op._next_op  # pyright: ignore[reportPrivateUsage]
    return out


def computations(module: Operation) -> list[ComputationOp]:
    # `type(o) is`, not `isinstance`: xDSL's op classes check instances through ABCMeta, and
    # passes ask once per run over thousands of computations (nothing subclasses this op)
    return [o for o in op_list(module.regions[0].block) if type(o) is ComputationOp]


def entry_computation(module: Operation) -> ComputationOp:
    comps = computations(module)
    for c in comps:
        if c.is_entry is not None:
            return c
    return comps[-1]


def get_dialect() -> Dialect:
    """`HLO`, the xDSL dialect (built on first use: it lists every op class)."""
    with _BUILD_LOCK:
        if not _DIALECT:
            _DIALECT.append(
                Dialect(
                    "hlo",
                    [ComputationOp, ReturnOp, *OP_CLASSES.values()],
                    [ShapeType, *ATTR_CLASSES.values()],
                )
            )
    return _DIALECT[0]


def hlo_context() -> Context:
    """An xDSL context with the builtin dialect loaded and `hlo` registered, loaded when a
    parser first meets one of its ops or types: the dialect lists every op class, which
    building would cost a pass pipeline's process ~70 ms for classes its module never
    uses (the passes themselves never ask the context)."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.register_dialect("hlo", get_dialect)
    return ctx


_new = object.__new__


def string_attr(text: str) -> StringAttr:
    """A `StringAttr` built without the dataclass machinery (same object state)."""
    a = _new(StringAttr)
    set_field(a, "data", text)
    return a


_NO_NESTED_REFS = ArrayAttr(())


def symbol_ref(name: str) -> SymbolRefAttr:
    """`SymbolRefAttr(name)` built without its generic parameter handling and verifiers
    (same object state; the nested-reference list, always empty, is shared)."""
    a = _new(SymbolRefAttr)
    set_field(a, "root_reference", string_attr(name))
    set_field(a, "nested_references", _NO_NESTED_REFS)
    return a


def data_attr(cls: type[Data[Any]], value: Any) -> Data[Any]:
    """`cls.new(value)` for the `hlo` Data attributes (whose verify() is a no-op)."""
    a = _new(cls)
    set_field(a, "data", value)
    return a


def _has_defaults(cls: type[IRDLOperation]) -> bool:
    op_def = cls.get_irdl_definition()
    return any(
        getattr(d, "default_value", None) is not None
        for d in (*op_def.properties.values(), *op_def.attributes.values())
    )


_UNIT_ATTR = UnitAttr()
_NO_RESULTS: SSAValues[OpResult] = SSAValues()  # immutable, so every op may share it
assert not _has_defaults(ReturnOp) and not _has_defaults(ComputationOp)


def _fill(
    op: Operation,
    vals: Sequence[SSAValue],
    results: SSAValues[Any],
    properties: dict[str, Attribute],
) -> None:
    """Set exactly the fields `Operation.__init__` sets: operands (`vals`, kept) and their
    uses, results, properties, attributes, location, successors, regions (none).

    An instruction's operands may be a plain tuple, not xDSL's `SSAValues` (a tuple
    subclass): built and unpacked several times faster (a subclass takes the generic
    iterator path). xDSL's code only iterates, indexes or compares `_operands`, except the
    generic verifier, which reads `.types` through the operand accessor: an instruction's
    (`args`) gives `op.operands`, which makes them `Operands` on its first read."""
    op._operands = vals  # pyright: ignore[reportAttributeAccessIssue]  # (may be a tuple)
    if vals:
        uses = []
        for i, v in enumerate(vals):
            # `Use(op, i, None, first)` without the call of its dataclass `__init__` (a
            # Python frame per operand: ~5% of a parse): the same four stores, in its order.
            u = _new(Use)
            u._operation = op
            u._index = i
            u._prev_use = None
            first = v.first_use
            u._next_use = first
            if first is not None:
                first._prev_use = u
            v.first_use = u
            uses.append(u)
        op._operand_uses = tuple(uses)
    else:
        op._operand_uses = ()
    op.results = results
    op.properties = properties
    op.attributes = {}
    op.location = UNKNOWN_LOC
    op._successors = ()
    op._successor_uses = ()
    op.regions = ()


def new_result(result_type: Attribute, op: Operation) -> OpResult[Any]:
    """`OpResult(result_type, op, 0)` without the call of its dataclass `__init__` (the
    same three stores, in its order; its other fields are class defaults)."""
    r = _new(OpResult)
    r._type = result_type
    r.op = op
    r.index = 0
    return r


def retype_result(op: Operation, result_type: Attribute) -> None:
    """Give `op`'s one result another type in place, its uses kept: xDSL has no public
    setter (`Rewriter.replace_value_with_new_type` makes a new value and moves every use,
    which layout assignment would pay once per relaid-out instruction)."""
    (r,) = op.results
    r._type = result_type  # pyright: ignore[reportPrivateUsage]


def new_return_op(root: SSAValue) -> ReturnOp:
    """`ReturnOp(root)`, built the fast way (see `new_hlo_op`)."""
    op = _new(ReturnOp)
    _fill(op, SSAValues((root,)), SSAValues(), {})
    return op


def new_block() -> Block:
    """`Block()` (no arguments, no ops), built without its generic argument handling
    (same object state)."""
    b = _new(Block)
    b._args = ()
    b._first_op = None
    b._last_op = None
    return b


def new_computation_op(name: str, block: Block, entry: bool = False) -> ComputationOp:
    """`ComputationOp(name, block, entry)`, built the fast way (see `new_hlo_op`);
    `block` is a fresh one (as `Region(block)` checks: in no region)."""
    op = _new(ComputationOp)
    props: dict[str, Attribute] = {"sym_name": string_attr(name)}
    if entry:
        props["is_entry"] = _UNIT_ATTR
    _fill(op, SSAValues(), SSAValues(), props)
    if block.parent is not None:
        raise ValueError("Can't add to a region a block already attached to a region.")
    region = _new(Region)  # `Region(block)`, then `op.add_region(region)`
    region._first_block = block
    region._last_block = block
    block.parent = region
    op.regions = (region,)
    region.parent = op
    return op


def new_hlo_op(
    cls: type[HloOp],
    operands: Sequence[SSAValue],
    result_type: ShapeType,
    properties: dict[str, Attribute],
) -> HloOp:
    """`cls.create(operands=..., result_types=[result_type], properties=properties)`.

    Skips the generic argument handling of `Operation.__init__`; `properties` is taken
    over (not copied).
    """
    op = _new(cls)
    _fill(op, tuple(operands), _NO_RESULTS, properties)  # (the results are set just below)
    op.results = Results((new_result(result_type, op),))
    return op


# Attribute kinds whose values are safe to share between ops through an intern table:
# hashable, and equal only when they print the same (floats are not: 0.0 == -0.0).
_INTERNABLE_KINDS = frozenset(ATTR_KINDS) - {"float", "literal", "constant"} | {"comp"}


def create_op(
    opcode: str,
    operands: Sequence[SSAValue],
    shape: Shape,
    name: str,
    attrs: dict[str, Any] | None = None,
    intern: dict[tuple[str, Any], Attribute] | None = None,
    result_type: ShapeType | None = None,
) -> HloOp:
    """Build an instruction op without running verifiers (the importer's fast path).

    With `intern`, attribute objects of equal values (per kind) are shared through that
    table: attributes are immutable, so ops may share them. `result_type`, when given, is
    `shape_type(shape)` (callers that cache it spare the hashing of the shape).
    """
    cls = OP_CLASSES[opcode]
    name_attr = _new(StringAttr)  # (`string_attr(name)`, inline: once per instruction)
    set_field(name_attr, "data", name)
    props: dict[str, Attribute] = {"name": name_attr}
    if attrs:
        specs = cls.ATTR_SPECS
        if intern is None:
            for k, v in attrs.items():
                props[k] = value_to_attr(specs[k].kind, v)
        else:
            for k, v in attrs.items():
                kind = specs[k].kind
                if kind in _INTERNABLE_KINDS:
                    key = (kind, v)
                elif kind == "constant":  # one attribute per value object (`constant_value`)
                    key = (kind, id(v))  # (v stays alive: the attribute in the table holds it)
                else:
                    props[k] = value_to_attr(kind, v)
                    continue
                try:
                    a = intern.get(key)
                except TypeError:  # an unhashable value
                    a = value_to_attr(kind, v)
                else:
                    if a is None:
                        a = intern[key] = value_to_attr(kind, v)
                props[k] = a
    # `new_hlo_op(cls, operands, result_type, props)` inline: one call fewer per instruction
    op = _new(cls)
    res = _new(OpResult)  # (`new_result`, inline: once per instruction)
    res._type = result_type or shape_type(shape)
    res.op = op
    res.index = 0
    results = Results((res,))
    _fill(op, tuple(operands), results, props)
    return op


for _opcode in _PREBUILT:
    OP_CLASSES[_opcode]  # noqa: B018 (builds the class)

_DIALECT: list[Dialect] = []


def __getattr__(name: str) -> Any:
    if name == "HLO":  # (see `get_dialect`)
        return get_dialect()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "HLO",  # noqa: F822  # pyright: ignore[reportUnsupportedDunderAll]  (module __getattr__)
    "ATTR_CLASSES",
    "Collective",
    "ComputationOp",
    "Elementwise",
    "HasSideEffect",
    "HloAttr",
    "HloOp",
    "NoTerminator",
    "OP_CLASSES",
    "RandomNumber",
    "ReturnOp",
    "ShapeOnly",
    "ShapeType",
    "Transcendental",
    "computations",
    "create_op",
    "on_op_class",
    "entry_computation",
    "shape_type",
]
