"""Passes from outside hlopass: `register_pass`, plug-in files and modules, entry points.

A pass written anywhere becomes usable everywhere hlopass runs passes (`hlopass-opt -p`,
`fixpoint{passes=...}`, `--list-passes`, `--trace-rewrites`, `--verify-each`,
`hlopass.run_pass`) in one of four ways:

- `hlopass.register_pass(MyPass)` (or `@register_pass` on the class) in code that runs first;
- `hlopass-opt --load-pass-plugin my_pass.py` (a file) or `--load-pass-plugin pkg.module`:
  the file or module is imported; the passes it registers count, and if it registers none,
  every pass class it defines (a `ModulePass` subclass with a `name`) is registered;
- an installed package that declares the entry-point group `hlopass.passes`
  (`my-pass = "my_pkg.passes:MyPass"` under `[project.entry-points."hlopass.passes"]`),
  found the first time a pass name is looked up;
- a package that registers passes with `xdsl-opt` (entry point `xdsl.universe`): its passes
  are found by name when hlopass has none of that name.

A pass may be an `HloModulePass` (its `run` returns whether it changed the module) or any
xDSL `ModulePass`, whose `apply` says nothing about change: hlopass then compares the
module's text before and after to keep XLA's `run -> changed` contract.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from hlopass.driver.crash import crash_site, describe, format_traceback, traceback_wanted

if TYPE_CHECKING:  # (imported where used: hlopass.rewriting imports the pass machinery)
    from hlopass.rewriting import HloModulePass
from hlopass.errors import HloError

ENTRY_POINT_GROUP = "hlopass.passes"


class PluginError(HloError):
    """A plug-in that cannot be loaded, or a pass that cannot be registered."""


P = TypeVar("P", bound=type[ModulePass])


def register_pass(
    cls: type[ModulePass] | None = None, *, name: str | None = None, replace: bool = False
) -> Any:
    """Make the pass class `cls` known by `name` (default: `cls.name`).

    Usable as a call (`register_pass(MyPass)`) or a decorator (`@register_pass`,
    `@register_pass(name="my-pass")`). Registering a second pass under a taken name is an
    error unless `replace=True`. Returns the class, so the decorator leaves it unchanged.
    """

    def register(c: P) -> P:
        _register(c, name, replace, origin=c.__module__)
        return c

    return register if cls is None else register(cls)


def _register(cls: type, name: str | None, replace: bool, origin: str) -> str:
    from hlopass.driver.registry import PASSES

    if not (isinstance(cls, type) and issubclass(cls, ModulePass)):
        raise PluginError(f"{origin}: error: {cls!r} is not an xDSL ModulePass class")
    name = name or getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise PluginError(f"{origin}: error: pass class {cls.__name__} has no `name`")
    known = PASSES.get(name)
    if known is not None and not replace and _loaded(known) is not cls:
        raise PluginError(
            f"{origin}: error: a pass named '{name}' is already registered "
            "(pass replace=True to override it)"
        )
    PASSES[name] = _constant_loader(as_hlo_pass(cls))
    _REGISTERED_BY[origin] = _REGISTERED_BY.get(origin, 0) + 1
    return name


_REGISTERED_BY: dict[str, int] = {}
"""Passes registered so far, per module that defined them (to spot plug-ins that register none)."""


def _constant_loader(cls: type) -> Callable[[], type]:
    def load() -> type:
        return cls

    load.__name__ = f"load_{cls.__name__}"
    load.pass_class = cls  # type: ignore[attr-defined]
    return load


def _loaded(loader: Callable[[], type]) -> type | None:
    cls = getattr(loader, "pass_class", None)
    return cls if cls is not None else None


# --- plain xDSL passes keep XLA's `run -> changed` contract ----------------------------------


def as_hlo_pass(cls: type[ModulePass]) -> type[HloModulePass]:
    """`cls` itself for an `HloModulePass`; else a subclass whose `run` reports change."""
    from hlopass.rewriting import HloModulePass

    if issubclass(cls, HloModulePass):
        return cls
    wrapped = _XDSL_WRAPPERS.get(cls)
    if wrapped is None:
        body = {"__doc__": cls.__doc__, "__module__": cls.__module__, "run": _run_by_text,
                "xdsl_class": cls}  # fmt: skip
        # Plain types to pyright: statically `cls` may be ModulePass itself, which cannot
        # precede its own subclass HloModulePass; at run time it is a strict subclass.
        bases = cast("tuple[type, ...]", (cls, HloModulePass))
        cls_type = type(cls.__name__, bases, body)
        wrapped = cast("type[HloModulePass]", dataclass(frozen=True)(cls_type))
        _XDSL_WRAPPERS[cls] = wrapped
    return wrapped


_XDSL_WRAPPERS: dict[type, type[HloModulePass]] = {}


def _run_by_text(self: Any, ctx: Context, module: ModuleOp, trace: Any = None) -> bool:
    from hlopass.text.exporter import print_hlo

    before = print_hlo(module)
    self.xdsl_class.apply(self, ctx, module)  # the wrapped pass's own apply, not ours
    return print_hlo(module) != before


# --- plug-in files and modules --------------------------------------------------------------


def load_pass_plugin(spec: str) -> list[str]:
    """Import a plug-in (a `.py` file or a module name); the names of the passes it added."""
    from hlopass.driver.registry import PASSES

    before = set(PASSES)
    module = _import_plugin(spec)
    if not _REGISTERED_BY.get(module.__name__):
        for cls in _pass_classes(module):
            _register(cls, None, False, origin=spec)
    added = sorted(set(PASSES) - before)
    if not added and not _REGISTERED_BY.get(module.__name__):
        raise PluginError(f"{spec}: error: the plug-in defines and registers no pass")
    return added


def _pass_classes(module: ModuleType) -> list[type]:
    out = []
    for _, obj in inspect.getmembers(module, inspect.isclass):
        if (
            obj.__module__ == module.__name__
            and issubclass(obj, ModulePass)
            and isinstance(getattr(obj, "name", None), str)
            and not inspect.isabstract(obj)
        ):
            out.append(obj)
    return out


def _import_plugin(spec: str) -> ModuleType:
    is_file = spec.endswith(".py") or os.sep in spec or os.path.exists(spec)
    try:
        if not is_file:
            return importlib.import_module(spec)
        if not os.path.isfile(spec):
            raise PluginError(f"{spec}: error: no such pass plug-in file")
        name = "hlopass_plugin_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(spec))
        if name in sys.modules:
            return sys.modules[name]
        mod_spec = importlib.util.spec_from_file_location(name, spec)
        assert mod_spec is not None and mod_spec.loader is not None
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        try:
            mod_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    except HloError:
        raise
    except SyntaxError as e:
        raise PluginError(f"{e.filename or spec}:{e.lineno}:{e.offset}: error: {e.msg}") from None
    except ModuleNotFoundError as e:
        raise PluginError(f"{spec}: error: cannot load pass plug-in: {e}") from None
    except Exception as e:
        where = _innermost_frame(e, spec)
        _traceback_if_wanted(e)
        raise PluginError(f"{where}: error: plug-in failed to load: {describe(e)}") from None


def _innermost_frame(e: BaseException, spec: str) -> str:
    """`file:line` of the plug-in's own innermost frame (`spec` when there is none)."""
    tb = e.__traceback__
    where = spec
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(os.path.basename(spec)):
            where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def _traceback_if_wanted(e: BaseException) -> None:
    if traceback_wanted():
        sys.stderr.write(format_traceback(e))


