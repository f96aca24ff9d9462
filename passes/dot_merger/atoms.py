"""Following a dot's shared operand back to its source through transposes and reshapes,
as XLA's DotMerger does with its ShapeTracker: both ends are described by *atoms*,
factors of the dimensions that the chain only moves and regroups. Each dimension of the
operand and of the source is a run of atoms (major to minor); the chain is followed while
every source dimension's atoms come from operand dimensions of one category."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp


def _dims(value: SSAValue) -> tuple[int, ...]:
    return value.type.data.dims  # type: ignore[attr-defined]


@dataclass
class Atoms:
    """The shared operand S of one dot and the value `source` it was followed back to."""

    source: SSAValue
    sizes: list[int]
    """Per atom, its size."""
    owner: list[int]
    """Per atom, the dimension of S it is part of."""
    of_operand: list[list[int]]
    """Per dimension of S, its atoms (none for a size-1 dimension)."""
    of_source: list[list[int]]
    """Per dimension of `source`, its atoms."""

    def copy(self) -> Atoms:
        """A copy whose lists may change (the source value is shared, not copied)."""
        return Atoms(self.source, list(self.sizes), list(self.owner),
                     [list(x) for x in self.of_operand], [list(x) for x in self.of_source])  # fmt: skip

    def split(self, atom: int, major: int) -> int:
        """Split `atom` into a major part of size `major` (keeping its id) and a new minor
        atom (returned), in both dimension lists."""
        minor = len(self.sizes)
        self.sizes.append(self.sizes[atom] // major)
        self.owner.append(self.owner[atom])
        self.sizes[atom] = major
        for lists in (self.of_operand, self.of_source):
            for atoms in lists:
                if atom in atoms:
                    k = atoms.index(atom)
                    atoms.insert(k + 1, minor)
        return minor


def _through_reshape(a: Atoms, reshape: HloOp) -> Atoms | None:
    """`a` with its source moved from `reshape` to the reshape's operand, or None where a
    dimension boundary of the operand falls inside an atom that does not divide there."""
    a = a.copy()
    seq = [x for atoms in a.of_source for x in atoms]
    out: list[list[int]] = []
    k = 0
    for n in _dims(reshape.operands[0]):
        dim: list[int] = []
        p = 1
        while p < n:
            if k >= len(seq):
                return None
            x = seq[k]
            if p * a.sizes[x] > n:
                f = n // p
                if n % p or a.sizes[x] % f:
                    return None
                seq.insert(k + 1, a.split(x, f))
            dim.append(x)
            p *= a.sizes[x]
            k += 1
        if p != n:
            return None
        out.append(dim)
    a.of_source = out
    return a


def _uniform(a: Atoms, category: list[str]) -> bool:
    """Each source dimension's atoms come from operand dims of one category."""
    return all(len({category[a.owner[x]] for x in atoms}) <= 1 for atoms in a.of_source)


def operand_categories(dot: HloOp, side: int) -> list[str]:
    """B, C or N per dimension of the dot's operand `side`."""
    key = "lhs" if side == 0 else "rhs"
    batch = dot.attr(f"{key}_batch_dims") or ()
    contracting = dot.attr(f"{key}_contracting_dims") or ()
    rank = len(_dims(dot.operands[side]))
    return ["B" if i in batch else "C" if i in contracting else "N" for i in range(rank)]


def trace_atoms(dot: HloOp, side: int) -> Atoms:
    """The dot's operand `side` followed back through transposes and reshapes while no
    source dimension mixes categories (XLA's GetOperandSourceWithCategories)."""
    value = dot.operands[side]
    dims = _dims(value)
    sizes = [n for n in dims if n != 1]
    owner = [d for d, n in enumerate(dims) if n != 1]
    per_dim: list[list[int]] = []
    for n in dims:
        per_dim.append([] if n == 1 else [sum(len(x) for x in per_dim)])
    a = Atoms(value, sizes, owner, per_dim, [list(x) for x in per_dim])
    category = operand_categories(dot, side)
    while isinstance(op := a.source.owner, HloOp) and op.opcode in ("transpose", "reshape"):
        if op.opcode == "transpose":
            perm = op.attr("dimensions")
            moved = a.copy()
            moved.of_source = [[] for _ in perm]
            for i, p in enumerate(perm):
                moved.of_source[p] = a.of_source[i]
        else:
            moved = _through_reshape(a, op)
            if moved is None:
                break
        if not _uniform(moved, category):
            break  # (moving further would mix categories)
        moved.source = op.operands[0]
        a = moved
    return a


def source_categories(a: Atoms, category: list[str]) -> list[str]:
    """The category of each non-size-1 dimension of the source."""
    return [category[a.owner[atoms[0]]] for atoms in a.of_source if atoms]
