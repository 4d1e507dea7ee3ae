"""Chooses the implementation behind the public API; the only module that knows both twins.

The pure-Python twins (``_decode_py``, ``_encode_py``) are normative; the
Cython twins (``_decode_c``, ``_encode_c``) replace them when they are built.
The choice follows zope's ``PURE_PYTHON`` convention (as ``persistent._compat``):
``ZODB_JSON_CODEC_PURE_PYTHON``, or ``PURE_PYTHON`` when that is unset or
empty, is read once at import:

* unset or empty: the compiled twins if they import, else the pure ones;
* ``"0"``: the compiled twins are required (their ImportError propagates);
* anything else: the pure twins.

PyPy always runs the pure twins.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings
from types import ModuleType
from typing import Tuple

DECODE_FUNCTIONS = (
    "decode_zodb_record",
    "decode_zodb_record_for_pg",
    "decode_zodb_record_for_pg_json",
    "pickle_to_dict",
    "pickle_to_json",
)
ENCODE_FUNCTIONS = ("encode_zodb_record", "dict_to_pickle", "json_to_pickle")

#: Module names of each twin: (decoder, encoder), keyed by IMPLEMENTATION.
TWINS = {
    "python": ("_decode_py", "_encode_py"),
    "cython": ("_decode_c", "_encode_c"),
}

AUTO, COMPILED, PURE = "auto", "compiled", "pure"


def requested_mode() -> str:
    """What the environment asks for: AUTO, COMPILED (required) or PURE.

    The value is compared as text on purpose: ``bool("0")`` is true, a bug
    that once left zope's C code untested for years.
    """
    if sys.implementation.name == "pypy":
        return PURE
    value = os.environ.get("ZODB_JSON_CODEC_PURE_PYTHON", "").strip()
    if not value:
        value = os.environ.get("PURE_PYTHON", "").strip()
    if not value:
        return AUTO
    return COMPILED if value == "0" else PURE


def import_twin(implementation: str) -> Tuple[ModuleType, ModuleType]:
    """Import the (decoder, encoder) modules of one twin; ImportError if not there."""
    return tuple(importlib.import_module(f"{__package__}.{name}") for name in TWINS[implementation])


def compiled_installed() -> bool:
    """True when any module of the compiled twin is installed, importable or not."""
    return any(importlib.util.find_spec(f"{__package__}.{name}") is not None for name in TWINS["cython"])


def _choose() -> Tuple[str, ModuleType, ModuleType]:
    mode = requested_mode()
    if mode == COMPILED:
        return ("cython",) + import_twin("cython")
    if mode == AUTO:
        try:
            return ("cython",) + import_twin("cython")
        except Exception as exc:  # noqa: BLE001 - a broken build falls back, but never silently
            if compiled_installed():
                warnings.warn(
                    f"zodb_json_codec: the compiled twin is installed but does not import "
                    f"({type(exc).__name__}: {exc}); using the pure-Python twin",
                    RuntimeWarning,
                    stacklevel=2,
                )
    return ("python",) + import_twin("python")


IMPLEMENTATION, _decode, _encode = _choose()

decode_zodb_record = _decode.decode_zodb_record
decode_zodb_record_for_pg = _decode.decode_zodb_record_for_pg
decode_zodb_record_for_pg_json = _decode.decode_zodb_record_for_pg_json
pickle_to_dict = _decode.pickle_to_dict
pickle_to_json = _decode.pickle_to_json
encode_zodb_record = _encode.encode_zodb_record
dict_to_pickle = _encode.dict_to_pickle
json_to_pickle = _encode.json_to_pickle
