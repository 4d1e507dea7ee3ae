"""Chooses the implementation behind the public API; the only module that knows both twins.

The Python twins (``_decode_python``, ``_encode_python``) are normative; the
Cython twins (``_decode_cython``, ``_encode_cython``) replace them when they are built.
The environment decides (``_switch.requested_mode``, which the build reads too),
once, at import:

* nothing set: the Cython twins if they import, else the Python twins;
* ``ZODB_JSON_CODEC_PURE_PYTHON=0`` (or ``PURE_PYTHON=0``) or
  ``ZODB_JSON_CODEC_REQUIRE_EXT=1``: the Cython twins are required (their
  ImportError propagates);
* ``ZODB_JSON_CODEC_PURE_PYTHON`` (else ``PURE_PYTHON``) set to anything
  else: the Python twins.

PyPy always runs the Python twins.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from types import ModuleType
from typing import Tuple

from ._switch import AUTO, CYTHON, PYTHON, requested_mode  # noqa: F401 (PYTHON: for callers)

DECODE_FUNCTIONS = (
    "decode_zodb_record",
    "decode_zodb_record_for_pg",
    "decode_zodb_record_for_pg_json",
    "pickle_to_dict",
    "pickle_to_json",
)
ENCODE_FUNCTIONS = ("encode_zodb_record", "encode_zodb_record_from_pg_json", "dict_to_pickle", "json_to_pickle")

#: Module names of each twin: (decoder, encoder), keyed by IMPLEMENTATION.
TWINS = {
    "python": ("_decode_python", "_encode_python"),
    "cython": ("_decode_cython", "_encode_cython"),
}

def import_twin(implementation: str) -> Tuple[ModuleType, ModuleType]:
    """Import the (decoder, encoder) modules of one twin; ImportError if not there."""
    return tuple(importlib.import_module(f"{__package__}.{name}") for name in TWINS[implementation])


def cython_installed() -> bool:
    """True when any module of the Cython twin is installed, importable or not."""
    return any(importlib.util.find_spec(f"{__package__}.{name}") is not None for name in TWINS["cython"])


def _choose() -> Tuple[str, ModuleType, ModuleType]:
    mode = requested_mode()
    if mode == CYTHON:
        return ("cython",) + import_twin("cython")
    if mode == AUTO:
        try:
            return ("cython",) + import_twin("cython")
        except Exception as exc:  # noqa: BLE001 - a broken build falls back, but never silently
            if cython_installed():
                warnings.warn(
                    f"zodb_json_codec: the Cython twin is installed but does not import "
                    f"({type(exc).__name__}: {exc}); using the Python twin",
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
encode_zodb_record_from_pg_json = _encode.encode_zodb_record_from_pg_json
dict_to_pickle = _encode.dict_to_pickle
json_to_pickle = _encode.json_to_pickle
