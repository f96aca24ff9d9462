"""What a kernel is, up to which instructions it holds: its structural signature.

LLMs repeat one layer 32 times (Mixtral: x 8 experts), so most kernels priced while fusing
are copies of a kernel priced in an earlier layer. `kernel_signature` names a kernel by
everything a price of it reads (each member's opcode, shape and attributes, its operands as
positions within the kernel or among its inputs, each input's opcode and shape, which
members are outputs), never by identity; two kernels with the same signature get the same
analysis, relabelled onto their own instructions (`hlopass.cost.shared_summaries`).
Names, metadata and control predecessors are left out (no price reads them); a called
computation (a reducer) enters by its own signature, not its name. Nothing here may change
while a `Signatures` lives (a fusion pass's planning, a search space's module copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.rewriting import comps_by_name

_LEFT_OUT = frozenset({"name", "metadata", "control-predecessors"})


@dataclass
class Signature:
    """A kernel's signature, interned (`sid`: equal signatures, equal ints), with where
    each of its instructions sits: `local` (member id -> position), `inputs` (in
    first-use order) and `input_index` (input id -> position)."""

    sid: int
    local: dict[int, int]
    inputs: list[Any]
    input_index: dict[int, int]

    def place(self, op: Any) -> int | None:
        """op's position: member i -> i, input j -> -1-j, None if the kernel never sees it."""
        i = self.local.get(id(op))
        if i is not None:
            return i
        j = self.input_index.get(id(op))
        return None if j is None else -1 - j


class Signatures:
    """Signatures of kernels, interned, with each instruction's own part (opcode, shape,
    attributes) made once and each kernel's kept while its `version` holds. Holds the
    instructions it has seen, so their ids are never reused while it lives."""

    def __init__(self) -> None:
        self._own: dict[int, tuple[Any, int, int]] = {}
        self._codes: dict[tuple[Any, ...], int] = {}
        self._ids: dict[tuple[Any, ...], int] = {}
        self._of_kernel: dict[int, tuple[Any, int, Signature]] = {}  # (kernel, version, ...)
        self._comps: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._comp_sid: dict[int, tuple[Any, int]] = {}
        self._pair: dict[tuple[int, int], tuple[Any, Any, int, int, Any]] = {}

    def own(self, op: Any) -> tuple[int, int]:
        """op's own part as a member and as an input (opcode and shape alone), each
        interned to an int: a kernel's key is then ints, hashed without the shapes'
        Python `__hash__` (every new kernel version hashes its key)."""
        hit = self._own.get(id(op))
        if hit is None:
            callees = op.callees()
            skip = _LEFT_OUT.union(s.name for s in op.spec.computations) if callees else _LEFT_OUT
            props = tuple((k, v) for k, v in op.properties.items() if k not in skip)
            if callees:  # by content: each reduce of a layer calls a reducer of its own
                props += (("callees", tuple(self._callee(op, n) for n in callees)),)
            try:
                hash(props)
            except TypeError:  # an unhashable payload (a literal's array): by identity
                props = tuple((k, _hashable(v)) for k, v in props)
            codes = self._codes
            member = codes.setdefault((op.opcode, op.shape, props), len(codes))
            read = codes.setdefault((op.opcode, op.shape), len(codes))
            hit = self._own[id(op)] = (op, member, read)
        return hit[1], hit[2]

    def _callee(self, op: Any, name: str) -> Any:
        """The signature id of the computation `op` calls by `name` (the name if absent)."""
        module = op
        while module is not None and not isinstance(module, ModuleOp):
            module = module.parent_op()
        if module is None:
            return ("name", name)
        comps = self._comps.get(id(module))
        if comps is None:
            comps = self._comps[id(module)] = (module, comps_by_name(module))
        comp = comps[1].get(name)
        if comp is None:
            return ("name", name)
        hit = self._comp_sid.get(id(comp))
        if hit is None:
            sid = self.of(list(comp.instructions), [comp.root]).sid
            hit = self._comp_sid[id(comp)] = (comp, sid)
        return hit[1]

    def of_kernel(self, k: Any) -> Signature:
        """`of(k.members, k.outputs)`, kept per kernel version."""
        hit = self._of_kernel.get(id(k))
        if hit is not None and hit[0] is k and hit[1] == k.version:
            return hit[2]
        sig = self.of(k.members, k.outputs)
        self._of_kernel[id(k)] = (k, k.version, sig)
        return sig

    def of(self, members: Sequence[Any], outputs: Sequence[Any]) -> Signature:
        """The signature of `members` run as one kernel writing `outputs`: its inputs are
        the instructions outside that the members read, in first-use order."""
        local = {id(m): i for i, m in enumerate(members)}
        seen: dict[int, int] = {}
        inputs: list[Any] = []
        items = []
        own, known = self.own, self._own.get  # (the kept parts read inline: most are)
        for m in members:
            refs = []
            for v in m.operands:
                o = v.owner
                i = local.get(id(o))
                if i is None:
                    j = seen.get(id(o))
                    if j is None:
                        j = seen[id(o)] = len(inputs)
                        inputs.append(o)
                    i = -1 - j
                refs.append(i)
            hit = known(id(m))
            items.append((hit[1] if hit is not None else own(m)[0], tuple(refs)))
        outs = tuple(local.get(id(o), -1) for o in outputs)
        # an input is read by its opcode and shape
        ins = tuple(h[2] if (h := known(id(o))) is not None else own(o)[1] for o in inputs)
        key = (tuple(items), ins, outs)
        sid = self._ids.setdefault(key, len(self._ids))
        return Signature(sid, local, inputs, seen)

    def pair(self, producer: Any, consumer: Any) -> tuple[int, int, tuple[Any, ...]]:
        """What a producer fused into a consumer is, up to identity: both signatures and
        where each of the producer's members and inputs sits in the consumer (members:
        the (position, place) of those the consumer sees, found by intersecting id sets;
        inputs: each one's place). Kept per pair of kernel versions: a cost model asks it
        for the IR-size refusal and again for the fused price of the same pair."""
        hit = self._pair.get((id(producer), id(consumer)))
        if (hit is not None and hit[0] is producer and hit[1] is consumer
                and hit[2] == producer.version and hit[3] == consumer.version):  # fmt: skip
            return hit[4]
        p, c = self.of_kernel(producer), self.of_kernel(consumer)
        p_local, c_local, c_index = p.local, c.local, c.input_index
        seen = [(p_local[x], c_local[x]) for x in p_local.keys() & c_local.keys()]
        seen += [(p_local[x], -1 - c_index[x]) for x in p_local.keys() & c_index.keys()]
        seen.sort()
        place = c.place
        key = (p.sid, c.sid, (tuple(seen), tuple(place(o) for o in p.inputs)))
        self._pair[(id(producer), id(consumer))] = (producer, consumer, producer.version,
                                                    consumer.version, key)  # fmt: skip
        return key


def _hashable(v: Any) -> Any:
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return v
