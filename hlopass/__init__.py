"""hlopass: parse, transform and re-emit XLA HLO with xDSL.

>>> import hlopass
>>> m = hlopass.parse_hlo(open("model.hlo").read())
>>> text = hlopass.print_hlo(m)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hlopass.errors import (
    HloError,
    HloInputError,
    HloParseError,
    HloResourceError,
    HloShapeError,
    HloVerifyError,
    UnsupportedOpError,
)

if TYPE_CHECKING:
    from hlopass.exporter import print_hlo
    from hlopass.importer import parse_hlo
    from hlopass.interpreter import evaluate

__all__ = [
    "HloError",
    "HloInputError",
    "HloParseError",
    "HloResourceError",
    "HloShapeError",
    "HloVerifyError",
    "UnsupportedOpError",
    "evaluate",
    "parse_hlo",
    "print_hlo",
]

_LAZY = {
    "parse_hlo": "hlopass.importer",
    "print_hlo": "hlopass.exporter",
    "evaluate": "hlopass.interpreter",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hlopass' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
