"""`xdsl-opt` plug-in: the `hlo` dialect and hlopass's passes (entry point `xdsl.universe`).

Every pass is registered under an `hlo-` prefixed alias (`hlo-algsimp`, `hlo-dce`, ...),
and also under its own name wherever xDSL has no pass of that name: `xdsl-opt -p
algsimp,hlo-dce f.mlir`. xDSL ships its own `dce` and `cse` (and `xdsl-opt` refuses
duplicate pass names), so ours are `hlo-dce` and `hlo-cse` there; `xdsl-opt -p dce` is
xDSL's own DCE, which works on `hlo` IR through the ops' traits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe

PREFIX = "hlo-"


def _get_dialect() -> Dialect:
    import hlopass.text.parse_values  # noqa: F401  (installs the dialect's reader of HLO attribute text)
    from hlopass.dialects.hlo import HLO

    return HLO


@cache
def _renamed(name: str, new_name: str) -> type[ModulePass]:
    """Our pass `name` as a class whose `name` is `new_name` (xDSL matches specs by it)."""
    from hlopass.pipeline import pass_class

    base = pass_class(name)
    if new_name == base.name:
        return base
    cls = type(base.__name__, (base,), {"name": new_name, "__doc__": base.__doc__,
                                        "__module__": base.__module__})  # fmt: skip
    return dataclasses.dataclass(frozen=True)(cls)


def _loader(name: str, new_name: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        return _renamed(name, new_name)

    load.__name__ = f"load_{new_name.replace('-', '_')}"
    return load


def _xdsl_pass_names() -> set[str]:
    try:
        from xdsl.transforms import get_all_passes
    except ImportError:  # pragma: no cover - an xDSL without the registry
        return {"dce", "cse"}
    return set(get_all_passes())


def _all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    from hlopass.pipeline import PASSES

    taken = _xdsl_pass_names()
    out: dict[str, Callable[[], type[ModulePass]]] = {}
    for name in PASSES:
        out[PREFIX + name] = _loader(name, PREFIX + name)
        if name not in taken:
            out[name] = _loader(name, name)
    return dict(sorted(out.items()))


HLOPASS_UNIVERSE = Universe(all_dialects={"hlo": _get_dialect}, all_passes=_all_passes())
