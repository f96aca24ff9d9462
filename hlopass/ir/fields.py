"""Fields and caches on IR objects (attributes, types, shapes): set them with `set_field`,
read them with `getattr(obj, key, None)` or plain attribute access, never through
`obj.__dict__`.

CPython (3.11 and later) keeps an instance's attributes in an inline array until
something asks for its `__dict__`. From then on, every read of any attribute of that object
is a dictionary lookup that the interpreter cannot specialize: about 30 ns instead of
about 5 (`StringAttr.data` of an instruction's name, the printer's cached texts), and
the dictionary costs 80 bytes more per object (a parse builds one attribute per
instruction; fresh memory is page faults). The IR classes are frozen dataclasses, so
`set_field` is `object.__setattr__`, which stores inline. (CPython keeps at most 30
attribute names per class inline: a process that prints many modules in several styles
may pass that for a class whose objects cache a suffix per attribute name, and CPython
then falls back to a dict for the objects that store more; the same values, read slower.)
"""

from __future__ import annotations

set_field = object.__setattr__