# --- discovery by name: entry points and other packages' xdsl.universe -----------------------

_DISCOVERED = False


def discover() -> None:
    """Register the passes installed packages declare under `hlopass.passes` (once)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    from importlib.metadata import entry_points

    from hlopass.driver.registry import PASSES

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in PASSES:
            continue  # an explicit registration wins
        PASSES[ep.name] = _entry_point_loader(ep)


def _entry_point_loader(ep: Any) -> Callable[[], type]:
    def load() -> type:
        try:
            cls = ep.load()
        except Exception as e:
            _traceback_if_wanted(e)
            raise PluginError(
                f"{ep.value}: error: cannot load pass '{ep.name}' (entry point "
                f"{ENTRY_POINT_GROUP}): {describe(e)}{_at(e, ep.module)}"
            ) from None
        return as_hlo_pass(cls)

    load.__name__ = f"load_{ep.name}"
    return load


def _at(e: BaseException, module: str) -> str:
    """` (at file:line in function)`: where in the entry point's package loading failed."""
    top = importlib.util.find_spec(module.split(".")[0]) if module else None
    roots = tuple(d + os.sep for d in (top.submodule_search_locations or ())) if top else ()
    site = crash_site(e, roots)
    return f" (at {site})" if site else ""


def xdsl_universe_pass(name: str) -> Callable[[], type] | None:
    """A loader for pass `name` from another package's `xdsl.universe`, if one has it."""
    try:
        from xdsl.universe import Universe
    except ImportError:  # pragma: no cover - an xDSL without universes
        return None
    for ep_universe in _other_universes(Universe):
        loader = ep_universe.all_passes.get(name)
        if loader is not None:
            return lambda: as_hlo_pass(loader())
    return None


def _other_universes(universe_cls: Any) -> list[Any]:
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group="xdsl.universe"):
        if ep.value.startswith("hlopass."):
            continue  # our own passes are in PASSES already
        try:
            u = ep.load()
        except Exception:
            continue  # a broken third-party universe must not break hlopass
        if isinstance(u, universe_cls):
            found.append(u)
    return found
