"""hlopass: parse, transform and re-emit XLA HLO with xDSL.

>>> import hlopass
>>> m = hlopass.parse_hlo(open("model.hlo").read())
>>> text = hlopass.print_hlo(m)
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if sys.version_info < (3, 11, 5):  # pragma: no cover (the package needs 3.11.5 to install)
    # The lexer and parser rely on possessive quantifiers, which CPython fixed in 3.11.5
    # (gh-106052, gh-100061). Seen on Debian 12's Python 3.11.2: a group under `?+` loses
    # its capture, and operand lists read as empty. Refuse rather than mis-parse.
    raise ImportError(
        f"hlopass needs Python 3.11.5 or newer (this is {sys.version.split()[0]}): earlier "
        "3.11 releases mis-match the possessive regular expressions its parser uses"
    )

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
    from hlopass.checking.equivalence import check_equivalent
    from hlopass.execution.inputs import random_inputs
    from hlopass.interpreter import evaluate
    from hlopass.pipeline import run_pass, run_pipeline
    from hlopass.plugins import load_pass_plugin, register_pass
    from hlopass.text.exporter import print_hlo
    from hlopass.text.importer import parse_hlo

__all__ = [
    "HloError",
    "HloInputError",
    "HloParseError",
    "HloResourceError",
    "HloShapeError",
    "HloVerifyError",
    "UnsupportedOpError",
    "check_equivalent",
    "evaluate",
    "load_pass_plugin",
    "parse_hlo",
    "print_hlo",
    "random_inputs",
    "register_pass",
    "run_pass",
    "run_pipeline",
]

_LAZY = {
    "parse_hlo": "hlopass.text.importer",
    "print_hlo": "hlopass.text.exporter",
    "evaluate": "hlopass.interpreter",
    "random_inputs": "hlopass.execution.inputs",
    "check_equivalent": "hlopass.checking.equivalence",
    "run_pass": "hlopass.pipeline",
    "run_pipeline": "hlopass.pipeline",
    "register_pass": "hlopass.plugins",
    "load_pass_plugin": "hlopass.plugins",
}


# sub-modules reachable as attributes of the package (`hlopass.cost`, `hlopass.jax`, ...)
_SUBMODULES = {
    "cost": "hlopass.cost",
    "inputs": "hlopass.execution.inputs",
    "equivalence": "hlopass.checking.equivalence",
    "pipeline": "hlopass.pipeline",
    "plugins": "hlopass.plugins",
    "rewriting": "hlopass.rewriting",
    "jax": "hlopass.execution.jax",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None and name in _SUBMODULES:
        import importlib

        return importlib.import_module(_SUBMODULES[name])
    if module is None:
        raise AttributeError(f"module 'hlopass' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
