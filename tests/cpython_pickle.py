"""CPython's pickles on any interpreter: a ZoneInfo pickled the way the C zoneinfo pickles it.

CPython's ``zoneinfo`` is the C module: ``ZoneInfo("Europe/Vienna")`` pickles
as ``getattr(ZoneInfo, "_unpickle")("Europe/Vienna", 1)``, the cache flag the
int 1 (BININT1).  That is the form the codec (as the reference) decodes to
``{"@tz": {"zoneinfo": key}}``, and what that marker encodes back to.  PyPy's
``zoneinfo`` is the pure-Python module, whose flag is the bool True
(NEWTRUE): another pickle, which the codec keeps in the generic form.

``Pickler`` is the running interpreter's pickler with one change: a
ZoneInfo's flag is written as ``zoneinfo_flag(flag)`` -- ``int`` (the
default) gives the C form on CPython and on PyPy alike, ``bool`` the
pure-Python one.  With the interpreter's own choice (``int`` on CPython,
``bool`` on PyPy) the bytes are exactly those of its plain pickler.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import zoneinfo
from typing import Any, Callable

C_FLAG, PURE_PYTHON_FLAG = int, bool


def _zoneinfo_reducer(zoneinfo_flag: Callable[[Any], Any]) -> Callable[[zoneinfo.ZoneInfo], tuple]:
    def reduce(zone: zoneinfo.ZoneInfo) -> tuple:
        unpickle, (key, flag) = zone.__reduce__()  # (ZoneInfo._unpickle, (key, 1 or True))
        return unpickle, (key, zoneinfo_flag(flag))

    return reduce


class Pickler(pickle.Pickler):
    """``persistent_id`` is given to the constructor: Python 3.13 makes it read-only on instances."""

    def __init__(self, file: Any, protocol: int, *, zoneinfo_flag: Callable[[Any], Any] = C_FLAG,
                 persistent_id: Callable[[Any], Any] = lambda obj: None, **kw: Any):
        super().__init__(file, protocol, **kw)
        self.dispatch_table = copyreg.dispatch_table.copy()
        self.dispatch_table[zoneinfo.ZoneInfo] = _zoneinfo_reducer(zoneinfo_flag)
        self._persistent_id = persistent_id

    def persistent_id(self, obj: Any) -> Any:
        return self._persistent_id(obj)


def dumps(obj: Any, protocol: int = 3, *, zoneinfo_flag: Callable[[Any], Any] = C_FLAG) -> bytes:
    f = io.BytesIO()
    Pickler(f, protocol, zoneinfo_flag=zoneinfo_flag).dump(obj)
    return f.getvalue()
