"""`xdsl-opt` plug-in: the `hlo` dialect and hlopass's passes (entry point `xdsl.universe`).

xDSL ships its own `dce` and `cse`, and `xdsl-opt` refuses duplicate pass names, so our
passes appear there with an `hlo-` prefix: `xdsl-opt -p hlo-algsimp,hlo-dce f.mlir`.
`xdsl-opt -p dce` is xDSL's own DCE, which works on `hlo` IR through the ops' traits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe

PREFIX = "hlo-"


def _get_dialect() -> Dialect:
    from hlopass.dialects.hlo import HLO

    return HLO


def _prefixed(name: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        from hlopass.pipeline import pass_class

        base = pass_class(name)
        cls = type(base.__name__, (base,), {"name": PREFIX + name, "__doc__": base.__doc__,
                                            "__module__": base.__module__})  # fmt: skip
        return dataclasses.dataclass(frozen=True)(cls)

    return load


def _all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    from hlopass.pipeline import PASSES

    return {PREFIX + name: _prefixed(name) for name in PASSES}


HLOPASS_UNIVERSE = Universe(all_dialects={"hlo": _get_dialect}, all_passes=_all_passes())
