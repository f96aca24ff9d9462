"""Dynamic dimension sizes: an array keeps its bounded (static) shape and data, and the
sizes its dynamic dimensions have at run time are noted beside it.

`set-dimension-size` and the `SliceToDynamic` custom-call note sizes on their result;
`get-dimension-size` and `PadToStatic` read them (the static size where none is noted).
An instruction that builds a new array from a dynamic one does not carry the sizes along:
the interpreter computes on the whole bounded array, whose padding XLA leaves undefined.
"""

from __future__ import annotations

import weakref

import numpy as np

from hlopass.interpreter.core import dtype_of, handler

_SIZES: dict[int, tuple[int, ...]] = {}


def note_sizes(x: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """`x` with its run-time sizes noted (forgotten when `x` is freed)."""
    if sizes != x.shape:
        key = id(x)
        _SIZES[key] = sizes
        weakref.finalize(x, _SIZES.pop, key, None)
    return x


def sizes_of(x: np.ndarray) -> tuple[int, ...]:
    return _SIZES.get(id(x), x.shape)


@handler("set-dimension-size")
def _set_dimension_size(interp, op, args):
    x, size = args
    (d,) = op.attr("dimensions")
    sizes = list(sizes_of(x))
    sizes[d] = int(size)
    return note_sizes(x.copy(), tuple(sizes))


@handler("get-dimension-size")
def _get_dimension_size(interp, op, args):
    (x,) = args
    return np.array(sizes_of(x)[op.attr("dimensions")[0]], dtype=dtype_of(op.shape))


def slice_to_dynamic(x: np.ndarray, sizes: list[np.ndarray]) -> np.ndarray:
    """custom-call SliceToDynamic(x, size_0, ...): x, its dimensions' run-time sizes given."""
    return note_sizes(x.copy(), tuple(int(s) for s in sizes))


def pad_to_static(x: np.ndarray) -> tuple[np.ndarray, ...]:
    """custom-call PadToStatic(x): (x as a static array, the run-time size of each dim)."""
    return (x.copy(), *(np.array(s, np.int32) for s in sizes_of(x)))
