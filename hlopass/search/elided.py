"""Constants a module's text left out (`constant({...})`, XLA's default print of a large
constant), filled with random values so that the search can still check its plans.

A plan only moves such a constant around (no pass of a search reads its values: constant
folding of an elided constant is refused), so a plan that keeps the module's outputs for
random constants keeps them for the real ones as well as for any other inputs; the values
are drawn from `seed`, small integers for integer types (a constant of indices stays near
the range an index takes) and uniform in [-1, 1) for floats. `reelide` puts `{...}` back
in a plan's text, so what the search writes is the module as given.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from hlopass.errors import HloError

_CONSTANT = re.compile(
    r"^(?P<head>\s*(?:ROOT )?%(?P<name>[^\s=]+) = (?P<type>[a-z0-9]+)\[(?P<dims>[0-9,]*)\]"
    r"(?:\{[0-9,]*\})? constant\()\{\.\.\.\}\)",
    re.M,
)


def _nested(values: list[str], dims: list[int]) -> str:
    """`values` (row-major) as a literal of `dims`: braces per dimension."""
    if not dims:
        return values[0]
    if len(dims) == 1:
        return "{ " + ", ".join(values) + " }"
    step = len(values) // dims[0] if dims[0] else 0
    rows = [_nested(values[i * step : (i + 1) * step], dims[1:]) for i in range(dims[0])]
    return "{ " + ", ".join(rows) + " }"


def _values(element_type: str, count: int, rng: np.random.Generator) -> list[str]:
    if element_type == "pred":
        return ["true" if v else "false" for v in rng.integers(0, 2, count)]
    if element_type[0] in "su":
        return [str(v) for v in rng.integers(0, 16, count)]
    if element_type[0] in "fb":
        return [f"{v:.4f}" for v in rng.uniform(-1.0, 1.0, count)]
    raise HloError(f"error: cannot fill an elided constant of type {element_type}")


def fill_elided(module: Any, seed: int = 0) -> tuple[Any, list[str]]:
    """A copy of `module` whose elided array constants hold random values, and their names
    (`module` itself and [] when it elides none)."""
    import hlopass
    from hlopass.interpreter import elided_constant

    if elided_constant(module) is None:
        return module, []
    rng = np.random.default_rng(seed)
    names: list[str] = []

    def fill(m: re.Match[str]) -> str:
        dims = [int(d) for d in m["dims"].split(",") if d]
        names.append(m["name"])
        values = _values(m["type"], int(np.prod(dims, dtype=np.int64)), rng)
        return f"{m['head']}{_nested(values, dims)})"

    text = _CONSTANT.sub(fill, hlopass.print_hlo(module))
    filled = hlopass.parse_hlo(text)
    if elided_constant(filled) is not None:  # a tuple constant, or a form not matched
        raise HloError("error: an elided constant of the module cannot be filled")
    return filled, names


def reelide(text: str, names: list[str]) -> str:
    """`text` with the constants `names` printed `{...}` again (their filled values gone)."""
    for name in names:
        pattern = re.compile(
            rf"^(\s*(?:ROOT )?%{re.escape(name)} = \S+ constant\().*?(\)(?:, |$))", re.M
        )
        text = pattern.sub(r"\1{...}\2", text, count=1)
    return text
